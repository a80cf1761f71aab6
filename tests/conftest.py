"""Shared pytest setup: `gpu` tests skip without CUDA; headless defaults for rendering libraries."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# numpy/scipy BLAS on one thread, as in the sandbox: on a loaded 2-core machine a second OpenBLAS thread spins
# and makes the in-process optimiser tests (L-BFGS-B on ~100 pieces) several times slower in CPU and wall time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _run_group(cmd: list[str], timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    """`subprocess.run(capture_output=True, text=True)` in a new session: on a timeout the whole process group is
    killed, so the DDP ranks a launcher started do not outlive the test holding a core."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


@pytest.fixture
def run_group():
    """A subprocess runner that kills the whole process group on a timeout (see `_run_group`)."""
    return _run_group
