"""Self-forcing clips: the context is what a rollout's second round sees; training with them runs end to end."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ttlab.worldmodel.config import TrainConfig
from ttlab.worldmodel.diffusion import DiffusionConfig, Objective, rollout
from ttlab.worldmodel.diffusion.self_forcing import long_window, rollout_context_clips
from ttlab.worldmodel.model import NanoWM, NanoWMConfig
from ttlab.worldmodel.presets import debug
from ttlab.worldmodel.train import WorldModelModule, build_datasets, build_model_config, train


def _model() -> NanoWM:
    torch.manual_seed(0)
    return NanoWM(NanoWMConfig(in_channels=3, input_size=8, patch_size=4, hidden=32, depth=2, heads=2,
                               action_dim=2, cond_channels=3)).eval()


def test_long_window():
    assert long_window(5, 2) == 8 and long_window(4, 1) == 7
    with pytest.raises(ValueError, match="n_ctx"):
        long_window(3, 3)


def test_clip_context_is_the_rollouts_own_frames_and_the_rest_is_true():
    """The context equals frames window-n_ctx..window-1 of `rollout` from the same start, noise and actions (so
    it is what the second round of a rollout conditions on), the targets are the true frames after them, and
    the actions are the second round's, the first zeroed."""
    obj = Objective(DiffusionConfig(target="x", timestep_sampling="uniform", clean_context_prob=1.0,
                                    context_frames=2, delta=True, delta_scale=2.0))
    model = _model()
    g = torch.Generator().manual_seed(1)
    frames = torch.rand(3, 8, 3, 8, 8, generator=g) * 2 - 1  # (B, 2*5-2, C, H, W)
    actions = torch.arange(1, 9).float()[None, :, None].expand(3, 8, 2).clone()  # frame t's action t + 1
    clip, acts = rollout_context_clips(model, obj, frames, actions, window=5, n_ctx=2, n_steps=3,
                                       generator=torch.Generator().manual_seed(7))
    ref = rollout(model, obj, frames[:, :2], actions, window=5, n_ctx=2, n_steps=3, clip=1.0,
                  generator=torch.Generator().manual_seed(7))  # (B, 8, ...)
    assert clip.shape == (3, 5, 3, 8, 8) and acts.shape == (3, 5, 2)
    torch.testing.assert_close(clip[:, :2], ref[:, 3:5])
    assert not torch.allclose(clip[:, :2], frames[:, 3:5], atol=1e-2)  # generated, not the true frames
    assert torch.equal(clip[:, 2:], frames[:, 5:])
    assert (acts[:, 0] == 0).all() and torch.equal(acts[:, 1:], actions[:, 4:])
    with pytest.raises(ValueError, match="need 8 frames"):
        rollout_context_clips(model, obj, frames[:, :7], actions[:, :7], window=5, n_ctx=2, n_steps=3)


def test_config_checks_and_training_window_length():
    assert TrainConfig(num_frames=5, n_ctx=2).train_frames() == 5
    assert TrainConfig(num_frames=5, n_ctx=2, self_forcing=0.25).train_frames() == 8
    with pytest.raises(ValueError, match="self_forcing"):
        TrainConfig(self_forcing=1.5)
    with pytest.raises(ValueError, match="n_ctx"):
        TrainConfig(num_frames=4, n_ctx=4, self_forcing=0.5)
    with pytest.raises(ValueError, match="self_forcing_start"):
        TrainConfig(self_forcing=0.5, self_forcing_start=1.0)


def _sf_cfg(tmp_path, **kw) -> TrainConfig:
    return replace(debug(), root=str(tmp_path), run_name="sf", num_frames=4, n_ctx=2, sample_steps=2,
                   diffusion=DiffusionConfig(target="x", timestep_sampling="uniform", clean_context_prob=1.0,
                                             context_frames=2, delta=True, delta_scale=2.0),
                   self_forcing=0.5, **kw)


def test_self_forcing_batch_mixes_generated_and_true_context(tmp_path):
    cfg = _sf_cfg(tmp_path)
    tr, va = build_datasets(cfg, None)
    assert tr[0]["frames"].shape[0] == 6 and va[0]["frames"].shape[0] == 4  # validation keeps plain windows
    batch = torch.utils.data.default_collate([tr[i] for i in range(8)])
    mcfg = build_model_config(cfg, tuple(tr[0]["frames"].shape[1:]), tr.action_dim)
    module = WorldModelModule(cfg, mcfg)
    x, a = module.self_forcing_batch(module.model, batch["frames"], batch["actions"])
    assert x.shape[1] == 4 and a.shape[1] == 4
    assert torch.equal(x[4:], batch["frames"][4:, :4]) and torch.equal(a[4:], batch["actions"][4:, :4])
    assert torch.equal(x[:4, 2:], batch["frames"][:4, 4:])  # targets: the true frames after the first window
    assert not torch.equal(x[:4, :2], batch["frames"][:4, 2:4])  # context: the model's own
    assert (a[:, 0] == 0).all()
    # before self_forcing_start of the budget (here of max_steps, at step 0) every clip is a plain one
    late = WorldModelModule(replace(cfg, self_forcing_start=0.5), mcfg)
    x2, a2 = late.self_forcing_batch(late.model, batch["frames"], batch["actions"])
    assert torch.equal(x2, batch["frames"][:, :4]) and torch.equal(a2, batch["actions"][:, :4])


def test_training_with_self_forcing_runs_and_exports(tmp_path):
    out = train(_sf_cfg(tmp_path, max_steps=4, val_every=4, checkpoint_every=4, val_samples=4))
    assert out["steps"] == 4 and "val/psnr" in out["metrics"]
    with pytest.raises(ValueError, match="branch"):
        train(replace(_sf_cfg(tmp_path), run_name="sf2", branch=replace(debug().branch, frac=0.25)))


def test_budget_fraction_follows_the_wall_clock_budget(tmp_path):
    """With a wall-clock budget the self-forcing start is a fraction of its elapsed time, not of max_steps."""
    from types import SimpleNamespace

    from ttlab.worldmodel.train import TimeBudget

    cfg = replace(_sf_cfg(tmp_path), self_forcing_start=0.5, budget_minutes=10.0)
    tr, _ = build_datasets(cfg, None)
    module = WorldModelModule(cfg, build_model_config(cfg, tuple(tr[0]["frames"].shape[1:]), tr.action_dim))
    tb = TimeBudget(10.0, 5, 0.0)
    module._trainer = SimpleNamespace(callbacks=[tb], global_step=0)
    tb.elapsed = 240.0
    assert module.budget_fraction() == pytest.approx(0.4)
    batch = torch.utils.data.default_collate([tr[i] for i in range(4)])
    x, _ = module.self_forcing_batch(module.model, batch["frames"], batch["actions"])
    assert torch.equal(x, batch["frames"][:, :4])
    tb.elapsed = 360.0
    x, _ = module.self_forcing_batch(module.model, batch["frames"], batch["actions"])
    assert not torch.equal(x[:2, :2], batch["frames"][:2, 2:4]) and torch.equal(x[2:], batch["frames"][2:, :4])
