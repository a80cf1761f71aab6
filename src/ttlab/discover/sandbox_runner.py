"""The sandbox runner: a standalone script (no ttlab imports) that forks each program in isolation.

Started by `ttlab.discover.sandbox` with `sandbox_confine.SAFE_ENV` as its whole environment and its
settings as one JSON argument (`--config`: layers turned off, paths exposed on purpose). At start it
becomes a child subreaper (every orphaned descendant of a program is re-parented to it and can be found),
moves itself into a fresh network namespace when the OS allows, probes the confinement layers of
`sandbox_confine` once, imports numpy/scipy (the pre-forked "zygote"), and then pivots into the minimal
root (`sandbox_confine.build_view`, layer "fsview"): from then on neither the runner nor any program it
forks has the host's file system, only the interpreter's directories, the installed packages, the
system libraries and the exposed paths, all read-only.

Per request (one JSON line on stdin: the code, the parent array, the limits) it creates four anonymous
files it owns (memfds: stdout, stderr, meta, result) and forks a child that: starts a new session, puts
the memfds on fds 1-4 and closes every other fd, enters private mount/IPC/UTS namespaces (fresh
size-capped /tmp and /dev/shm; /proc without other users' processes), sets rlimits (AS, CPU, FSIZE,
NOFILE, NPROC, CORE=0), drops to a per-runner uid (root only), sets no_new_privs, installs the seccomp
filter (no execve from here on: the program runs in this forked interpreter, nothing else ever starts),
resets the environment, and runs the program as `__main__`. The runner enforces the wall clock (SIGKILL to
the group), kills and reaps every leftover descendant (escaped sessions included), then replies with one
JSON header line followed by the four blobs, read from ITS OWN descriptors (bounded: the tail of
stdout/stderr, the result only up to its cap). No path the program can change is ever opened by the
runner or the parent; without a mount namespace the on-disk work dir is removed by
`sandbox_cleanup.remove_tree` after every process of the run is dead.
"""

import base64
import ctypes
import importlib
import inspect
import json
import linecache
import os
import resource
import select
import signal
import stat
import sys
import tempfile
import time
import traceback
import types

import sandbox_cleanup
import sandbox_confine

PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET = 0x40000000
SAFE_ENV = sandbox_confine.SAFE_ENV
FD_META, FD_RESULT = 3, 4
CHANNELS = ("stdout", "stderr", "meta", "result")
META_CAP = 16384

PRELOAD = [
    "numpy", "scipy", "scipy.optimize", "scipy.signal", "scipy.linalg", "scipy.spatial", "scipy.special",
    "scipy.stats", "scipy.interpolate", "scipy.fft", "scipy.sparse", "scipy.integrate", "math", "cmath",
    "random", "itertools", "functools", "collections", "heapq", "bisect", "json", "time", "fractions",
    "decimal", "statistics", "dataclasses", "typing", "copy", "warnings", "traceback", "re", "string",
    "operator", "numbers", "struct", "array", "ctypes", "inspect",
]
"""Imported once by the zygote, so a program's `import numpy` costs nothing. A program may import anything
else the view holds: the standard library and the installed packages (never the project checkout)."""


def preload_modules():
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def setup_runner(layers_off):
    """Subreaper + network namespace + uid choice + layer probe. Returns the capability report."""
    libc = ctypes.CDLL(None, use_errno=True)
    subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    net = "netns" not in layers_off and libc.unshare(CLONE_NEWNET) == 0
    root = os.geteuid() == 0
    uid = 200000 + os.getpid() if root else None  # unique per live runner: rlimit NPROC and kill(-1) are per uid
    missing = {k: v for k, v in sandbox_confine.probe().items() if v}
    for k in layers_off:
        missing[k] = "turned off by the caller"
    if not net:
        missing["netns"] = missing.get("netns") or "unshare(CLONE_NEWNET) refused"
    if uid is None:
        missing["uid"] = "runner is not root: no per-run uid, no NPROC limit"
    return {"subreaper": subreaper, "net_isolated": net, "uid": uid,
            "mountns": "mountns" not in missing, "seccomp": "seccomp" not in missing,
            "readonly_root": "mountns" not in missing and "readonly_root" not in missing,
            "no_new_privs": "no_new_privs" not in missing, "missing": missing}


