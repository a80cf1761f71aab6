"""Hostile programs aimed at the parent and the host, written as an attacker would.

Each attack class that once got through has a test here: links and FIFOs in place of output files,
forged result/meta channels and .npy header bombs, trees that defeat cleanup, writes that outlive the
run (/tmp, /var/tmp, /dev/shm), host Unix sockets, namespaces/no_new_privs, a hung runner, and the
process list. A test asserts the attack failed AND the parent got a failed result, not an exception.
"""

import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

from ttlab.discover import sandbox
from ttlab.discover.sandbox import Job, Limits, SandboxPool, result_within, run_program
from ttlab.discover.tasks import get_task

LIM = Limits(wall_s=4.0, memory_mb=1536, fsize_mb=8, tmp_mb=16)
OK = "import numpy as np\ndef solve(parent, budget_s, seed):\n    return np.full(8, 0.5)\n"
ROOT = os.geteuid() == 0
SECRET = "ttlab-secret-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def pool():
    p = SandboxPool(2, LIM)
    yield p
    p.close()


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    """A root-only file holding a secret (the parent can read it, the sandbox uid cannot)."""
    path = tmp_path_factory.mktemp("secret") / "root_only.txt"
    path.write_text(SECRET + "\n")
    os.chmod(path, 0o600)
    return path


def _run(pool, code, limits=None, **kw):
    t0 = time.monotonic()
    res = pool.submit(Job(code, **kw), limits).result(timeout=90)  # the pool resolves, never raises
    assert time.monotonic() - t0 < (limits or LIM).wall_s + 20
    assert pool.submit(Job(OK)).result(timeout=90).ok  # the pool still works
    return res


def _leaks(res, secret=SECRET) -> bool:
    out = res.output.tobytes() if res.output is not None else b""
    return secret in res.stdout or secret in res.stderr or secret in res.reason or secret.encode() in out


# ---- the parent never follows a path the program controls ----------------------------------------
@pytest.mark.parametrize("entry", ["auto", None])
def test_output_files_replaced_by_symlinks_to_secrets(pool, secret_file, entry):
    os.environ["TTLAB_TEST_SECRET"] = SECRET
    code = (
        "import os\n"
        f"targets = [{str(secret_file)!r}, '/proc/{os.getppid()}/environ', '/proc/{os.getpid()}/environ', '/etc/shadow']\n"
        "names = ['stdout.txt', 'stderr.txt', 'result.npy', 'error.json', 'reported.json', 'parent.npy']\n"
        "for i, n in enumerate(names):\n"
        "    try:\n        os.remove(n)\n    except OSError:\n        pass\n"
        "    os.symlink(targets[i % len(targets)], n)\n"
        "def solve(p, b, s):\n    return [0.5, 0.5]\n"
    )
    try:
        r = _run(pool, code, entry=entry)
    finally:
        del os.environ["TTLAB_TEST_SECRET"]
    assert not _leaks(r)
    if entry is None:  # script mode: the link named result.npy is not followed
        assert r.status == "no_result"


def test_fifos_in_place_of_output_files_do_not_hang(pool):
    code = ("import os\nfor n in ['stdout.txt', 'stderr.txt', 'result.npy', 'error.json', 'reported.json']:\n"
            "    try:\n        os.remove(n)\n    except OSError:\n        pass\n    os.mkfifo(n)\n")
    t0 = time.monotonic()
    r = _run(pool, code, entry=None)
    assert r.status == "no_result" and time.monotonic() - t0 < 15


# ---- forged channels: anything malformed is a failed program ------------------------------------
BOMB = (
    "import os, struct\n"
    "hdr = \"{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }\"\n"
    "hdr = hdr + ' ' * (117 - len(hdr)) + '\\n'\n"
    "data = b'\\x93NUMPY\\x01\\x00' + struct.pack('<H', len(hdr)) + hdr.encode() + b'\\0' * 64\n"
)


