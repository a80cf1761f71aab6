"""Hostile programs: each is contained with a clear reason, the pool keeps working, nothing is left behind."""

import os
import socket
import time

import numpy as np
import pytest

from ttlab.discover.sandbox import Job, Limits, SandboxPool, run_program
from ttlab.discover.tasks import get_task

LIM = Limits(wall_s=3.0, memory_mb=1536, fsize_mb=8)
OK = "import numpy as np\ndef solve(parent, budget_s, seed):\n    return np.full(8, 0.5)\n"


def _procs_of(uid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.stat(f"/proc/{p}").st_uid == uid:
                    out.append(int(p))
            except OSError:
                pass
    return out


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p))
    out, stack = [], list(kids.get(pid, []))
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(kids.get(c, []))
    return out


@pytest.fixture(scope="module")
def pool():
    p = SandboxPool(2, LIM)
    yield p
    p.close()


def _run(pool, code, limits=None, **kw):
    res = pool.submit(Job(code, **kw), limits).result(timeout=60)
    # nothing left behind: no process of any runner's uid, no descendant of any runner except idle runners
    for r in pool._all:
        if r.caps.get("uid") is not None:
            assert _procs_of(r.caps["uid"]) == []
        assert _descendants(r.proc.pid) == []
    ok = pool.submit(Job(OK)).result(timeout=60)  # the pool still works
    assert ok.ok and get_task("erdos").verify(ok.output).valid
    return res


def test_normal_program_roundtrip(pool):
    r = _run(pool, OK.replace("return np", "print('hello')\n    return np"))
    assert r.ok and r.stdout.strip() == "hello" and r.output.shape == (8,)


def test_infinite_loop(pool):
    t0 = time.time()
    r = _run(pool, "while True:\n    pass\n")
    assert r.status == "timeout" and "wall-clock" in r.reason and time.time() - t0 < 15


def test_ignores_sigterm(pool):
    r = _run(pool, "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.01)\n")
    assert r.status == "timeout"


def test_fork_bomb(pool):
    code = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    r = _run(pool, code)
    assert r.status == "timeout" and r.leftover_killed >= 0


def test_memory_bomb(pool):
    # touching every page is slow on a busy machine: a longer wall clock so the memory limit trips first
    r = _run(pool, "x = []\nwhile True:\n    x.append(bytearray(50_000_000))\n", limits=Limits(wall_s=20.0, memory_mb=1024))
    assert r.status == "memory_limit" and "memory" in r.reason


def test_numpy_memory_bomb(pool):
    r = _run(pool, "import numpy as np\ndef solve(p, b, s):\n    return np.ones(10**10)\n")
    assert r.status == "memory_limit"


def test_gigabyte_of_output(pool):
    r = _run(pool, "import sys\nchunk = 'x' * 1_000_000\nfor _ in range(1000):\n    sys.stdout.write(chunk)\n")
    assert r.status == "output_limit" and len(r.stdout) < 20_000 and "truncated" in r.stdout


def test_huge_result_array(pool):
    # the first 400 MB a fresh runner's child touches take ~3 s on a loaded 2-core box: a wall limit above that
    r = _run(pool, "import numpy as np\ndef solve(p, b, s):\n    return np.ones(50_000_000)\n",
             limits=Limits(wall_s=20.0, memory_mb=1536, fsize_mb=8))
    assert r.status in ("output_limit", "memory_limit") and not r.ok


def test_writes_outside_its_dir(pool, tmp_path):
    target = tmp_path / "pwned.txt"
    code = f"open({str(target)!r}, 'w').write('x')\n"
    r = _run(pool, code)
    assert not target.exists()
    if os.geteuid() == 0:  # not writable to the sandbox uid, or not even visible (private /tmp)
        assert r.status == "error" and ("PermissionError" in r.reason or "FileNotFoundError" in r.reason)


def test_reads_parent_env_secrets(pool):
    os.environ["TTLAB_TEST_SECRET"] = "hunter2-secret"
    code = (
        "import os\nfound = 'hunter2-secret' in str(dict(os.environ))\n"
        f"try:\n    found |= 'hunter2' in open('/proc/{os.getpid()}/environ', 'rb').read().decode(errors='ignore')\n"
        "except OSError as e:\n    print('environ blocked:', type(e).__name__)\n"
        "print('FOUND' if found else 'clean')\n"
    )
    try:
        r = _run(pool, code, entry=None)
    finally:
        del os.environ["TTLAB_TEST_SECRET"]
    assert "FOUND" not in r.stdout and "clean" in r.stdout