def setup_view(caps, layers_off, expose):
    """Pivot the runner into the minimal root (layer "fsview"), after the zygote's imports. Without it the
    programs keep the host's tree, read-only with /run, /home and /root hidden (named in the warning).
    A failure after the pivot raises: the runner exits rather than run programs in a half-built root."""
    caps["fsview"], caps["expose"] = False, [os.path.abspath(p) for p in expose]
    if "fsview" in layers_off:
        return
    if not caps["mountns"]:
        caps["missing"]["fsview"] = "needs the private mount namespace, which is missing"
        return
    try:
        sandbox_confine.build_view(sandbox_confine.view_paths(expose))
    except OSError as e:
        caps["missing"]["fsview"] = str(e)[:300] or type(e).__name__
        return
    caps["fsview"] = caps["readonly_root"] = True


# ---- the child ---------------------------------------------------------------------------------
def child_main(req, fds, caps, workdir):
    """In the forked child: isolate, run the program, write the result. Never returns."""
    code = 0
    try:
        os.setsid()
        for sig in (signal.SIGXFSZ, signal.SIGPIPE, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        nul = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nul, 0)
        for fd, target in zip(fds, (1, 2, FD_META, FD_RESULT), strict=True):
            os.dup2(fd, target)  # dup2 clears close-on-exec on the target
        os.closerange(FD_RESULT + 1, 65536)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        uid = caps["uid"]
        if not req.get("preloaded"):
            preload_modules()  # fresh-interpreter mode: the imports a program may need, before the uid drop
        if caps["mountns"]:
            workdir = sandbox_confine.private_mounts(req["tmp_mb"], uid, in_view=caps["fsview"],
                                                     expose=caps["expose"])
            if caps["readonly_root"] and not caps["fsview"]:
                sandbox_confine.readonly_root()
        if caps["fsview"]:  # only what exists in the view (no runner dir, no editable project path)
            sys.path[:] = [p for p in sys.path if p and os.path.isdir(p)]
        sys.path += [p for p in caps["expose"] if os.path.isdir(p) and p not in sys.path]
        os.chdir(workdir)
        limits = [
            (resource.RLIMIT_AS, req["mem_bytes"]),
            (resource.RLIMIT_CPU, int(req["cpu_s"])),
            (resource.RLIMIT_FSIZE, req["fsize_bytes"]),
            (resource.RLIMIT_NOFILE, req["nofile"]),
            (resource.RLIMIT_CORE, 0),
        ]
        if uid is not None:
            limits.append((resource.RLIMIT_NPROC, req["nproc"]))
        for what, v in limits:
            hard = v + 1 if what == resource.RLIMIT_CPU else v  # SIGXCPU at the soft limit, SIGKILL at hard
            resource.setrlimit(what, (v, hard))
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        if caps["no_new_privs"]:
            sandbox_confine.no_new_privs()
        if caps["seccomp"]:
            sandbox_confine.install_seccomp()
        os.environ.clear()
        os.environ.update(SAFE_ENV)
        os.environ["HOME"] = workdir
        os.environ["TMPDIR"] = workdir
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


def _write_fd(fd, data):
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _write_meta(**meta):
    _write_fd(FD_META, json.dumps(meta, default=str)[:META_CAP].encode())


def _error(kind, message):
    _write_meta(error={"type": kind, "message": str(message)[:2000]})


def _call_entry(glb, entry, parent, budget_s, seed):
    """Call the program's entry point. Returns (construction, reported score, n_points, contract)."""
    solve, run = glb.get("solve"), glb.get("run")
    if entry == "solve" or (entry == "auto" and callable(solve)):
        if not callable(solve):
            raise LookupError("program defines no function 'solve'")
        out = solve(parent, budget_s, seed)
        if isinstance(out, dict):
            return out.get("construction"), out.get("score"), None, "solve"
        return out, None, None, "solve"
    if entry in ("run", "auto") and callable(run):
        try:
            nparams = len(inspect.signature(run).parameters)
        except (TypeError, ValueError):
            nparams = 2
        out = run(seed, budget_s) if nparams >= 2 else (run(seed) if nparams == 1 else run())
        if isinstance(out, dict):
            return out.get("h_values"), out.get("c5_bound"), out.get("n_points"), "run"
        if isinstance(out, (tuple, list)) and len(out) == 3:
            return out[0], out[1], out[2], "run"
        raise TypeError(f"run() must return (h_values, c5_bound, n_points), got {type(out).__name__}")
    raise LookupError(f"program defines no function {entry!r}" if entry != "auto"
                      else "program defines neither solve(parent, budget_s, seed) nor run(seed, budget_s)")


