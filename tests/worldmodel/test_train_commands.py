"""CLI commands end to end on a toy run: train, eval (JSON + mp4), rollout beyond the window, headless play."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from ttlab.worldmodel.presets import debug


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from ttlab.worldmodel.train import train

    root = tmp_path_factory.mktemp("wm")
    cfg = replace(debug(), root=str(root), run_name="t", max_steps=4, val_every=4, ckpt_every=4, val_samples=2,
                  sample_steps=2)
    return train(cfg)["run_dir"]


def _mp4_frames(path) -> int:
    import av

    with av.open(str(path)) as box:
        return sum(1 for _ in box.decode(video=0))


def test_cli_help_lists_commands(capsys):
    from ttlab.worldmodel.cli import main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("train", "eval", "rollout", "play"):
        assert name in out
    assert main(["train", "--help"]) == 0


def test_eval_writes_metrics_json_and_video(run_dir, tmp_path, capsys):
    from ttlab.worldmodel.cli import main

    assert main(["eval", "--weights", run_dir, "--num-samples", "4", "--steps", "2", "--video-clips", "2",
                 "--device", "cpu", "--out", str(tmp_path)]) == 0
    rep = json.loads((tmp_path / "metrics.json").read_text())
    assert {"psnr", "ssim", "baseline_copy_last/psnr"} <= set(rep["metrics"])
    assert set(rep["skipped"]) == {"lpips", "fid", "fvd"}
    assert _mp4_frames(tmp_path / "gt_vs_pred.mp4") == 4


def test_rollout_goes_beyond_the_training_window(run_dir, tmp_path):
    from ttlab.worldmodel.evaluate import RolloutConfig, rollout_run

    res = rollout_run(RolloutConfig(weights=run_dir, horizon=10, steps=2, device="cpu", out=tmp_path))
    assert res["frames"] == 10 and res["window"] == 4
    assert np.isfinite(res["psnr"]) and np.isfinite(res["baseline_copy_last/psnr"])
    assert _mp4_frames(tmp_path / "rollout.mp4") == 10
    raw = np.ones((5, 3), np.float32)  # wrong raw action width
    np.save(tmp_path / "a.npy", raw)
    with pytest.raises(ValueError, match="actions"):
        rollout_run(RolloutConfig(weights=run_dir, actions=tmp_path / "a.npy", horizon=10, steps=2, device="cpu",
                                  out=tmp_path))


def test_play_headless_with_scripted_keys(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("SDL_AUDIODRIVER", "dummy")
    from ttlab.worldmodel.play import PlayConfig, play

    res = play(PlayConfig(weights=run_dir, script="RRU.L", steps=2, fps=1000, device="cpu",
                          record=tmp_path / "play.mp4"))
    assert res["frames"] == 5
    assert res["directions"] == [(1, 0), (1, 0), (0, -1), (0, 0), (-1, 0)]
    assert _mp4_frames(tmp_path / "play.mp4") == 5
