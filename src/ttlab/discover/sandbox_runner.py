"""The sandbox runner: a standalone script (no ttlab imports) that forks each program in isolation.

Started by `ttlab.discover.sandbox` with a scrubbed environment and BLAS/OpenMP thread caps. At start it
becomes a child subreaper (so every orphaned descendant of a program is re-parented to it and can be
found), moves itself into a fresh network namespace when the OS allows (root or user namespaces), and
imports numpy/scipy once (the pre-forked "zygote"). Then, per JSON request on stdin, it forks a child
that: starts a new session/process group, redirects stdout/stderr to files in its work dir, closes every
other fd, sets rlimits (AS, CPU, FSIZE, NOFILE, NPROC, CORE=0), drops to a per-runner uid when root,
clears the environment, then runs the program and its `solve` entry and saves the result with
`np.save(allow_pickle=False)`. The runner enforces the wall clock (SIGKILL to the whole group), then kills
and reaps every leftover descendant (escaped sessions included) before replying one JSON line on stdout.
"""

import ctypes
import json
import os
import resource
import select
import signal
import sys
import time
import traceback

PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET = 0x40000000
SAFE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


PRELOAD = [
    "numpy", "scipy", "scipy.optimize", "scipy.signal", "scipy.linalg", "scipy.spatial", "scipy.special",
    "scipy.stats", "scipy.interpolate", "scipy.fft", "scipy.sparse", "scipy.integrate", "math", "cmath",
    "random", "itertools", "functools", "collections", "heapq", "bisect", "json", "time", "fractions",
    "decimal", "statistics", "dataclasses", "typing", "copy", "warnings", "traceback", "re", "string",
    "operator", "numbers", "struct", "array", "ctypes",
]
"""Imported before privileges are dropped: with the Python installation unreadable to the sandbox uid
(e.g. under /root), a program can import exactly these (and what they pull in)."""


def preload_modules():
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def setup_runner():
    """Subreaper + network namespace + uid choice. Returns the capability report."""
    libc = _libc()
    subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    net = libc.unshare(CLONE_NEWNET) == 0
    root = os.geteuid() == 0
    uid = 200000 + os.getpid() if root else None  # unique per live runner: rlimit NPROC and kill(-1) are per uid
    return {"subreaper": subreaper, "net_isolated": net, "uid": uid}


