"""A program reaches only what it is given: no host socket through a socket pair, no RAM outside the memory
limit through SysV IPC, no file of the host outside its view, no other program through execve.

Each test is the attack as a program would write it; it asserts the attack failed and that an ordinary
program (numpy, scipy, the standard library, fork, a process pool) still works.
"""

import os
import shutil
import socket
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from ttlab.common.data import SharedDataMissing, shared_data_dir
from ttlab.discover import sandbox, sandbox_confine
from ttlab.discover.sandbox import Job, Limits, SandboxPool

LIM = Limits(wall_s=6.0, memory_mb=1536, fsize_mb=8, tmp_mb=16)
OK = "import numpy as np\ndef solve(parent, budget_s, seed):\n    return np.full(8, 0.5)\n"
REPO = Path(__file__).resolve().parents[2]
try:
    SHARED = shared_data_dir()
except SharedDataMissing:  # absent here: its usual place must still be outside the view
    SHARED = REPO.parent / "shared" / "data"


@pytest.fixture(scope="module")
def pool():
    p = SandboxPool(2, LIM)
    yield p
    p.close()


def _run(pool, code, limits=None):
    res = pool.submit(Job(code, entry=None), limits).result(timeout=120)
    assert pool.submit(Job(OK)).result(timeout=120).ok  # the pool still works
    return res


@pytest.fixture
def host_dgram_socket():
    """A root-owned datagram listener at a path in the project checkout (world-writable, as /dev/log is)."""
    d = Path(tempfile.mkdtemp(prefix=".reach-", dir=REPO))
    os.chmod(d, 0o755)
    path = d / "host.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(str(path))
    os.chmod(path, 0o777)
    srv.settimeout(0.5)
    try:
        yield srv, str(path)
    finally:
        srv.close()
        shutil.rmtree(d, ignore_errors=True)


def test_socket_pair_cannot_reach_a_host_datagram_socket(pool, host_dgram_socket):
    srv, path = host_dgram_socket
    code = (
        "import ctypes, os, socket, struct\n"
        f"target = {path!r}\n"
        "try:\n"
        "    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "    a.sendto(b'hello-from-sandbox-python uid=%d' % os.getuid(), target)\n"
        "    print('SENT python')\n"
        "except OSError as e:\n"
        "    print('python refused', e.errno)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "sv = (ctypes.c_int * 2)()\n"
        "if libc.socketpair(1, 2, 0, sv) != 0:\n"  # AF_UNIX, SOCK_DGRAM
        "    print('socketpair refused', ctypes.get_errno())\n"
        "else:\n"
        "    addr = struct.pack('H', 1) + target.encode() + b'\\0'\n"
        "    msg = b'hello-from-sandbox-ctypes'\n"
        "    n = libc.sendto(sv[0], msg, len(msg), 0, addr, len(addr))\n"
        "    print('SENT ctypes' if n > 0 else 'sendto refused %d' % ctypes.get_errno())\n"
    )
    r = _run(pool, code)
    got = []
    try:
        while True:
            got.append(srv.recv(256))
    except (TimeoutError, OSError):
        pass
    assert not got, got
    assert "SENT" not in r.stdout, r.stdout
    if pool.caps["seccomp"]:
        assert "python refused 13" in r.stdout and "socketpair refused 13" in r.stdout  # EACCES from the filter


def test_socket_families_other_than_inet_are_refused(pool):
    if not pool.caps["seccomp"]:
        pytest.skip("no seccomp filter on this machine")
    code = (
        "import socket\n"
        "for name, fam in [('unix', 1), ('netlink', 16), ('packet', 17), ('vsock', 40), ('inet', 2), ('inet6', 10)]:\n"
        "    try:\n        socket.socket(fam, socket.SOCK_DGRAM).close()\n        print('made', name)\n"
        "    except OSError as e:\n        print('refused', name, e.errno)\n"
    )
    r = _run(pool, code)
    for name in ("unix", "netlink", "packet", "vsock"):
        assert f"refused {name} 13" in r.stdout, r.stdout
    assert "made inet" in r.stdout  # an AF_INET socket exists, in an empty network namespace


