"""Autoguidance: the guided prediction, the guide loaded from a training checkpoint, and its bad inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ttlab.common.checkpoint import CheckpointError
from ttlab.worldmodel.diffusion import sample_window
from ttlab.worldmodel.diffusion.guidance import AutoGuided, autoguide
from ttlab.worldmodel.weights import load_guide, load_world_model


def _inputs(wm, batch: int = 2, seed: int = 0):
    c = wm.model.cfg
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 4, c.in_channels, c.input_size, c.input_size, generator=g)
    a = torch.randn(batch, 4, c.action_dim, generator=g)
    return x, a, g


def test_autoguide_extrapolates_from_the_bad_prediction():
    good, bad = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 3.0])
    assert torch.equal(autoguide(good, bad, 1.0), good)
    assert torch.allclose(autoguide(good, bad, 2.0), torch.tensor([1.5, 1.0]))
    assert autoguide(good.bfloat16(), bad.bfloat16(), 1.5).dtype == torch.float32
    with pytest.raises(ValueError, match="guidance weight 0.5"):
        AutoGuided(torch.nn.Identity(), torch.nn.Identity(), 0.5)


def test_the_guide_from_the_last_checkpoint_is_the_model_itself(run_dir):
    """The run's last training checkpoint holds (to within an EMA update) the EMA weights it exported. Guiding away
    from the model itself changes nothing, at any weight; guiding away from a perturbed copy does."""
    wm = load_world_model(run_dir)
    ckpts = sorted(Path(run_dir, "checkpoints").glob("step=*.ckpt"))
    assert ckpts, "the fixture run saves step checkpoints"
    guide = load_guide(ckpts[-1], wm)
    for p, q in zip(guide.parameters(), wm.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-3)
    guide.load_state_dict(wm.model.state_dict())
    x, a, _ = _inputs(wm)
    lvl = torch.full(x.shape[:2], 0.5)
    cond = {"cond": x[:, 0]} if wm.obj.cfg.delta else {}
    t = wm.obj.model_time(lvl)
    with torch.no_grad():
        plain = wm.model(x, t, a, **cond)
        assert torch.allclose(AutoGuided(wm.model, guide, 3.0)(x, t, a, **cond), plain, atol=1e-6)
        for p in guide.parameters():
            p.add_(0.05 * torch.randn_like(p))
        bad = guide(x, t, a, **cond)
        guided = AutoGuided(wm.model, guide, 2.0)(x, t, a, **cond)
    assert torch.allclose(guided, 2 * plain - bad, atol=1e-4) and not torch.allclose(guided, plain, atol=1e-3)


def test_a_sampler_with_weight_one_samples_what_the_model_samples(run_dir):
    wm = load_world_model(run_dir)
    guide = load_guide(sorted(Path(run_dir, "checkpoints").glob("step=*.ckpt"))[-1], wm)
    for p in guide.parameters():
        p.data.mul_(0.5)
    x, a, _ = _inputs(wm)
    n_ctx = 2
    outs = []
    for model in (wm.model, AutoGuided(wm.model, guide, 1.0), AutoGuided(wm.model, guide, 2.0)):
        g = torch.Generator().manual_seed(3)
        outs.append(sample_window(model, wm.obj, x[:, :n_ctx], a, x.shape[1] - n_ctx, 2, generator=g))
    assert torch.allclose(outs[0], outs[1], atol=1e-5)
    assert not torch.allclose(outs[0], outs[2], atol=1e-3)
    assert torch.equal(outs[2][:, :n_ctx], x[:, :n_ctx])


def test_a_bad_guide_is_a_one_line_error(run_dir, tmp_path):
    wm = load_world_model(run_dir)
    with pytest.raises(CheckpointError, match="not found"):
        load_guide(tmp_path / "step=9.ckpt", wm)
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable training checkpoint"):
        load_guide(junk, wm)
    other = tmp_path / "other.ckpt"
    torch.save({"state_dict": {"model.w": torch.zeros(2)}}, other)
    with pytest.raises(CheckpointError, match=r"no ema\.\* weights"):
        load_guide(other, wm)
    torch.save({"state_dict": {"ema.pos_embed": torch.zeros(3)}}, other)
    with pytest.raises(CheckpointError, match="not the architecture"):
        load_guide(other, wm)


def test_eval_and_rollout_take_a_guide(run_dir, tmp_path):
    import json

    from ttlab.worldmodel.cli import main

    ckpt = sorted(Path(run_dir, "checkpoints").glob("step=*.ckpt"))[-1]
    assert main(["eval", "--checkpoint", str(run_dir), "--num-samples", "2", "--sampler.steps", "2", "--video-clips",
                 "0", "--device", "cpu", "--sampler.guide", str(ckpt), "--sampler.guidance", "2",
                 "--out", str(tmp_path / "ev")]) == 0
    rep = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert rep["guidance"] == 2.0 and rep["guide"] == str(ckpt) and rep["metrics"]["psnr"] == rep["metrics"]["psnr"]
    assert main(["rollout", "--checkpoint", str(run_dir), "--horizon", "6", "--sampler.steps", "2", "--device", "cpu",
                 "--sampler.guide", str(ckpt), "--sampler.guidance", "1.5", "--out", str(tmp_path / "ro")]) == 0
    assert (tmp_path / "ro" / "rollout.mp4").stat().st_size > 0
