"""The hard sandbox: run an untrusted program in an isolated process and hand back plain arrays.

Layering (see `sandbox_runner.py` and `sandbox_confine.py` for what happens inside):

    run_program / SandboxPool  (this process: request, deadlines, strict parsing of the reply)
        -> Runner (a `python sandbox_runner.py` process: subreaper, own net namespace, numpy preloaded,
                   then pivoted into the minimal root: interpreter, packages, system libraries, read-only)
            -> forked child per program (own session, private mount/IPC namespaces, rlimits, own uid,
               no_new_privs, seccomp filter (no execve, no Unix sockets, no SysV IPC), scrubbed env)

Trust boundary: the program's output (stdout/stderr tails, its result array, its error/claimed score)
comes back through anonymous files the RUNNER created and holds, framed on the runner's reply pipe; this
process never opens a path in the program's work dir (which, with the mount namespace, it cannot even
see). Every wait has a deadline (`Runner.request`, `result_within`); every reply is size-capped and parsed
strictly (`sandbox_npy.parse_npy`: no np.load, no pickle); anything malformed becomes a failed
`SandboxResult` (status bad_result / sandbox_error), never an exception here. What each layer does and
does not isolate: docs/notes/sandbox.md. A layer this machine cannot provide is named in a
`SandboxWarning` when the pool starts (`caps["missing"]`).
"""

from __future__ import annotations

import base64
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ttlab.discover.sandbox_confine import SAFE_ENV, check_exposable
from ttlab.discover.sandbox_npy import NpyError, parse_npy

RUNNER = Path(__file__).with_name("sandbox_runner.py")
CHANNELS = ("stdout", "stderr", "meta", "result")
META_CAP = 16384
MAX_HEAD = 65536
BACKSTOP_S = 30.0
"""Seconds past a program's wall limit before its runner counts as hung (killed, restarted)."""
MAX_RESULT_ELEMENTS = 4_000_000
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
    tmp_mb: int = 64
    """Size of each private tmpfs (/tmp, /var/tmp, /dev/shm) of a run, MiB (RAM outside RLIMIT_AS)."""


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



class SandboxWarning(UserWarning):
    """A confinement layer is unavailable on this machine (named in the message)."""


_WARNED: set[str] = set()


def _warn_missing(caps: dict) -> None:
    for layer, why in sorted(caps.get("missing", {}).items()):
        if layer not in _WARNED:
            _WARNED.add(layer)
            warnings.warn(f"sandbox: layer {layer!r} unavailable ({why}); see docs/notes/sandbox.md",
                          SandboxWarning, stacklevel=3)


class RunnerBroken(Exception):
    """The runner died, hung past a deadline, or sent a malformed reply (it is then killed)."""