def _script_result():
    """Script mode: the program's own result.npy in its work dir, read here with the program's rights."""
    try:
        fd = os.open("result.npy", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        return os.read(fd, st.st_size)
    finally:
        os.close(fd)


def _num(v):
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError, OverflowError):
        return None


def run_program(req):
    """Exec the program, call its entry, write the result to FD_RESULT. Returns the exit code."""
    import numpy as np  # deferred on purpose: numpy is first imported by main() after the runner's set-up

    module = types.ModuleType("__main__")  # a real module: fork-based multiprocessing pickles its functions by name
    module.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = module
    glb = module.__dict__
    src = req["code"]
    linecache.cache["program.py"] = (len(src), None, src.splitlines(True), "program.py")  # tracebacks show lines
    try:
        exec(compile(src, "program.py", "exec"), glb)
        entry = req.get("entry")
        if not entry:
            data = _script_result()
            if data is not None:
                _write_fd(FD_RESULT, data)
            _write_meta(contract="script")
            return 0
        parent = req.get("parent_array")
        try:
            out, reported, n_points, contract = _call_entry(glb, entry, parent, float(req["budget_s"]), int(req["seed"]))
        except LookupError as e:
            _error("MissingEntry", str(e))
            return 1
        arr = np.asarray(out)
        if arr.dtype == object:
            _error("WrongType", f"{contract} returned {type(out).__name__} that is not a numeric array")
            return 1
        _write_fd(FD_RESULT, b"")
        with os.fdopen(FD_RESULT, "wb", closefd=False) as f:  # straight to the channel: FSIZE stops a huge one
            np.save(f, arr, allow_pickle=False)
        _write_meta(contract=contract, reported=_num(reported), n_points=_num(n_points))
        return 0
    except SystemExit as e:
        _error("SystemExit", f"program called sys.exit({e.code!r}) before returning a result")
        return e.code if isinstance(e.code, int) else 1
    except MemoryError as e:
        _error("MemoryError", f"memory limit exceeded ({e})")
        return 1
    except BaseException as e:
        traceback.print_exc()
        _error(type(e).__name__, f"{type(e).__name__}: {e}")
        return 1


# ---- the runner side -----------------------------------------------------------------------------
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


