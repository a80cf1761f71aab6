"""Shared pytest setup: `gpu` tests skip without CUDA; headless defaults for rendering libraries."""

from __future__ import annotations

import os

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