def test_sysv_shared_memory_cannot_hold_ram_beyond_the_limit(pool):
    """shmget + shmat + touch + shmdt, eight times 128 MiB under a 768 MiB limit: once detached, a segment is
    counted by neither RLIMIT_AS nor the resident-memory watchdog."""
    code = (
        "import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "held = 0\n"
        "for i in range(8):\n"
        "    sid = libc.shmget(0, 128 * 2**20, 0o1600)\n"  # IPC_PRIVATE, IPC_CREAT | 0600
        "    if sid < 0:\n        print('shmget refused', ctypes.get_errno())\n        break\n"
        "    p = libc.shmat(sid, None, 0)\n"
        "    if p in (None, ctypes.c_void_p(-1).value):\n        print('shmat refused', ctypes.get_errno())\n        break\n"
        "    ctypes.memset(p, 1, 128 * 2**20)\n"
        "    libc.shmdt(ctypes.c_void_p(p))\n"
        "    held += 1\n"
        "print('HELD', held)\n"
        "print('msgget', libc.msgget(0, 0o1600), ctypes.get_errno())\n"
        "print('semget', libc.semget(0, 1, 0o1600), ctypes.get_errno())\n"
    )
    r = _run(pool, code, Limits(wall_s=20.0, memory_mb=768))
    assert "HELD 8" not in r.stdout, r.stdout
    if pool.caps["seccomp"]:
        assert "shmget refused 1" in r.stdout and "msgget -1 1" in r.stdout and "semget -1 1" in r.stdout


def test_host_files_outside_the_view_are_invisible(pool):
    """The project checkout, the shared data, the committed results, home directories and /etc are not there;
    the interpreter, numpy, scipy and the standard library are."""
    secret = REPO / "tests" / "discover" / f".reach-secret-{uuid.uuid4().hex}.txt"
    secret.write_text("ttlab-secret\n")
    os.chmod(secret, 0o644)
    targets = [str(secret), str(Path(__file__)), str(REPO / "pyproject.toml"), str(REPO / "benchmarks" / "results"),
               str(SHARED / "erdos_reference.json"), str(Path(sys.prefix).parent / "pyproject.toml"),
               str(Path(sys.prefix).parent / "src"), "/etc/passwd", "/home", str(Path.home() / ".bashrc"), "/usr/bin/env"]
    code = (
        "import os\n"
        f"for t in {targets!r}:\n"
        "    try:\n"
        "        if os.path.isdir(t):\n            print('LISTED', t, len(os.listdir(t)))\n"
        "        else:\n            print('READ', t, len(open(t, 'rb').read()))\n"
        "    except OSError as e:\n        print('hidden', t, type(e).__name__)\n"
        "import numpy as np, scipy.optimize, scipy.signal, sqlite3, decimal, lzma, bz2, hashlib, json\n"
        "print('imports ok', np.linalg.norm(np.ones(4)))\n"
        "open('/tmp/x', 'w').write('scratch')\nprint('tmp ok', open('/tmp/x').read())\n"
    )
    try:
        r = _run(pool, code)
    finally:
        secret.unlink()
    assert "imports ok 2.0" in r.stdout and "tmp ok scratch" in r.stdout, (r.stdout, r.stderr)
    if not pool.caps["fsview"]:  # the host-tree fallback (warned) shows /etc and /usr, and a checkout outside /tmp
        pytest.skip(f"no minimal root here ({pool.caps['missing']['fsview']})")
    assert "READ" not in r.stdout and "LISTED" not in r.stdout, r.stdout


def test_no_program_but_the_sandbox_interpreter_runs(pool):
    """execve of a system Python, a shell or the compiler is refused (so is the sandbox's own: nothing execs)."""
    code = (
        "import os, subprocess, sys\n"
        "for argv in [['/usr/bin/python3.11', '-c', 'print(1)'], ['/bin/sh', '-c', 'echo 1'], ['/usr/bin/cc', '--version'],\n"
        "             [sys.executable, '-c', 'print(1)']]:\n"
        "    try:\n"
        "        out = subprocess.run(argv, capture_output=True, timeout=5)\n"
        "        print('RAN', argv[0], out.returncode)\n"
        "    except OSError as e:\n        print('refused', argv[0], type(e).__name__)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n        os.execv('/usr/bin/python3.11', ['python3', '-c', 'print(\"EXECED\")'])\n"
        "    except OSError as e:\n        print('execv refused', e.errno, flush=True)\n"
        "    os._exit(3)\n"
        "print('child', os.waitpid(pid, 0)[1] >> 8)\n"
    )
    r = _run(pool, code)
    assert "RAN" not in r.stdout and "EXECED" not in r.stdout, r.stdout
    assert "child 3" in r.stdout


def test_ordinary_parallel_programs_still_work(pool):
    code = (
        "import numpy as np\nfrom concurrent.futures import ProcessPoolExecutor\nfrom multiprocessing import Pool\n"
        "def sq(x):\n    return x * x\n"
        "with ProcessPoolExecutor(2) as ex:\n    print('ppe', sum(ex.map(sq, range(10))))\n"
        "with Pool(2) as p:\n    print('pool', sum(p.map(sq, range(10))))\n"
    )
    r = _run(pool, code, Limits(wall_s=20.0, memory_mb=1536))
    assert "ppe 285" in r.stdout and "pool 285" in r.stdout, (r.stdout, r.stderr)