def _anon_file(name):
    """A file only this process holds: memfd, else an unlinked temp file (O_TMPFILE / mkstemp+unlink)."""
    try:
        return os.memfd_create(f"ttlab-{name}", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        fd, path = tempfile.mkstemp(prefix="ttlab-sbx-chan-")
        os.unlink(path)
        return fd


def _read_channel(fd, cap, tail):
    """(bytes, total size): the last `cap` bytes when `tail`, else all of it or nothing when over `cap`."""
    size = os.fstat(fd).st_size
    if size > cap and not tail:
        return b"", size
    start = max(0, size - cap)
    out = bytearray()
    while len(out) < size - start:
        chunk = os.pread(fd, min(1 << 20, size - start - len(out)), start + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out), size


PAGE = os.sysconf("SC_PAGE_SIZE")
RSS_POLL_S = 0.05


def tree_rss(root_pid):
    """Resident bytes of every descendant of `root_pid` (orphans land on the runner, the subreaper)."""
    total, stack, seen = 0, [root_pid], set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            if p != root_pid:
                with open(f"/proc/{p}/statm") as f:
                    total += int(f.read().split()[1]) * PAGE
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    stack += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            pass
    return total


def _kill_group(pid):
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


PARENT_PID = None  # the ttlab process that started this runner (set by main)


def _orphaned():
    """True once the process that started the runner is gone (killed without closing its pool): the program
    must not run on to its wall limit for nobody."""
    return PARENT_PID is not None and os.getppid() != PARENT_PID


def _wait(pid, wall_s, t0, mem_bytes):
    """Wait for the child until the wall clock; SIGKILL its group past it, when the resident memory
    of all the run's processes together passes `mem_bytes` (RLIMIT_AS is per process), or when the runner's
    parent has died. Returns (status, timed_out, memory_killed)."""
    try:
        pfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pfd = None
    deadline = t0 + wall_s
    me = os.getpid()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                _kill_group(pid)
                return os.waitpid(pid, 0)[1], True, False
            if pfd is not None:
                select.select([pfd], [], [], min(left, RSS_POLL_S))
            else:
                time.sleep(min(left, 0.002))
            p, st = os.waitpid(pid, os.WNOHANG)
            if p:
                return st, False, False
            if _orphaned():
                _kill_group(pid)
                return os.waitpid(pid, 0)[1], True, False
            if tree_rss(me) > mem_bytes:
                _kill_group(pid)
                return os.waitpid(pid, 0)[1], False, True
    finally:
        if pfd is not None:
            os.close(pfd)


def handle(req, caps):
    """Run one program; returns (header dict, list of blobs)."""
    import numpy as np  # deferred on purpose: numpy is first imported by main() after the runner's set-up

    uid = caps["uid"]
    if req.get("parent") is not None:
        p = req["parent"]
        req["parent_array"] = np.frombuffer(base64.b64decode(p["b64"]), dtype="<f8").reshape(p["shape"]).copy()
    workdir = None
    if not caps["mountns"]:
        workdir = tempfile.mkdtemp(prefix="ttlab-sbx-", dir=req.get("base_dir"))
        if uid is not None:
            os.chown(workdir, uid, uid)
    fds = [_anon_file(c) for c in CHANNELS]
    try:
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            child_main(req, fds, caps, workdir)
        status, timed_out, memory_killed = _wait(pid, float(req["wall_s"]), t0, int(req["mem_bytes"]))
        wall = time.monotonic() - t0
        reaped = sweep(uid)
        cleanup_error = ""
        if workdir is not None:
            try:
                sandbox_cleanup.remove_tree(workdir)
            except OSError as e:
                cleanup_error = f"{type(e).__name__}: {e}"[:300]
        out_cap = int(req["output_bytes"])
        blobs, sizes = [], {}
        for name, fd, cap, tail in zip(CHANNELS, fds, (out_cap, out_cap, META_CAP, int(req["result_cap"])),
                                       (True, True, False, False), strict=True):
            data, size = _read_channel(fd, cap, tail)
            blobs.append(data)
            sizes[name] = size
    finally:
        for fd in fds:
            os.close(fd)
    head = {"wall_s": wall, "timed_out": timed_out, "memory_killed": memory_killed, "leftover_killed": reaped,
            "returncode": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "sizes": sizes, "lens": [len(b) for b in blobs], "cleanup_error": cleanup_error}
    return head, blobs


def main():
    global PARENT_PID
    PARENT_PID = os.getppid()
    cfg = json.loads(sys.argv[sys.argv.index("--config") + 1]) if "--config" in sys.argv else {}
    layers_off = set(cfg.get("layers_off", ()))
    caps = setup_runner(layers_off)
    preloaded = "--no-preload" not in sys.argv
    if preloaded:
        preload_modules()  # the zygote: every forked child inherits these imports
    # numpy after the set-up, never at the top of this file: handle() decodes the parent array with it; its
    # import (and its BLAS threads) comes after the namespace and layer probes of a single-threaded runner
    import numpy  # noqa: F401

    setup_view(caps, layers_off, cfg.get("expose", ()))

    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing but replies goes to the reply pipe
    out.write((json.dumps({"ready": True, **caps}) + "\n").encode())
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            head, blobs = handle({**json.loads(line), "preloaded": preloaded}, caps)
        except Exception as e:
            head, blobs = {"runner_error": f"{type(e).__name__}: {e}"[:500], "lens": []}, []
        out.write((json.dumps(head) + "\n").encode() + b"".join(blobs))
        if "--once" in sys.argv:
            break


if __name__ == "__main__":
    main()