class Runner:
    """One runner process. `preload=True` is the pre-forked zygote (numpy/scipy already imported); `expose`:
    host paths put in the programs' view read-only at the same path (directories also on sys.path)."""

    def __init__(self, preload: bool = True, once: bool = False, layers_off: tuple[str, ...] = (),
                 expose: tuple[str, ...] = ()) -> None:
        config = json.dumps({"layers_off": list(layers_off), "expose": [check_exposable(p) for p in expose]})
        args = ([sys.executable, "-s", str(RUNNER), "--config", config] + ([] if preload else ["--no-preload"])
                + (["--once"] if once else []))
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=dict(SAFE_ENV), cwd="/", start_new_session=True, bufsize=0)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._buf = bytearray()
        try:
            self.caps = json.loads(self._read_line(time.monotonic() + 120.0))
        except (RunnerBroken, ValueError) as e:
            self.close()
            raise RuntimeError(f"sandbox runner did not start ({e})") from e

    # ---- framed I/O, every read and write under a deadline ----
    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        r = select.select([self._out], [], [], left)[0] if left > 0 else []
        if not r:
            raise RunnerBroken("deadline passed")
        chunk = os.read(self._out, 1 << 20)
        if not chunk:
            raise RunnerBroken("runner exited")
        self._buf += chunk

    def _read_line(self, deadline: float) -> bytes:
        while b"\n" not in self._buf:
            if len(self._buf) > MAX_HEAD:
                raise RunnerBroken("reply header too long")
            self._fill(deadline)
        i = self._buf.index(b"\n")
        if i > MAX_HEAD:
            raise RunnerBroken("reply header too long")
        line = bytes(self._buf[:i])
        del self._buf[:i + 1]
        return line

    def _read_exact(self, n: int, deadline: float) -> bytes:
        while len(self._buf) < n:
            self._fill(deadline)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _write_all(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RunnerBroken("runner does not read its requests")
            if select.select([], [self._in], [], left)[1]:
                view = view[os.write(self._in, view):]

    def request(self, req: dict, backstop_s: float, caps: dict[str, int]) -> tuple[dict, list[bytes]]:
        """Send one request; (header, blobs). Raises RunnerBroken (after killing the runner) on any fault."""
        deadline = time.monotonic() + backstop_s
        try:
            self._write_all((json.dumps(req) + "\n").encode(), deadline)
            head = json.loads(self._read_line(deadline))
            if not isinstance(head, dict):
                raise RunnerBroken("reply header is not an object")
            if "runner_error" in head:
                return head, []
            lens = head.get("lens")
            if (not isinstance(lens, list) or len(lens) != len(CHANNELS)
                    or not all(type(n) is int and 0 <= n <= caps[c] for n, c in zip(lens, CHANNELS, strict=True))):
                raise RunnerBroken(f"reply blob sizes {lens!r:.100} out of bounds")
            return head, [self._read_exact(n, deadline) for n in lens]
        except (OSError, ValueError, RunnerBroken) as e:
            self.close()
            raise RunnerBroken(str(e)) from e

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


def _text(blob: bytes, total: Any, n_chars: int) -> str:
    """The last `n_chars` characters of an output stream, with a marker when anything was cut."""
    txt = blob.decode("utf-8", errors="replace")
    total = total if type(total) is int else len(blob)
    kept = txt[-n_chars:] if n_chars > 0 else ""
    cut = total - len(blob) + len(txt.encode("utf-8", errors="replace")) - len(kept.encode("utf-8", errors="replace"))
    return f"[... {cut} bytes truncated ...]\n{kept}" if cut > 0 else kept


def _meta(blob: bytes) -> dict:
    try:
        m = json.loads(blob.decode("utf-8", errors="replace")) if blob else {}
    except ValueError:
        return {}
    return m if isinstance(m, dict) else {}


def _num(v: Any) -> float | None:
    return float(v) if type(v) in (int, float) else None


def _int(v: Any) -> int | None:
    return v if type(v) is int else None


def _classify(head: dict, blobs: list[bytes], limits: Limits) -> SandboxResult:
    """Turn a runner reply into a SandboxResult. The blobs are untrusted program output."""
    out_b, err_b, meta_b, res_b = blobs
    sizes = head.get("sizes") if isinstance(head.get("sizes"), dict) else {}
    rc, sig = _int(head.get("returncode")), _int(head.get("signal"))
    wall = _num(head.get("wall_s")) or 0.0
    extra: dict[str, Any] = {"cleanup_error": head["cleanup_error"]} if head.get("cleanup_error") else {}
    n = limits.output_chars
    base = dict(stdout=_text(out_b, sizes.get("stdout"), n), stderr=_text(err_b, sizes.get("stderr"), n), returncode=rc,
                signal=sig, wall_s=wall, leftover_killed=_int(head.get("leftover_killed")) or 0, extra=extra)
    meta = _meta(meta_b)
    error = meta.get("error") if isinstance(meta.get("error"), dict) else None
    if head.get("memory_killed"):
        return SandboxResult(False, "memory_limit", f"the run's processes together held more than {limits.memory_mb} MiB "
                             "resident; process group killed", **base)
    if head.get("timed_out"):
        return SandboxResult(False, "timeout", f"wall-clock limit {limits.wall_s:g}s exceeded; process group killed", **base)
    if sig is not None:
        name = _SIGNAMES.get(sig, str(sig))
        if name == "SIGXCPU" or (name == "SIGKILL" and wall >= (limits.cpu_s or limits.wall_s + 1)):
            return SandboxResult(False, "cpu_limit", f"CPU-time limit exceeded ({name})", **base)
        if name == "SIGXFSZ":
            return SandboxResult(False, "output_limit", f"file size limit {limits.fsize_mb} MiB exceeded (output or result too large)", **base)
        return SandboxResult(False, "signal", f"killed by {name}", **base)
    if error is not None:
        kind, msg = str(error.get("type", ""))[:100], str(error.get("message", ""))[:500]
        if kind == "MemoryError":
            return SandboxResult(False, "memory_limit", f"memory limit {limits.memory_mb} MiB exceeded", **base)
        if kind == "SystemExit":
            return SandboxResult(False, "exit", msg, **base)
        if "File too large" in msg:
            return SandboxResult(False, "output_limit", f"file size limit {limits.fsize_mb} MiB exceeded", **base)
        return SandboxResult(False, "error", msg or kind, **base)
    if rc not in (0, None):
        return SandboxResult(False, "exit", f"program exited with code {rc} before returning a result", **base)
    res_size = _int(sizes.get("result")) or len(res_b)
    if res_size > len(res_b):
        return SandboxResult(False, "bad_result", f"result too large ({res_size} bytes)", **base)
    if not res_b:
        return SandboxResult(False, "no_result", f"program exited (code {rc}) without returning a result", **base)
    try:
        arr = parse_npy(res_b, MAX_RESULT_ELEMENTS)
    except NpyError as e:
        return SandboxResult(False, "bad_result", f"result unreadable: {e}"[:300], **base)
    if meta.get("contract") == "run":
        n_points = _num(meta.get("n_points"))
        base["extra"] = {**extra, "contract": "run", "n_points": n_points}
        if n_points is None or arr.ndim != 1 or n_points != arr.shape[0]:
            return SandboxResult(False, "bad_result", f"run() returned n_points={meta.get('n_points')!r:.40} but "
                                 f"h_values has shape {arr.shape}", **base)
    return SandboxResult(True, "ok", "returned an array", output=arr, reported_score=_num(meta.get("reported")), **base)


def _request(code: str, parent: np.ndarray | None, limits: Limits, entry: str | None, budget_s: float, seed: int,
             base_dir: str | None) -> dict:
    par = None
    if parent is not None:
        p = np.ascontiguousarray(parent, dtype="<f8")
        par = {"shape": list(p.shape), "b64": base64.b64encode(p.tobytes()).decode()}
    return {"code": code, "parent": par, "entry": entry, "budget_s": float(budget_s), "seed": int(seed),
            "wall_s": limits.wall_s, "cpu_s": limits.cpu_s or (limits.wall_s + 1), "mem_bytes": limits.memory_mb * 2**20,
            "fsize_bytes": limits.fsize_mb * 2**20, "nofile": limits.nofile, "nproc": limits.nproc,
            "tmp_mb": limits.tmp_mb, "output_bytes": 4 * limits.output_chars, "result_cap": limits.fsize_mb * 2**20,
            "base_dir": base_dir}


def _run_on(runner: Runner, code: str, parent, limits: Limits, entry, budget_s, seed, base_dir,
            backstop_s: float = BACKSTOP_S) -> SandboxResult:
    req = _request(code, parent, limits, entry, budget_s, seed, base_dir)
    caps = {"stdout": req["output_bytes"], "stderr": req["output_bytes"], "meta": META_CAP, "result": req["result_cap"]}
    try:
        head, blobs = runner.request(req, limits.wall_s + backstop_s, caps)
    except RunnerBroken as e:
        return SandboxResult(False, "sandbox_error", f"sandbox runner died, hung or misbehaved ({e}); it was killed")
    if "runner_error" in head:
        return SandboxResult(False, "sandbox_error", str(head["runner_error"])[:500])
    return _classify(head, blobs, limits)


def run_program(code: str, *, parent: np.ndarray | None = None, entry: str | None = "auto",
                budget_s: float = 5.0, seed: int = 0, limits: Limits = Limits(), preload: bool = True,
                base_dir: str | None = None, layers_off: tuple[str, ...] = (),
                expose: tuple[str, ...] = ()) -> SandboxResult:
    """Run one program in a fresh runner (an interpreter start + imports, then the isolated fork).

    `entry="auto"` calls `solve(parent, budget_s, seed)` when the program defines it, else the seed's
    contract `run(seed, budget_s) -> (h_values, c5_bound, n_points)`; "solve"/"run" force one; with
    `entry=None` the script just runs (its own `result.npy` in its work dir, if any, is returned).
    `expose`: extra host paths the program sees read-only (see `Runner`); `layers_off`: confinement layers
    not to use (tests, benchmarks), each named in a `SandboxWarning`.
    """
    try:
        runner = Runner(preload=preload, once=True, layers_off=layers_off, expose=expose)
    except (RuntimeError, OSError) as e:
        return SandboxResult(False, "sandbox_error", f"sandbox runner failed to start: {e}"[:500])
    _warn_missing(runner.caps)
    try:
        return _run_on(runner, code, parent, limits, entry, budget_s, seed, base_dir)
    finally:
        runner.close()


def result_within(fut: Future, timeout_s: float) -> SandboxResult:
    """The future's SandboxResult, or a failed one when it does not arrive in time or raised."""
    try:
        res = fut.result(timeout=max(0.0, timeout_s))
    except FutureTimeout:
        fut.cancel()
        return SandboxResult(False, "sandbox_error", f"no sandbox result within the deadline ({timeout_s:.0f}s left)")
    except Exception as e:  # an executor fault is a failed sample, never a crash of the search
        return SandboxResult(False, "sandbox_error", f"sandbox executor failed: {type(e).__name__}: {e}"[:500])
    if not isinstance(res, SandboxResult):
        return SandboxResult(False, "sandbox_error", f"executor returned {type(res).__name__}, not a SandboxResult")
    return res


def batch_deadline_s(n_jobs: int, workers: int, limits: Limits) -> float:
    """Seconds within which `n_jobs` programs queued on `workers` runners must all be back (generous)."""
    rounds = -(-max(n_jobs, 1) // max(workers, 1))
    return rounds * (limits.wall_s + BACKSTOP_S) + 60.0


@dataclass
class Job:
    """One program to run in a pool."""

    code: str
    parent: np.ndarray | None = None
    budget_s: float = 5.0
    seed: int = 0
    entry: str | None = "auto"
    """auto (solve if defined, else the seed's run) | solve | run | None (plain script)."""


class SandboxPool:
    """A bounded pool: `workers` pre-forked runners, each running one program at a time.

    `submit` returns a Future that resolves to a SandboxResult (the pool never raises for a program);
    at most `workers` programs run at once, the rest wait. A runner that dies, hangs or misbehaves is
    killed and replaced, so one hostile program never takes the pool down. `expose` puts extra host paths in
    every program's view, read-only (a directory also goes on sys.path): the hook for a module of building
    blocks programs may import, e.g. `SandboxPool(expose=("src/ttlab/discover/library",))`.
    """

    def __init__(self, workers: int = 2, limits: Limits = Limits(), preload: bool = True,
                 base_dir: str | None = None, layers_off: tuple[str, ...] = (), backstop_s: float = BACKSTOP_S,
                 expose: tuple[str, ...] = ()) -> None:
        if workers < 1:
            raise ValueError(f"SandboxPool: workers must be >= 1, got {workers}")
        self.workers, self.limits, self.preload, self.base_dir = workers, limits, preload, base_dir
        self.backstop_s = backstop_s
        self.layers_off, self.expose = tuple(layers_off), tuple(expose)
        self._idle: queue.Queue[Runner] = queue.Queue()
        self._all: list[Runner] = []
        self._lock = threading.Lock()
        for _ in range(workers):
            self._add_runner()
        self._exec = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox")
        self.caps = self._all[0].caps
        _warn_missing(self.caps)

    def _add_runner(self) -> None:
        r = Runner(preload=self.preload, layers_off=self.layers_off, expose=self.expose)
        with self._lock:
            self._all.append(r)
        self._idle.put(r)

    def _get_runner(self) -> Runner:
        with self._lock:
            short = len(self._all) < self.workers
        if short and self._idle.empty():
            self._add_runner()  # a replacement that failed to start earlier
        return self._idle.get(timeout=300.0)

    def _run(self, job: Job, limits: Limits) -> SandboxResult:
        try:
            runner = self._get_runner()
        except (queue.Empty, RuntimeError, OSError) as e:
            return SandboxResult(False, "sandbox_error", f"no sandbox runner available ({e})"[:500])
        try:
            return _run_on(runner, job.code, job.parent, limits, job.entry, job.budget_s, job.seed, self.base_dir,
                           self.backstop_s)
        except Exception as e:  # a bug here must lose neither the sample nor the runner slot
            runner.close()
            return SandboxResult(False, "sandbox_error", f"sandbox failure: {type(e).__name__}: {e}"[:500])
        finally:
            if runner.alive():
                self._idle.put(runner)
            else:
                with self._lock:
                    if runner in self._all:
                        self._all.remove(runner)
                try:
                    self._add_runner()
                except (RuntimeError, OSError):
                    pass  # retried by the next job (_get_runner)

    def submit(self, job: Job, limits: Limits | None = None) -> Future:
        return self._exec.submit(self._run, job, limits or self.limits)

    def map(self, jobs: list[Job], limits: Limits | None = None) -> list[SandboxResult]:
        futs = [self.submit(j, limits) for j in jobs]
        deadline = time.monotonic() + batch_deadline_s(len(jobs), self.workers, limits or self.limits)
        return [result_within(f, deadline - time.monotonic()) for f in futs]

    def close(self) -> None:
        self._exec.shutdown(wait=True, cancel_futures=True)
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