def test_network_socket(pool):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('CONNECTED')\n"
    try:
        r = _run(pool, code)
    finally:
        srv.close()
    assert "CONNECTED" not in r.stdout
    if pool.caps["net_isolated"]:
        assert r.status == "error" and ("Error" in r.reason or "refused" in r.reason)


@pytest.mark.parametrize("code,status", [
    ("import sys\nsys.exit(3)\n", "exit"),
    ("import sys\ndef solve(p, b, s):\n    sys.exit(0)\n", "exit"),
    ("import os\nos._exit(0)\n", "no_result"),
    ("import os\nos._exit(7)\n", "exit"),
    ("import ctypes\nctypes.string_at(0)\n", "signal"),
    ("def nope():\n    pass\n", "error"),
    ("raise ValueError('boom')\n", "error"),
])
def test_exits_and_crashes(pool, code, status):
    r = _run(pool, code)
    assert r.status == status and r.reason
    if status == "signal":
        assert "SIGSEGV" in r.reason


def test_detached_grandchild_is_killed(pool, tmp_path):
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        while True:\n            time.sleep(0.05)\n"
        "    os._exit(0)\n"
        "import numpy as np\n"
        "def solve(p, b, s):\n    time.sleep(0.2)\n    return np.full(4, 0.5)\n"
    )
    r = _run(pool, code)
    assert r.ok and r.leftover_killed >= 1  # _run also checks no process of the sandbox uid survives


@pytest.mark.parametrize("ret,why", [
    ("np.array([0.5, np.nan])", "NaN"), ("np.array([0.5, np.inf])", "NaN"), ("np.ones((3, 3)) * 0.5", "1-D"),
    ("'hello'", "dtype"), ("[[1, 2], [3]]", "not a numeric array"), ("{'construction': None}", "not a numeric"),
])
def test_bad_returns_are_rejected(pool, ret, why):
    r = _run(pool, f"import numpy as np\ndef solve(p, b, s):\n    return {ret}\n")
    v = get_task("erdos").verify(r.output) if r.ok else None
    msg = r.reason if not r.ok else v.message
    assert (not r.ok) or not v.valid
    assert why in msg or (not r.ok and r.status in ("error", "bad_result"))


def test_forged_score_is_recomputed(pool):
    code = ("import numpy as np, json\ndef solve(p, b, s):\n    json.dump({'score': 0.0}, open('reported.json', 'w'))\n"
            "    return {'construction': np.full(10, 0.5), 'score': 0.1}\n")
    r = _run(pool, code)
    v = get_task("erdos").verify(r.output, r.reported_score)
    assert r.reported_score == 0.1 and v.score == pytest.approx(0.5) and v.metrics["reported_gap"] == pytest.approx(-0.4)


def test_parent_is_passed_as_plain_array(pool):
    r = _run(pool, "def solve(p, b, s):\n    return p * 2\n", parent=np.arange(3.0))
    np.testing.assert_array_equal(r.output, [0.0, 2.0, 4.0])


def test_run_program_fresh_interpreter_and_temp_dir_removed(tmp_path):
    # the child imports numpy and scipy itself here (2-3 s on a loaded 2-core box): a wall limit above that
    r = run_program("import os\ndef solve(p, b, s):\n    print(os.getcwd())\n    return [1.0]\n",
                    limits=Limits(wall_s=20.0, memory_mb=1536, fsize_mb=8), preload=False, base_dir=str(tmp_path))
    assert r.ok and list(tmp_path.iterdir()) == []


def test_a_killed_parent_leaves_no_runner_or_program_running(tmp_path):
    """`kill` of a search (no pool.close) must not leave its programs running to their wall limits: each runner
    notices its parent is gone, kills its program and exits."""
    import subprocess
    import sys
    script = (
        "import sys, time\n"
        "from ttlab.discover.sandbox import Job, Limits, SandboxPool\n"
        "pool = SandboxPool(1, Limits(wall_s=120.0, memory_mb=1536))\n"
        "pool.submit(Job('while True:\\n    pass\\n', entry=None))\n"
        "print(pool._all[0].proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    runner = int(parent.stdout.readline())
    deadline = time.time() + 60
    while not _descendants(runner) and time.time() < deadline:  # the program has started
        time.sleep(0.05)
    program = _descendants(runner)
    assert program
    parent.kill()
    parent.wait()

    def alive(pid):
        try:
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    deadline = time.time() + 10
    while any(alive(p) for p in [runner, *program]) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in [runner, *program])
