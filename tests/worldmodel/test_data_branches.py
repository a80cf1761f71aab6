"""Branched clips in training: the pool is deterministic and cached, every batch holds its share of them, and the
trainer mixes them in (and refuses data they cannot be made for)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from ttlab.worldmodel.data.branches import (
    BranchConfig,
    BranchPoolDataset,
    MixedBatchSampler,
    branch_pool,
    check_branch_config,
    context_plan,
)
from ttlab.worldmodel.data.pusht import episode_seed, generate_pusht
from ttlab.worldmodel.data.windows import ActionStats
from ttlab.worldmodel.presets import debug
from ttlab.worldmodel.train import train


def test_every_global_batch_holds_exactly_its_pool_share_and_is_a_function_of_seed_and_epoch():
    s = MixedBatchSampler(n_windows=50, n_pool=12, local_batch=8, pool_per_batch=2, seed=3)
    idx = list(s)
    assert len(idx) == len(s) == (50 // 6) * 8
    batches = [idx[i:i + 8] for i in range(0, len(idx), 8)]
    for b in batches:
        pool = [i for i in b if i >= 50]
        assert len(pool) == 2 and len(set(pool)) == 2 and all(i < 62 for i in pool)
    windows = [i for i in idx if i < 50]
    assert len(windows) == len(set(windows)) == 48  # each window at most once per epoch
    assert list(MixedBatchSampler(50, 12, 8, 2, seed=3)) == idx
    s.set_epoch(1)
    assert list(s) != idx


def test_bad_branch_settings_fail_naming_the_flag():
    with pytest.raises(ValueError, match="--branch.frac"):
        check_branch_config(BranchConfig(frac=1.0), 16)
    with pytest.raises(ValueError, match="--branch.frac"):
        check_branch_config(BranchConfig(frac=0.01), 16)  # rounds to 0 clips of 16
    with pytest.raises(ValueError, match="--branch.start-min"):
        check_branch_config(BranchConfig(frac=0.25, start_min=50, start_max=10), 16)
    assert check_branch_config(BranchConfig(frac=0.25), 16) == 4
    assert check_branch_config(BranchConfig(), 16) == 0


def test_pool_contexts_are_not_the_datasets_episodes():
    c = BranchConfig(seed=0)
    pool_seeds = {context_plan(c, i)["seed"] for i in range(500)}
    data_seeds = {episode_seed(s, i) for s in range(3) for i in range(500)}
    assert len(pool_seeds) == 500 and not pool_seeds & data_seeds


def test_pool_is_simulated_once_cached_and_branches_share_their_context(tmp_path):
    c = BranchConfig(frac=0.5, contexts=2, branches=3, start_min=2, start_max=8, cache_dir=str(tmp_path / "cache"))
    pool, path, made = branch_pool(c, resolution=32, num_frames=4, n_ctx=2, frame_interval=2)
    assert made and path.exists()
    f = pool["frames"]
    assert f.shape == (6, 4, 32, 32, 3) and pool["rel_actions"].shape == (6, 6, 2)
    assert pool["group"].tolist() == [0, 0, 0, 1, 1, 1]
    for g in range(2):
        ctx = f[3 * g:3 * g + 3, :2]
        assert all(np.array_equal(ctx[b], ctx[0]) for b in range(3))  # the context is shared bit for bit
        assert not np.array_equal(f[3 * g, 2:], f[3 * g + 1, 2:])  # and the futures differ
    again, path2, made2 = branch_pool(c, resolution=32, num_frames=4, n_ctx=2, frame_interval=2)
    assert path2 == path and not made2
    assert all(np.array_equal(again[k], pool[k]) for k in pool)
    other, path3, _ = branch_pool(replace(c, seed=2), resolution=32, num_frames=4, n_ctx=2, frame_interval=2)
    assert path3 != path and not np.array_equal(other["frames"], f)

    ds = BranchPoolDataset(pool, ActionStats(np.zeros(2), np.ones(2)), num_frames=4, frame_interval=2)
    item = ds[4]
    assert item["frames"].shape == (4, 3, 32, 32) and item["actions"].shape == (4, 4)
    assert item["actions"][0].abs().sum() == 0  # frame 0 gets no action (the window contract)
    np.testing.assert_allclose(item["actions"][1:].reshape(-1, 2).numpy(), pool["rel_actions"][4])
    absolute = BranchPoolDataset(pool, ActionStats(np.zeros(2), np.ones(2)), num_frames=4, frame_interval=2,
                                 relative=False)[4]["actions"]  # the dataset's kind of action: the targets themselves
    np.testing.assert_allclose(absolute[1:].reshape(-1, 2).numpy(), pool["abs_actions"][4])
    assert pool["abs_actions"].shape == pool["rel_actions"].shape
    assert not np.allclose(pool["abs_actions"], pool["rel_actions"])  # target vs target minus the agent


def test_training_mixes_the_pool_into_every_batch(tmp_path, monkeypatch):
    data = tmp_path / "pusht"
    generate_pusht(data, num_episodes=3, resolution=32, max_steps=30, workers=1, seed=0, show_progress=False)
    seen: list[torch.Tensor] = []
    from ttlab.worldmodel import train as train_mod

    real_step = train_mod.WorldModelModule.training_step

    def spy(self, batch, idx):
        seen.append(batch["episode"].clone())
        return real_step(self, batch, idx)

    monkeypatch.setattr(train_mod.WorldModelModule, "training_step", spy)
    cfg = replace(debug(), data=str(data), num_frames=4, frame_interval=2, batch_size=8, max_steps=3,
                  val_every=10**6, checkpoint_every=10**6, val_fraction=0.34, root=str(tmp_path / "runs"),
                  run_name="mix", branch=BranchConfig(frac=0.25, contexts=2, branches=2, start_min=2, start_max=6,
                                                      cache_dir=str(tmp_path / "cache")))
    out = train(cfg)
    assert out["steps"] == 3 and out["branch_pool"]["clips"] == 4 and out["branch_pool"]["per_batch"] == 2
    assert out["branch_pool"]["simulated_now"]
    assert [int((e < 0).sum()) for e in seen] == [2, 2, 2]  # 2 branched clips (episode < 0) in each batch of 8
    saved = json.loads((tmp_path / "runs" / "wm" / "mix" / "config.json").read_text())
    assert saved["branch"]["frac"] == 0.25

    with pytest.raises(ValueError, match="--branch.frac"):
        train(replace(debug(), root=str(tmp_path / "runs"), run_name="toy", branch=BranchConfig(frac=0.5)))
