"""The hard sandbox: run an untrusted program in an isolated process and hand back plain arrays.

Layering (see `sandbox_runner.py` for what happens inside):

    run_program / SandboxPool  (this process: temp dir, request, backstop timeout, result parsing)
        -> Runner (a `python sandbox_runner.py` process: subreaper, own net namespace, numpy preloaded)
            -> forked child per program (own session/process group, rlimits, own uid, scrubbed env)

What is isolated (as root, the normal container case): the network (fresh empty net namespace), the
parent's environment (scrubbed; /proc/<pid>/environ unreadable under the sandbox uid), writes (only the
program's own temp dir and world-writable dirs such as /tmp are writable to the sandbox uid), processes
(NPROC per runner uid; every descendant, escaped sessions included, is SIGKILLed and reaped before the
result is returned), memory (RLIMIT_AS), CPU (RLIMIT_CPU), file sizes (RLIMIT_FSIZE: caps stdout/stderr
and result files), open files (RLIMIT_NOFILE). Not isolated: reading world-readable files; as non-root the
uid switch and NPROC are skipped and the network is only cut where user namespaces are allowed. When the
Python installation is not readable by the sandbox uid (here it lives under /root, mode 0700), a program can
import only the modules the runner preloads (`sandbox_runner.PRELOAD`: numpy, scipy.*, common stdlib).
Results come back as `result.npy` loaded with `allow_pickle=False` (never pickle).
"""

from __future__ import annotations

import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

RUNNER = Path(__file__).with_name("sandbox_runner.py")
_SIGNAMES = {int(s): s.name for s in signal.Signals}


@dataclass(frozen=True)
class Limits:
    """Resource limits for one program."""

    wall_s: float = 30.0
    """Wall-clock limit (s); the whole process group is SIGKILLed when it passes."""
    cpu_s: float | None = None
    """CPU-time limit (s); default wall_s + 1."""
    memory_mb: int = 3072
    """Address-space limit (RLIMIT_AS) in MiB."""
    fsize_mb: int = 32
    """Largest file the program may write (stdout/stderr/result included), MiB."""
    nofile: int = 64
    """Open-file limit."""
    nproc: int = 16
    """Process limit for the program's uid (root only)."""
    output_chars: int = 8000
    """stdout/stderr kept (tail) in the result."""


@dataclass
class SandboxResult:
    """What came back from one program run. `output` is untrusted data: verify it."""

    ok: bool
    """Ran to the end and returned an array (which still needs verifying)."""
    status: str
    """ok | timeout | cpu_limit | memory_limit | output_limit | exit | signal | error | no_result | bad_result | sandbox_error"""
    reason: str
    """Human-readable explanation of the status."""
    output: np.ndarray | None = None
    reported_score: float | None = None
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    signal: int | None = None
    wall_s: float = 0.0
    leftover_killed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _tail(path: Path, n: int) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size > n:
                f.seek(size - n)
            data = f.read(n)
        txt = data.decode("utf-8", errors="replace")
        return (f"[... {size - n} bytes truncated ...]\n" + txt) if size > n else txt
    except OSError:
        return ""


def _runner_env() -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "VECLIB_MAXIMUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return env