@pytest.mark.parametrize("payload,why", [
    ("data", "elements"),  # 2^40 elements claimed
    ("b'\\x93NUMPY\\x01\\x00\\xff\\xff' + b'{' * 70000", "header"),
    ("b'\\x93NUMPY\\x01\\x00' + struct.pack('<H', 40) + b\"{'descr': '|O', 'fortran_order': False, 'shape': (1,)}\" ", "header"),
    ("b'not an npy at all'", "magic"),
    ("data.replace(b'1099511627776', b'(((((((((((((')", "header"),
])
def test_forged_result_channel_is_a_failed_program(pool, payload, why):
    code = BOMB + f"payload = {payload}\nos.ftruncate(4, 0)\nos.pwrite(4, payload, 0)\nos._exit(0)\n"
    r = _run(pool, code)
    assert not r.ok and r.status == "bad_result" and why in r.reason


@pytest.mark.parametrize("meta", ["b'{not json'", "b'[1, 2]'", "b'{\"error\": 5, \"reported\": \"x\"}'",
                                  "b'\\xff' * 10000", "('{\"contract\": \"run\", \"n_points\": 3}').encode()"])
def test_forged_meta_channel(pool, meta):
    code = ("import os, numpy as np, io\nb = io.BytesIO()\nnp.save(b, np.full(4, 0.5))\n"
            f"os.pwrite(4, b.getvalue(), 0)\nos.pwrite(3, {meta}, 0)\nos._exit(0)\n")
    r = _run(pool, code)
    if r.ok:
        assert r.reported_score is None and r.output.shape == (4,)
    else:  # the forged run() meta says n_points=3 for 4 values: rejected
        assert r.status == "bad_result" and "n_points" in r.reason


# ---- writes do not outlive the run, and cost bounded RAM -----------------------------------------
def test_tmp_writes_are_private_capped_and_gone(pool):
    if not pool.caps["mountns"]:
        pytest.skip("no private mount namespace on this machine")
    mark = "ttlab-mark-" + uuid.uuid4().hex
    code = (
        "import os\n"
        f"for d in ['/tmp', '/var/tmp', '/dev/shm']:\n    open(os.path.join(d, {mark!r}), 'w').write('x')\n"
        "written = 0\n"
        "try:\n    with open('/dev/shm/fill', 'wb') as f:\n        for _ in range(256):\n"
        "            f.write(b'x' * 2**20)\n            f.flush()\n            written += 1\n"
        "except OSError as e:\n    print('stopped', type(e).__name__)\n"
        "print('MiB', written)\n"
    )
    r = _run(pool, code, Limits(wall_s=4.0, memory_mb=1536, fsize_mb=64, tmp_mb=16), entry=None)
    mib = int(r.stdout.split("MiB")[1].split()[0])
    assert "stopped" in r.stdout and mib <= LIM.tmp_mb  # RAM held by /dev/shm is capped
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not os.path.exists(os.path.join(d, mark))  # never reached the host
    r2 = _run(pool, f"import os\nprint(sorted(os.listdir('/tmp')), os.path.exists('/dev/shm/{mark}'))\n", entry=None)
    assert mark not in r2.stdout and "False" in r2.stdout  # the next run starts empty


# ---- host Unix sockets, namespaces, no_new_privs ------------------------------------------------
def test_host_unix_socket_unreachable(pool, tmp_path):
    path = tmp_path / "host.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    os.chmod(path, 0o777)
    os.chmod(tmp_path, 0o755)
    srv.listen(4)
    srv.settimeout(0.2)
    got = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                got.append(srv.accept()[0])
            except OSError:
                pass

    th = threading.Thread(target=accept)
    th.start()
    code = (
        "import ctypes, struct\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "for target in [" + repr(str(path).encode()) + ", b'\\0ttlab-abstract']:\n"
        "    fd = libc.socket(1, 1, 0)\n"
        "    if fd < 0:\n        print('socket refused', ctypes.get_errno())\n        continue\n"
        "    addr = struct.pack('H', 1) + target + b'\\0' * (108 - len(target))\n"
        "    rc = libc.connect(fd, addr, len(addr))\n"
        "    print('CONNECTED' if rc == 0 else 'connect refused %d' % ctypes.get_errno())\n"
    )
    try:
        r = _run(pool, code, entry=None)
    finally:
        stop.set()
        th.join()
        srv.close()
    assert "CONNECTED" not in r.stdout and not got
    if pool.caps["seccomp"]:
        assert "socket refused 13" in r.stdout  # EACCES from the filter


