"""The sandbox's pure parts alone: the strict .npy parser, tree removal, the seccomp program."""

import io
import os
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest

from ttlab.discover.sandbox_cleanup import remove_tree
from ttlab.discover.sandbox_confine import DENY_EPERM, seccomp_program
from ttlab.discover.sandbox_npy import NpyError, parse_npy


def _npy(a) -> bytes:
    b = io.BytesIO()
    np.save(b, a, allow_pickle=False)
    return b.getvalue()


@pytest.mark.parametrize("a", [np.arange(5.0), np.ones((3, 4), order="F"), np.float64(2.5), np.zeros(0),
                               np.array([True, False]), np.arange(6, dtype=np.int32).reshape(2, 3)])
def test_roundtrip_of_what_np_save_writes(a):
    got = parse_npy(_npy(a), 100)
    np.testing.assert_array_equal(got, a)
    assert got.dtype == a.dtype and got.flags.writeable


def _with_header(header: str, data: bytes = b"", version: int = 1) -> bytes:
    h = header.encode("latin1")
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(h)) + h + data


@pytest.mark.parametrize("buf,why", [
    (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }\n", b"\0" * 8), "elements"),
    (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (65536, 65536, 65536), }\n"), "elements"),
    (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }\n", b"\0" * 31), "data bytes"),
    (_with_header("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }\n", b"\0" * 8), "header"),
    (_with_header("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,), }\n", b"\0" * 8), "header"),
    (_with_header("{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }\n", b"\0" * 8), "header"),
    (_with_header("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }\n", b"\0" * 16), "header"),
    (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }\n", b"\0" * 8), "header"),
    (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': " + "(" * 5000 + "1,), }\n"), "header"),
    (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }\n", b"\0" * 8), "dims"),
    (_with_header("__import__('os').system('id')\n", b""), "header"),
    (b"\x93NUMPY\x01\x00\xff\xff{", "exceeds"),
    (b"\x93NUMPY\x02\x00\xff\xff\xff\x7f{", "exceeds"),
    (b"\x93NUMPY\x09\x00\x10\x00", "version"),
    (b"\x93NUM", "magic"),
    (b"PK\x03\x04 a zip of pickles", "magic"),
])
def test_hostile_headers_raise_npyerror_before_allocating(buf, why):
    with pytest.raises(NpyError, match=why):
        parse_npy(buf, 4_000_000)


def test_random_corruption_only_ever_raises_npyerror():
    rng = np.random.default_rng(0)
    good = _npy(np.linspace(0, 1, 50))
    for _ in range(3000):
        b = bytearray(good)
        for _ in range(int(rng.integers(1, 6))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        if rng.random() < 0.3:
            b = b[: int(rng.integers(0, len(b)))]
        try:
            arr = parse_npy(bytes(b), 1000)
        except NpyError:
            continue
        assert arr.size <= 1000


# ---- remove_tree -----------------------------------------------------------------------------------
@pytest.fixture
def fast_dir(tmp_path):
    """A tmpfs dir when the host has one (rmdir on this ext4 costs ~4 ms; the algorithm is what we test)."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        d = tempfile.mkdtemp(dir="/dev/shm", prefix="ttlab-test-")
        yield Path(d)
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield tmp_path


def test_remove_tree_deep_links_fifos_and_locked_dirs(tmp_path, fast_dir):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("keep")
    top = fast_dir / "work"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    try:
        d = fd
        for _ in range(5000):  # deeper than the recursion limit and than PATH_MAX
            os.mkdir("d", dir_fd=d)
            nd = os.open("d", os.O_RDONLY, dir_fd=d)
            if d != fd:
                os.close(d)
            d = nd
        os.symlink(str(victim), "link", dir_fd=d)
        os.close(d)
    finally:
        os.close(fd)
    (top / "locked").mkdir()
    (top / "locked" / "f").write_text("x")
    os.chmod(top / "locked", 0)
    os.symlink(str(victim), top / "victim_link")
    os.symlink("loop", top / "loop")
    os.mkfifo(top / "fifo")
    (top / ".rm1").mkdir()  # a name the flattening would pick
    (top / ".rm1" / "x").write_text("x")
    remove_tree(str(top))
    assert not top.exists() and (victim / "keep").read_text() == "keep"


def test_remove_tree_on_a_symlink_removes_only_the_link(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("keep")
    link = tmp_path / "link"
    os.symlink(victim, link)
    remove_tree(str(link))
    assert not link.exists() and (victim / "keep").exists()


def test_seccomp_program_assembles_with_every_denied_call():
    code, n = seccomp_program()
    assert len(code) == 8 * n and n < 256 and n > len(DENY_EPERM)
    assert DENY_EPERM["unshare"] == 272 and DENY_EPERM["setns"] == 308 and DENY_EPERM["io_uring_setup"] == 425
    assert DENY_EPERM["execve"] == 59 and DENY_EPERM["execveat"] == 322
    assert {DENY_EPERM[k] for k in ("shmget", "shmat", "semget", "msgget")} == {29, 30, 64, 68}