# ---- the view itself, its hook, and the machines that cannot build it -----------------------------------
def _covered(path: Path, view: list[str]) -> bool:
    return any(str(path) == p or str(path).startswith(p.rstrip("/") + "/") for p in view)


def test_the_view_holds_the_installation_not_the_checkout():
    if sandbox_confine._shadow_of(sys.prefix):  # e.g. a venv in /tmp: no view (the test below), the fallback is used
        pytest.skip(f"the installation {sys.prefix} lies under a directory every run replaces")
    view = sandbox_confine.view_paths()
    assert _covered(Path(os.__file__).parent, view) and _covered(Path(np_file()).parent, view)
    for private in (REPO, REPO / "src", Path(sys.prefix).parent / "src", SHARED, Path.home()):
        assert not _covered(private, view), private  # the editable install's source dir is on sys.path, not in the view
    assert not any(p in ("/", "/usr", "/etc", "/home", "/work") for p in view)


def np_file() -> str:
    import numpy

    return numpy.__file__


def test_an_exposed_directory_is_in_the_view_read_only_and_importable():
    # a host directory outside the per-run tmpfs mounts (a checkout under /tmp cannot be exposed: every run's own
    # /tmp hides it), so the test's directory goes beside the checkout or, for a checkout under /tmp, in ~/.cache
    base = REPO if not str(REPO).startswith(("/tmp/", "/dev/", "/proc/")) else Path.home() / ".cache"
    base.mkdir(parents=True, exist_ok=True)
    top = Path(tempfile.mkdtemp(prefix=".reach-", dir=base))
    blocks = top / "blocks"
    blocks.mkdir()
    (top / "secret.txt").write_text("x")
    (blocks / "blocks_demo.py").write_text("def twice(x):\n    return 2 * x\n")
    os.chmod(top, 0o755)
    code = (
        "import os, blocks_demo\nprint('twice', blocks_demo.twice(21))\n"
        f"try:\n    open({str(blocks / 'new.py')!r}, 'w')\n    print('WROTE')\nexcept OSError as e:\n    print('read-only', e.errno)\n"
        f"print('siblings', os.listdir({str(top)!r}))\n"
    )
    try:
        with SandboxPool(1, LIM, expose=(str(blocks),)) as p:
            r = _run(p, code)
            fsview = p.caps["fsview"]
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert "twice 42" in r.stdout and "WROTE" not in r.stdout, (r.stdout, r.stderr)
    if fsview:  # only the exposed directory, not its parent's other entries
        assert "siblings ['blocks']" in r.stdout


def test_a_path_every_run_would_hide_cannot_be_exposed():
    with pytest.raises(ValueError, match="lies under /tmp"):
        SandboxPool(1, LIM, expose=("/tmp",))
    with pytest.raises(ValueError, match="does not exist"):
        SandboxPool(1, LIM, expose=(str(REPO / "no-such-dir"),))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("off,why", [(("fsview",), "turned off"), (("mountns",), "mount namespace")])
def test_without_the_view_programs_still_run_and_the_warning_names_it(monkeypatch, off, why):
    monkeypatch.setattr(sandbox, "_WARNED", set())
    with pytest.warns(sandbox.SandboxWarning, match="fsview"):
        p = SandboxPool(1, LIM, layers_off=off)
    try:
        assert not p.caps["fsview"] and why in p.caps["missing"]["fsview"]
        # with a mount namespace, also modules the runner has not imported: the installation stays importable
        # where it lies in a directory the fallback covers (pyenv or conda in a home, a venv in /tmp). Without
        # one, a program that runs as another uid gets only what was preloaded if the installation is in a
        # private home (e.g. pyenv in a 0700 /root)
        more = ", wave, concurrent.futures.process" if p.caps["mountns"] else ""
        r = _run(p, f"import numpy, scipy.optimize{more}\nprint('home', __import__('os').listdir('/home'))\n")
    finally:
        p.close()
    assert "home" in r.stdout, (r.stdout, r.stderr)
    python_in_home = any(Path(d).parts[1:2] == ("home",) for d in sandbox_confine._python_dirs())
    if off == ("fsview",) and p.caps["mountns"] and not python_in_home:  # the fallback still hides home directories
        assert "home []" in r.stdout


def test_an_installation_under_a_replaced_directory_cannot_make_a_view(monkeypatch):
    """A site directory under /tmp would be hidden by every run's own /tmp: no view (the layer is reported
    missing and the host-tree fallback is used) rather than a view without the packages."""
    site = Path(tempfile.mkdtemp(dir="/tmp")) / "site-packages"
    site.mkdir()
    try:
        monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
        with pytest.raises(OSError, match="lies under /tmp"):
            sandbox_confine.view_paths()
    finally:
        shutil.rmtree(site.parent)
