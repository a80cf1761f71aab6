"""torch threads for one phase: set inside the block, restored after it, even when the block raises."""

from __future__ import annotations

import pytest
import torch

from ttlab.common.device import torch_threads


def test_the_block_runs_with_the_asked_threads_and_the_count_comes_back():
    before = torch.get_num_threads()
    want = 1 if before != 1 else 2
    with torch_threads(want):
        assert torch.get_num_threads() == want
    assert torch.get_num_threads() == before


def test_zero_leaves_the_count_alone_and_an_error_still_restores_it():
    before = torch.get_num_threads()
    with torch_threads(0):
        assert torch.get_num_threads() == before
    want = 1 if before != 1 else 2
    with pytest.raises(RuntimeError), torch_threads(want):
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before
