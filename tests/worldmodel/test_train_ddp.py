"""Multi-process training: `ttlab wm train` with Lightning DDP over 2 CPU processes (gloo) follows the loss
curve of 1 process with the same global batch (rank-invariant batches and noise), step for step.

Not marked slow on purpose: `make test` (what CI runs) includes it (about 85 s on 2 loaded cores)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _train(root: Path, name: str, devices: int, batch: int, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "ttlab.cli", "wm", "train", "--preset", "debug", "--root", str(root),
           "--run-name", name, "--device", "cpu", "--devices", str(devices), "--batch-size", str(batch),
           "--max-steps", "8", "--warmup-steps", "2", "--lr", "2e-3", "--log-every", "1", "--val-every", "1000",
           "--checkpoint-every", "1000", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads((root / "wm" / name / "loss_curve.json").read_text())


def test_ddp_two_cpu_processes_follow_the_one_process_loss_curve_with_the_same_global_batch(tmp_path):
    one = _train(tmp_path, "one", devices=1, batch=8)
    two = _train(tmp_path, "two", devices=2, batch=4)
    assert (one["world_size"], two["world_size"]) == (1, 2)
    assert one["global_batch"] == two["global_batch"] == 8
    s1, l1 = zip(*one["steps_losses"], strict=True)
    s2, l2 = zip(*two["steps_losses"], strict=True)
    assert s1 == s2 == tuple(range(8))
    assert l1 == pytest.approx(l2, rel=1e-4, abs=1e-6)  # same clips, same noise, averaged gradients
    # the comparison can fail: one process at half the global batch follows another curve
    half = _train(tmp_path, "half", devices=1, batch=4)
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