def test_no_new_privs_seccomp_and_no_user_namespaces(pool):
    code = (
        "import ctypes, os, threading\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "status = open('/proc/self/status').read()\n"
        "print('NNP', [l.split()[1] for l in status.splitlines() if l.startswith('NoNewPrivs')])\n"
        "print('SECCOMP', [l.split()[1] for l in status.splitlines() if l.startswith('Seccomp:')])\n"
        "for flag in (0x10000000, 0x20000, 0x40000000):\n"
        "    print('unshare', hex(flag), libc.unshare(flag), ctypes.get_errno())\n"
        "print('clone', libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0), ctypes.get_errno())\n"
        "pid = os.fork()\nif pid == 0:\n    os._exit(7)\nprint('fork ok', os.waitpid(pid, 0)[1] >> 8)\n"
        "t = threading.Thread(target=lambda: print('thread ok'))\nt.start()\nt.join()\n"
    )
    r = _run(pool, code, entry=None)
    assert "fork ok 7" in r.stdout and "thread ok" in r.stdout  # ordinary programs still work
    if pool.caps["no_new_privs"]:
        assert "NNP ['1']" in r.stdout
    if pool.caps["seccomp"]:
        assert "SECCOMP ['2']" in r.stdout
        assert r.stdout.count("unshare") == 3 and " 0 " not in r.stdout.split("unshare", 1)[1].split("clone")[0]
        assert "clone -1 1" in r.stdout


def test_process_list_and_parent_are_out_of_reach(pool):
    me = os.getpid()
    code = (
        "import os, signal\n"
        f"try:\n    print('CMDLINE', open('/proc/{me}/cmdline', 'rb').read()[:40])\n"
        "except OSError as e:\n    print('cmdline hidden', type(e).__name__)\n"
        f"try:\n    os.kill({me}, signal.SIGKILL)\n    print('KILLED')\nexcept OSError as e:\n    print('kill refused', type(e).__name__)\n"
        "print('visible', len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
    )
    r = _run(pool, code, entry=None)
    assert "KILLED" not in r.stdout
    if ROOT and pool.caps["mountns"]:
        assert "cmdline hidden" in r.stdout and int(r.stdout.split("visible")[1].split()[0]) <= 3


# ---- deadlines: a hung runner or executor never hangs the caller --------------------------------
def test_hung_runner_hits_the_backstop_and_is_replaced():
    with SandboxPool(1, Limits(wall_s=1.0), backstop_s=1.0) as p:
        runner = p._all[0]
        os.kill(runner.proc.pid, 19)  # SIGSTOP: the runner stops answering
        t0 = time.monotonic()
        r = p.submit(Job(OK)).result(timeout=30)
        assert r.status == "sandbox_error" and time.monotonic() - t0 < 10
        assert p.submit(Job(OK)).result(timeout=60).ok  # a fresh runner took its place


def test_result_within_turns_a_stuck_or_failing_future_into_a_failed_result():
    stuck: Future = Future()
    t0 = time.monotonic()
    r = result_within(stuck, 0.2)
    assert r.status == "sandbox_error" and "deadline" in r.reason and time.monotonic() - t0 < 2
    bad: Future = Future()
    bad.set_exception(RuntimeError("node lost"))
    assert "node lost" in result_within(bad, 1.0).reason