class Runner:
    """One runner process. `preload=True` is the pre-forked zygote (numpy/scipy already imported)."""

    def __init__(self, preload: bool = True, once: bool = False) -> None:
        args = [sys.executable, "-s", str(RUNNER)] + ([] if preload else ["--no-preload"]) + (["--once"] if once else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=_runner_env(), cwd="/", start_new_session=True, text=True, bufsize=1)
        line = self._readline(120.0)
        if line is None:
            self.close()
            raise RuntimeError("sandbox runner did not start (no ready line within 120 s)")
        self.caps = json.loads(line)

    def _readline(self, timeout: float) -> str | None:
        assert self.proc.stdout is not None
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return None
        line = self.proc.stdout.readline()
        return line or None

    def request(self, req: dict, backstop_s: float) -> dict | None:
        """Send one request; None when the runner died or hung past the backstop (then it is killed)."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self._readline(backstop_s)
        except (OSError, ValueError):
            line = None
        if line is None:
            self.close()
            return None
        return json.loads(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f:
                    f.close()
            except OSError:
                pass


def _classify(reply: dict, wd: Path, limits: Limits) -> SandboxResult:
    rc, sig = reply.get("returncode"), reply.get("signal")
    out = _tail(wd / "stdout.txt", limits.output_chars)
    err = _tail(wd / "stderr.txt", limits.output_chars)
    base = dict(stdout=out, stderr=err, returncode=rc, signal=sig, wall_s=float(reply.get("wall_s", 0.0)),
                leftover_killed=int(reply.get("leftover_killed", 0)))
    error = None
    if (wd / "error.json").is_file() and (wd / "error.json").stat().st_size < 100_000:
        try:
            error = json.loads((wd / "error.json").read_text())
        except (ValueError, OSError):
            error = None
    if reply.get("timed_out"):
        return SandboxResult(False, "timeout", f"wall-clock limit {limits.wall_s:g}s exceeded; process group killed", **base)
    if sig is not None:
        name = _SIGNAMES.get(sig, str(sig))
        if name == "SIGXCPU" or (name == "SIGKILL" and reply.get("wall_s", 0) >= (limits.cpu_s or limits.wall_s + 1)):
            return SandboxResult(False, "cpu_limit", f"CPU-time limit exceeded ({name})", **base)
        if name == "SIGXFSZ":
            return SandboxResult(False, "output_limit", f"file size limit {limits.fsize_mb} MiB exceeded (output or result too large)", **base)
        return SandboxResult(False, "signal", f"killed by {name}", **base)
    if isinstance(error, dict):
        kind, msg = str(error.get("type", "")), str(error.get("message", ""))[:500]
        if kind == "MemoryError":
            return SandboxResult(False, "memory_limit", f"memory limit {limits.memory_mb} MiB exceeded", **base)
        if kind == "SystemExit":
            return SandboxResult(False, "exit", msg, **base)
        if "File too large" in msg:
            return SandboxResult(False, "output_limit", f"file size limit {limits.fsize_mb} MiB exceeded", **base)
        return SandboxResult(False, "error", msg or kind, **base)
    if rc not in (0, None):
        return SandboxResult(False, "exit", f"program exited with code {rc} before returning a result", **base)
    res = wd / "result.npy"
    if not res.is_file():
        return SandboxResult(False, "no_result", f"program exited (code {rc}) without returning a result", **base)
    if res.stat().st_size > limits.fsize_mb * 2**20:
        return SandboxResult(False, "bad_result", "result file too large", **base)
    try:
        arr = np.load(res, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        return SandboxResult(False, "bad_result", f"result.npy unreadable without pickle ({type(e).__name__}: {e})"[:300], **base)
    if not isinstance(arr, np.ndarray):
        return SandboxResult(False, "bad_result", "result.npy is not a single array", **base)
    reported = None
    rp = wd / "reported.json"
    if rp.is_file() and rp.stat().st_size < 10_000:
        try:
            v = json.loads(rp.read_text()).get("score")
            reported = float(v) if isinstance(v, (int, float)) else None
        except (ValueError, OSError, AttributeError):
            reported = None
    return SandboxResult(True, "ok", "returned an array", output=arr, reported_score=reported, **base)


def _prepare(code: str, parent: np.ndarray | None, base_dir: str | None) -> Path:
    wd = Path(tempfile.mkdtemp(prefix="ttlab-sbx-", dir=base_dir))
    (wd / "program.py").write_text(code)
    if parent is not None:
        np.save(wd / "parent.npy", np.asarray(parent, dtype=np.float64), allow_pickle=False)
    return wd


def _request(wd: Path, limits: Limits, entry: str | None, budget_s: float, seed: int) -> dict:
    return {"workdir": str(wd), "entry": entry, "budget_s": budget_s, "seed": seed, "wall_s": limits.wall_s,
            "cpu_s": limits.cpu_s or (limits.wall_s + 1), "mem_bytes": limits.memory_mb * 2**20,
            "fsize_bytes": limits.fsize_mb * 2**20, "nofile": limits.nofile, "nproc": limits.nproc}


def _run_on(runner: Runner, code: str, parent, limits: Limits, entry, budget_s, seed, base_dir) -> SandboxResult:
    wd = _prepare(code, parent, base_dir)
    try:
        reply = runner.request(_request(wd, limits, entry, budget_s, seed), backstop_s=limits.wall_s + 30.0)
        if reply is None:
            return SandboxResult(False, "sandbox_error", "sandbox runner died or hung; it was killed and is restarted")
        if "runner_error" in reply:
            return SandboxResult(False, "sandbox_error", reply["runner_error"])
        return _classify(reply, wd, limits)
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def run_program(code: str, *, parent: np.ndarray | None = None, entry: str | None = "solve",
                budget_s: float = 5.0, seed: int = 0, limits: Limits = Limits(), preload: bool = True,
                base_dir: str | None = None) -> SandboxResult:
    """Run one program in a fresh runner (an interpreter start + imports, then the isolated fork).

    With `entry`, the program's `entry(parent, budget_s, seed)` is called and its array returned;
    with `entry=None` the script just runs (its own `result.npy`, if any, is returned).
    """
    runner = Runner(preload=preload, once=True)
    try:
        return _run_on(runner, code, parent, limits, entry, budget_s, seed, base_dir)
    finally:
        runner.close()


@dataclass
class Job:
    """One program to run in a pool."""

    code: str
    parent: np.ndarray | None = None
    budget_s: float = 5.0
    seed: int = 0
    entry: str | None = "solve"


class SandboxPool:
    """A bounded pool: `workers` pre-forked runners, each running one program at a time.

    `submit` returns a Future; at most `workers` programs run at once, the rest wait. A runner that dies
    or hangs is killed and replaced, so one hostile program never takes the pool down.
    """

    def __init__(self, workers: int = 2, limits: Limits = Limits(), preload: bool = True,
                 base_dir: str | None = None) -> None:
        if workers < 1:
            raise ValueError(f"SandboxPool: workers must be >= 1, got {workers}")
        self.limits, self.preload, self.base_dir = limits, preload, base_dir
        self._idle: queue.Queue[Runner] = queue.Queue()
        self._all: list[Runner] = []
        self._lock = threading.Lock()
        for _ in range(workers):
            self._add_runner()
        self._exec = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox")
        self.caps = self._all[0].caps

    def _add_runner(self) -> None:
        r = Runner(preload=self.preload)
        with self._lock:
            self._all.append(r)
        self._idle.put(r)

    def _run(self, job: Job, limits: Limits) -> SandboxResult:
        runner = self._idle.get()
        try:
            res = _run_on(runner, job.code, job.parent, limits, job.entry, job.budget_s, job.seed, self.base_dir)
        except Exception:
            runner.close()
            raise
        finally:
            if runner.alive():
                self._idle.put(runner)
            else:
                with self._lock:
                    self._all.remove(runner)
                self._add_runner()
        return res

    def submit(self, job: Job, limits: Limits | None = None) -> Future:
        return self._exec.submit(self._run, job, limits or self.limits)

    def map(self, jobs: list[Job], limits: Limits | None = None) -> list[SandboxResult]:
        return [f.result() for f in [self.submit(j, limits) for j in jobs]]

    def close(self) -> None:
        self._exec.shutdown(wait=True)
        with self._lock:
            for r in self._all:
                r.close()
            self._all.clear()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def timed(fn, *args, **kw) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0