def child_main(req, uid):
    """In the forked child: isolate, run the program, save its result. Never returns."""
    code = 0
    try:
        os.setsid()
        os.chdir(req["workdir"])
        for sig in (signal.SIGXFSZ, signal.SIGPIPE, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        nul = os.open(os.devnull, os.O_RDONLY)
        out = os.open("stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(nul, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.closerange(3, 65536)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        cpu = int(req["cpu_s"])
        limits = [
            (resource.RLIMIT_AS, req["mem_bytes"]),
            (resource.RLIMIT_CPU, cpu),
            (resource.RLIMIT_FSIZE, req["fsize_bytes"]),
            (resource.RLIMIT_NOFILE, req["nofile"]),
            (resource.RLIMIT_CORE, 0),
        ]
        if uid is not None:
            limits.append((resource.RLIMIT_NPROC, req["nproc"]))
        for what, v in limits:
            hard = v + 1 if what == resource.RLIMIT_CPU else v  # SIGXCPU at the soft limit, SIGKILL at hard
            resource.setrlimit(what, (v, hard))
        if not req.get("preloaded"):
            preload_modules()  # fresh-interpreter mode: the imports a program may need, before the uid drop
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        os.environ.clear()
        os.environ.update(SAFE_ENV)
        os.environ["HOME"] = req["workdir"]
        os.environ["TMPDIR"] = req["workdir"]
        code = run_program(req)
    except BaseException:  # the child must never fall back into the runner loop
        code = 70
        try:
            traceback.print_exc()
        except BaseException:
            pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code)


def _write_error(kind, message):
    with open("error.json", "w") as f:
        json.dump({"type": kind, "message": str(message)[:2000]}, f)


def run_program(req):
    """Exec the program, call its entry, save the result. Returns the exit code."""
    import numpy as np

    glb = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        with open("program.py") as f:
            src = f.read()
        exec(compile(src, "program.py", "exec"), glb)
        entry = req.get("entry")
        if not entry:
            return 0
        fn = glb.get(entry)
        if not callable(fn):
            _write_error("MissingEntry", f"program defines no function {entry!r}")
            return 1
        parent = np.load("parent.npy", allow_pickle=False) if os.path.exists("parent.npy") else None
        out = fn(parent, float(req["budget_s"]), int(req["seed"]))
        reported = None
        if isinstance(out, dict):
            reported = out.get("score")
            out = out.get("construction")
        arr = np.asarray(out)
        if arr.dtype == object:
            _write_error("WrongType", f"{entry} returned {type(out).__name__} that is not a numeric array")
            return 1
        np.save("result.npy", arr, allow_pickle=False)
        if reported is not None:
            try:
                reported = float(reported)
            except (TypeError, ValueError):
                reported = None
            with open("reported.json", "w") as f:
                json.dump({"score": reported}, f)
        return 0
    except SystemExit as e:
        _write_error("SystemExit", f"program called sys.exit({e.code!r}) before returning a result")
        return e.code if isinstance(e.code, int) else 1
    except MemoryError as e:
        _write_error("MemoryError", f"memory limit exceeded ({e})")
        return 1
    except BaseException as e:
        traceback.print_exc()
        _write_error(type(e).__name__, f"{type(e).__name__}: {e}")
        return 1


def _children_pids():
    """PIDs whose parent is this process (all orphaned descendants land here: we are a subreaper)."""
    me = os.getpid()
    out = []
    try:
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as f:
                out += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return out


def _kill_uid(uid):
    """kill(-1, SIGKILL) from a helper with the sandbox uid: hits every process that uid owns."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        except BaseException:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def sweep(uid, deadline_s=5.0):
    """Kill and reap every remaining descendant. Returns how many processes were reaped."""
    reaped = 0
    t_end = time.monotonic() + deadline_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped  # no child left: since we are a subreaper, no descendant is left anywhere
        if pid:
            reaped += 1
            continue
        if uid is not None:
            _kill_uid(uid)
        for p in _children_pids():
            try:
                os.killpg(p, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if time.monotonic() > t_end:
            return reaped
        time.sleep(0.002)


def handle(req, caps):
    uid = caps["uid"]
    if uid is not None:
        os.chown(req["workdir"], uid, uid)
        for name in os.listdir(req["workdir"]):
            os.chown(os.path.join(req["workdir"], name), uid, uid)
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child_main(req, uid)
    timed_out = False
    status = None
    try:
        pfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pfd = None
    deadline = t0 + float(req["wall_s"])
    while status is None:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            _, status = os.waitpid(pid, 0)
            break
        if pfd is not None:
            select.select([pfd], [], [], left)
        else:
            time.sleep(min(left, 0.002))
        p, st = os.waitpid(pid, os.WNOHANG)
        if p:
            status = st
    if pfd is not None:
        os.close(pfd)
    wall = time.monotonic() - t0
    reaped = sweep(uid)
    reply = {"wall_s": wall, "timed_out": timed_out, "leftover_killed": reaped,
             "returncode": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
             "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}
    return reply


def main():
    caps = setup_runner()
    preloaded = "--no-preload" not in sys.argv
    if preloaded:
        preload_modules()  # the zygote: every forked child inherits these imports
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing but replies goes to the reply pipe
    out.write(json.dumps({"ready": True, **caps}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = handle({**json.loads(line), "preloaded": preloaded}, caps)
        except Exception as e:
            reply = {"runner_error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply) + "\n")
        if "--once" in sys.argv:
            break


if __name__ == "__main__":
    main()