# ---- cleanup cannot be defeated (the on-disk work dir when there is no mount namespace) ----------
TREE = (
    "import os\n"
    "home = os.open('.', os.O_RDONLY)\n"
    "os.mkdir('deep')\nos.chdir('deep')\n"
    "for i in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
    "open('f', 'w').write('x')\n"
    "os.fchdir(home)\n"
    "os.mkdir('locked')\nopen('locked/f', 'w').write('x')\nos.chmod('locked', 0)\n"
    "os.symlink('/', 'root_link')\nos.symlink(VICTIM, 'victim_link')\nos.symlink('loop', 'loop')\n"
    "os.mkfifo('fifo')\n"
)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("layers_off", [(), ("mountns",)])
def test_deep_tree_links_and_locked_dirs_are_cleaned(tmp_path, layers_off):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    os.chmod(victim, 0o777)
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # tmpfs: rmdir on ext4 costs ~4 ms per level
    base = Path(tempfile.mkdtemp(prefix="ttlab-test-", dir=shm or str(tmp_path)))
    code = f"VICTIM = {str(victim)!r}\n" + TREE + "def solve(p, b, s):\n    return [0.5, 0.5]\n"
    r = run_program(code, limits=Limits(wall_s=20.0, memory_mb=1536), base_dir=str(base), layers_off=layers_off)
    assert r.ok, r.reason
    left = list(base.iterdir())
    shutil.rmtree(base, ignore_errors=True)
    assert left == [] and not r.extra.get("cleanup_error")
    assert (victim / "keep.txt").read_text() == "keep"  # links were removed, never followed


def test_a_missing_layer_is_named_in_a_warning(monkeypatch):
    monkeypatch.setattr(sandbox, "_WARNED", set())
    with pytest.warns(sandbox.SandboxWarning, match="seccomp"):
        r = run_program(OK, limits=LIM, layers_off=("seccomp",))
    assert r.ok


def test_pool_results_verify_like_before(pool):
    r = _run(pool, OK)
    assert r.ok and get_task("erdos").verify(r.output).valid and np.all(r.output == 0.5)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_sysv_shared_memory_does_not_outlive_the_run():
    """The seccomp filter refuses SysV IPC (test_sandbox_reach.py); with the filter off, the run's private IPC
    namespace still destroys a segment with the run."""
    with SandboxPool(1, LIM, layers_off=("seccomp",)) as p:
        if not p.caps["mountns"]:
            pytest.skip("no private namespaces on this machine")
        key = int(uuid.uuid4().int % 2**30) + 1
        code = (
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"shm = libc.shmget({key}, 8 * 2**20, 0o1666)\n"  # IPC_CREAT | 0666, 8 MiB of RAM outside RLIMIT_AS
            "print('shmget', shm, ctypes.get_errno())\n"
        )
        r = _run(p, code, entry=None)
    assert "shmget" in r.stdout and "shmget -1" not in r.stdout  # the segment was created (inside the run)
    with open("/proc/sysvipc/shm") as f:
        keys = [int(line.split()[0]) for line in f.readlines()[1:] if line.split()]
    assert key not in keys


def test_memory_spread_over_many_processes_is_capped_in_aggregate(pool):
    """RLIMIT_AS is per process: 6 children of 400 MiB each stay under it, but not under the run's cap."""
    code = (
        "import os, time\n"
        "for i in range(6):\n"
        "    if os.fork() == 0:\n"
        "        block = b'x' * (400 * 2**20)\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "time.sleep(30)\n"
    )
    t0 = time.monotonic()
    r = _run(pool, code, Limits(wall_s=20.0, memory_mb=1536), entry=None)
    assert r.status == "memory_limit" and "together" in r.reason and time.monotonic() - t0 < 19


def test_host_file_system_is_read_only_to_the_program(pool):
    if not pool.caps.get("readonly_root"):
        pytest.skip("no read-only root on this machine")
    code = (
        "import os\n"
        "root = [l.split() for l in open('/proc/self/mountinfo') if l.split()[4] == '/']\n"
        "print('ROOT', root[-1][5])\n"
        "for d in ['/', '/var', '/usr/local', '/etc']:\n"
        "    try:\n        os.open(os.path.join(d, 'pwned'), os.O_CREAT | os.O_WRONLY)\n        print('WROTE', d)\n"
        "    except OSError as e:\n        print('refused', d, e.errno)\n"
        "open('/tmp/ok', 'w').write('scratch still works')\nprint('tmp ok')\n"
    )
    r = _run(pool, code, entry=None)
    assert "WROTE" not in r.stdout and "tmp ok" in r.stdout and r.stdout.split("ROOT ")[1].startswith("ro")
