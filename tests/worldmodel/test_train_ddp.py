"""Multi-process training: `ttlab wm train` with Lightning DDP over 2 CPU processes (gloo) follows the loss
curve of 1 process with the same global batch (rank-invariant batches and noise), step for step.

Not marked slow on purpose: `make test` (what CI runs) includes it (about 85 s on 2 loaded cores)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _train(run, root: Path, name: str, devices: int, batch: int, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "ttlab.cli", "wm", "train", "--preset", "debug", "--root", str(root),
           "--run-name", name, "--device", "cpu", "--devices", str(devices), "--batch-size", str(batch),
           "--max-steps", "8", "--warmup-steps", "2", "--lr", "2e-3", "--log-every", "1", "--val-every", "1000",
           "--checkpoint-every", "1000", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = run(cmd, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads((root / "wm" / name / "loss_curve.json").read_text())


def test_ddp_two_cpu_processes_follow_the_one_process_loss_curve_with_the_same_global_batch(tmp_path, run_group):
    one = _train(run_group, tmp_path, "one", devices=1, batch=8)
    two = _train(run_group, tmp_path, "two", devices=2, batch=4)
    assert (one["world_size"], two["world_size"]) == (1, 2)
    assert one["global_batch"] == two["global_batch"] == 8
    s1, l1 = zip(*one["steps_losses"], strict=True)
    s2, l2 = zip(*two["steps_losses"], strict=True)
    assert s1 == s2 == tuple(range(8))
    assert l1 == pytest.approx(l2, rel=1e-4, abs=1e-6)  # same clips, same noise, averaged gradients
    # the comparison can fail: one process at half the global batch follows another curve
    half = _train(run_group, tmp_path, "half", devices=1, batch=4)
    assert half["steps_losses"][0][1] != pytest.approx(l1[0], rel=1e-3)


def test_ranks_share_rank_zeros_run_dir(tmp_path, monkeypatch):
    from dataclasses import replace

    from ttlab.worldmodel.presets import debug
    from ttlab.worldmodel.train import RUN_DIR_ENV, open_run_dir

    cfg = replace(debug(), root=str(tmp_path), run_name="r")
    for k in ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK", RUN_DIR_ENV):
        monkeypatch.delenv(k, raising=False)
    zero = open_run_dir(cfg)
    assert (zero.path / "config.json").is_file()
    monkeypatch.setenv("LOCAL_RANK", "1")  # a process Lightning launched on this node: rank 0's directory
    monkeypatch.setenv(RUN_DIR_ENV, str(zero.path))
    assert open_run_dir(replace(cfg, run_name="")).path == zero.path
    monkeypatch.delenv(RUN_DIR_ENV)
    monkeypatch.setenv("NODE_RANK", "1")  # another node: the same --run-name, nothing created there
    other = open_run_dir(replace(cfg, root=str(tmp_path / "node1")))
    assert other.path == tmp_path / "node1" / "wm" / "r" and not other.path.exists()
    with pytest.raises(ValueError, match="same --run-name on every node"):
        open_run_dir(replace(cfg, run_name=""))


def test_ddp_ranks_stop_together_on_a_wall_clock_budget(tmp_path, run_group):
    """A wall-clock budget under DDP ends the run on both ranks (a rank that stopped alone would leave the other
    waiting in the gradient all-reduce until the timeout). The ranks' clocks differ by little here, so the
    callback test below is the one that pins the rule."""
    two = _train(run_group, tmp_path, "budget", 2, 2, "--budget-minutes", "0.08", "--max-steps", "100000")
    steps = [s for s, _ in two["steps_losses"]]
    assert two["world_size"] == 2 and 0 < len(steps) < 100000
    assert steps == list(range(len(steps)))


class _Strategy:
    """Two ranks seen from rank 1: broadcast returns rank 0's value, a boolean reduction sees rank 0's wish."""

    def __init__(self, rank0_value, rank0_stop: bool):
        self.rank0_value, self.rank0_stop = rank0_value, rank0_stop

    def broadcast(self, obj, src=0):
        return self.rank0_value

    def reduce_boolean_decision(self, decision, all=True):
        return (decision and self.rank0_stop) if all else (decision or self.rank0_stop)


def test_time_budget_takes_rank_zeros_clock_and_stops_when_any_rank_does():
    import types

    import torch

    from ttlab.worldmodel.train import TimeBudget, WallClockGuard

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    trainer = types.SimpleNamespace(world_size=2, global_step=50, optimizers=[opt], should_stop=False,
                                    strategy=_Strategy(rank0_value=30.0, rank0_stop=True))
    module = types.SimpleNamespace(cfg=types.SimpleNamespace(lr=1.0))
    tb = TimeBudget(minutes=1.0, warmup_steps=1, min_ratio=0.0)  # this rank's own clock: 0 s spent
    tb.on_train_batch_start(trainer, module, None, 0)
    assert tb.elapsed == 30.0  # rank 0's: half the budget, so the cosine LR is at half
    assert opt.param_groups[0]["lr"] == pytest.approx(0.5)
    tb.on_train_batch_end(trainer, module, None, None, 0)  # this rank has time left, rank 0 wants to stop
    assert trainer.should_stop
    guard = WallClockGuard(minutes=10.0)
    guard.on_train_start(trainer, module)
    trainer.should_stop = False
    guard.on_train_batch_end(trainer, module, None, None, 0)
    assert trainer.should_stop and guard.stopped_at == 50
    trainer.strategy.rank0_stop = False  # nobody's clock has run out
    trainer.should_stop = False
    tb.on_train_batch_end(trainer, module, None, None, 0)
    guard.on_train_batch_end(trainer, module, None, None, 0)
    assert not trainer.should_stop
