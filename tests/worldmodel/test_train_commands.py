"""CLI commands end to end on a toy run: train, eval (JSON + mp4), rollout beyond the window, headless play."""

from __future__ import annotations

import json

import numpy as np
import pytest


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

    assert main(["eval", "--checkpoint", run_dir, "--num-samples", "4", "--sampler.steps", "2", "--video-clips", "2",
                 "--device", "cpu", "--out", str(tmp_path)]) == 0
    rep = json.loads((tmp_path / "metrics.json").read_text())
    assert {"psnr", "ssim", "baseline_copy_last/psnr"} <= set(rep["metrics"])
    assert set(rep["skipped"]) - {"stlpips"} == {"lpips", "fid", "fvd"}
    # ST-LPIPS is either scored (model and copy-last) or skipped with its reason (these debug frames are small)
    assert ("stlpips" in rep["metrics"] and "baseline_copy_last/stlpips" in rep["metrics"]) != ("stlpips" in rep["skipped"])
    assert _mp4_frames(tmp_path / "gt_vs_pred.mp4") == 4


def test_rollout_goes_beyond_the_training_window(run_dir, tmp_path):
    from ttlab.worldmodel.diffusion import SamplerConfig
    from ttlab.worldmodel.rollouts import RolloutConfig, rollout_run

    res = rollout_run(RolloutConfig(checkpoint=run_dir, horizon=10, sampler=SamplerConfig(steps=2), device="cpu", out=tmp_path))
    assert res["frames"] == 10 and res["window"] == 4
    assert np.isfinite(res["psnr"]) and np.isfinite(res["baseline_copy_last/psnr"])
    assert _mp4_frames(tmp_path / "rollout.mp4") == 10
    raw = np.ones((5, 3), np.float32)  # wrong raw action width
    np.save(tmp_path / "a.npy", raw)
    with pytest.raises(ValueError, match="actions"):
        rollout_run(RolloutConfig(checkpoint=run_dir, actions=tmp_path / "a.npy", horizon=10, sampler=SamplerConfig(steps=2),
                                  device="cpu",
                                  out=tmp_path))


def test_eval_reports_per_lag_numbers_with_the_runs_own_sampler(run_dir, tmp_path):
    from ttlab.worldmodel.evaluate import EvalConfig, evaluate

    rep = evaluate(EvalConfig(checkpoint=run_dir, num_samples=4, video_clips=1, device="cpu", out=tmp_path))
    assert rep["steps"] == 2  # steps=0 means the run's own sample_steps
    m = rep["metrics"]
    for k in (1, 2, 3):
        assert {f"psnr/lag{k}", f"baseline_copy_last/psnr/lag{k}", f"baseline_mean_frame/psnr/lag{k}"} <= set(m)
    assert "psnr/lag4" not in m
    assert max(v for k, v in m.items() if "psnr" in k) <= 80.0
    # no video asked for: none written, the metrics still are
    rep0 = evaluate(EvalConfig(checkpoint=run_dir, num_samples=4, video_clips=0, device="cpu", out=tmp_path / "novid"))
    assert rep0["video"] is None and not (tmp_path / "novid" / "gt_vs_pred.mp4").exists()
    assert rep0["metrics"]["psnr"] == pytest.approx(m["psnr"])  # same subset and noise
    with pytest.raises(ValueError, match="video-clips"):
        evaluate(EvalConfig(checkpoint=run_dir, num_samples=4, video_clips=-1, device="cpu", out=tmp_path))


def test_heldout_rollouts_score_only_held_out_episodes_against_copy_last(run_dir):
    import torch

    from ttlab.worldmodel.config import TrainConfig
    from ttlab.worldmodel.data.windows import to_model_frames
    from ttlab.worldmodel.metrics import psnr
    from ttlab.worldmodel.rollouts import heldout_rollouts
    from ttlab.worldmodel.train import build_datasets

    res = heldout_rollouts(run_dir, horizon=9, steps=2, device="cpu", max_episodes=3)
    gt, pred = res.pop("_first_batch")
    assert res["episodes"] == 2  # debug preset: 16 toy episodes, val_fraction 0.1 -> 2 held out
    assert gt.shape == pred.shape == (2, 9, 3, 16, 16)
    assert len(res["psnr/by_frame"]) == 8 and len(res["baseline_copy_last/psnr/by_frame"]) == 8
    _, val = build_datasets(TrainConfig(data="toy", toy_episodes=16), None)
    first = int(val.episodes[0])
    assert torch.equal(gt[0], to_model_frames(val.source.frames(first, np.arange(9))))
    copy = psnr(gt[:, :1].expand(-1, 8, -1, -1, -1), gt[:, 1:]).mean().item()
    assert res["baseline_copy_last/psnr"] == pytest.approx(copy, abs=1e-4)
    with pytest.raises(ValueError, match="no held-out episode"):
        heldout_rollouts(run_dir, horizon=100, device="cpu")


def test_play_headless_with_scripted_keys(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("SDL_AUDIODRIVER", "dummy")
    from ttlab.worldmodel.play import PlayConfig, play

    res = play(PlayConfig(checkpoint=run_dir, script="RRU.L", steps=2, fps=1000, device="cpu",
                          record=tmp_path / "play.mp4"))
    assert res["frames"] == 5
    assert res["directions"] == [(1, 0), (1, 0), (0, -1), (0, 0), (-1, 0)]
    assert _mp4_frames(tmp_path / "play.mp4") == 5
