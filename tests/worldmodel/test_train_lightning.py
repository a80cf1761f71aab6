"""LR schedule golden curve; Lightning training on toy data lowers the loss, exports weights, resumes."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from ttlab.worldmodel.presets import TRAIN_PRESETS, debug
from ttlab.worldmodel.train import train, video_grid, warmup_cosine
from ttlab.worldmodel.weights import load_world_model


def test_warmup_cosine_curve_golden():
    lr = [warmup_cosine(s, warmup=10, total=110) for s in range(111)]
    assert lr[0] == pytest.approx(0.1) and lr[4] == pytest.approx(0.5) and lr[9] == pytest.approx(1.0)
    assert lr[10] == pytest.approx(1.0)
    assert lr[60] == pytest.approx(0.5)  # half way through the cosine
    assert lr[110] == pytest.approx(0.0, abs=1e-12)
    assert all(a >= b for a, b in zip(lr[10:], lr[11:], strict=False))  # monotone decay after warmup
    assert warmup_cosine(35, 10, 110, min_ratio=0.1) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.25)))


def test_lightning_scheduler_follows_the_curve():
    import lightning as L  # noqa: F401

    from ttlab.worldmodel.model import size_config
    from ttlab.worldmodel.train import WorldModelModule

    cfg = replace(debug(), warmup_steps=4, max_steps=12, lr=1e-3)
    mod = WorldModelModule(cfg, size_config("tiny"))
    opts = mod.configure_optimizers()
    opt, sched = opts["optimizer"], opts["lr_scheduler"]["scheduler"]
    seen = []
    for _ in range(12):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([1e-3 * warmup_cosine(s, 4, 12) for s in range(12)])


def test_video_grid_layout():
    gt, pred = -torch.ones(2, 3, 1, 4, 5), torch.ones(2, 3, 1, 4, 5)
    img = video_grid(gt, pred)
    assert img.shape == (1, 2 * 2 * 4, 3 * 5)
    assert img[:, :4].max() == 0 and img[:, 4:8].min() == 1


def test_presets_include_every_ablation_arm():
    for name in ("abl_pred_v", "abl_pred_x", "abl_pred_eps", "abl_pred_flow", "abl_inj_film", "abl_inj_cross_attention",
                 "abl_scale_s2", "abl_scale_l2", "debug", "tiny_pusht"):
        assert name in TRAIN_PRESETS
    assert TRAIN_PRESETS["abl_pred_eps"]().diffusion.schedule == "linear"
    assert TRAIN_PRESETS["abl_inj_adaln"]().injection == "adaln"


def test_training_reduces_loss_exports_and_resumes(tmp_path):
    torch.manual_seed(0)
    cfg = replace(debug(), root=str(tmp_path), run_name="r", max_steps=24, lr=2e-3, warmup_steps=3, val_every=24,
                  checkpoint_every=12, val_samples=4, ema_decay=0.9)
    from ttlab.worldmodel.model import NanoWM
    from ttlab.worldmodel.train import WorldModelModule, build_datasets, build_model_config

    tr, _ = build_datasets(cfg, None)
    batch = torch.utils.data.default_collate([tr[i] for i in range(8)])
    mcfg = build_model_config(cfg, tuple(tr[0]["frames"].shape[1:]), tr.action_dim)

    def fixed_loss(model: NanoWM) -> float:
        g = torch.Generator().manual_seed(123)
        with torch.no_grad():
            return float(WorldModelModule(cfg, mcfg).obj.loss(model, batch["frames"], batch["actions"], g)[0])

    torch.manual_seed(cfg.seed)
    before = fixed_loss(WorldModelModule(cfg, mcfg).model)
    out = train(cfg)
    assert out["steps"] == 24
    loaded = load_world_model(tmp_path / "wm" / "r", ema=False)
    assert loaded.step == 24
    after = fixed_loss(loaded.model)
    assert after < 0.8 * before
    assert (tmp_path / "wm" / "r" / "checkpoints" / "step=12.ckpt").exists()
    assert "val/psnr" in out["metrics"] and "val/baseline_copy_last/psnr" in out["metrics"]
    assert list((tmp_path / "wm" / "r" / "tb").glob("events.*"))
    # resume: continues from last.ckpt to the new max_steps instead of starting over
    out2 = train(replace(cfg, resume=True, max_steps=27))
    assert out2["steps"] == 27
    assert load_world_model(tmp_path / "wm" / "r").step == 27


def test_wall_clock_guard_counts_only_this_process_and_stops_the_trainer():
    """Regression: Lightning's max_time restored the elapsed time from the checkpoint, so a resumed run
    that had used its minutes stopped at once. The guard starts its clock at this process's train start."""
    import time as _time
    from types import SimpleNamespace

    from ttlab.worldmodel.train import WallClockGuard

    trainer = SimpleNamespace(should_stop=False, global_step=7)
    guard = WallClockGuard(minutes=0.5 / 60)
    guard.on_train_batch_end(trainer, None, None, None, 0)  # before train start: no clock, no stop
    assert not trainer.should_stop
    guard.on_train_start(trainer, None)
    guard.on_train_batch_end(trainer, None, None, None, 0)
    assert not trainer.should_stop
    _time.sleep(0.6)
    guard.on_train_batch_end(trainer, None, None, None, 0)
    assert trainer.should_stop and guard.stopped_at == 7


def test_cpu_presets_anneal_inside_their_step_budget_and_use_the_matching_sampler():
    from ttlab.worldmodel.presets import pusht_cpu, pusht_cpu_regressor, tiny_pusht
    from ttlab.worldmodel.train import warmup_cosine

    for cfg in (pusht_cpu_regressor(), tiny_pusht()):
        assert cfg.diffusion.residual and cfg.diffusion.timestep_sampling == "terminal" and cfg.sample_steps == 1
        assert cfg.frame_interval == 5 and cfg.num_frames == 4 and cfg.n_ctx == cfg.diffusion.context_frames == 1
        assert warmup_cosine(cfg.max_steps - 1, cfg.warmup_steps, cfg.max_steps) < 1e-3  # the last step: ~0
    gen = pusht_cpu()  # the generative configuration: every level trained, a multi-step sampler, 2+ context frames
    assert gen.diffusion.delta and gen.diffusion.timestep_sampling == "uniform" and 8 <= gen.sample_steps <= 16
    assert 2 <= gen.n_ctx == gen.diffusion.context_frames <= 3 and gen.num_frames > gen.n_ctx


def test_time_budget_anneals_over_elapsed_time_stops_and_resumes_its_clock():
    import time as _time
    from types import SimpleNamespace

    from ttlab.worldmodel.train import TimeBudget

    group = {"lr": 0.0}
    trainer = SimpleNamespace(should_stop=False, global_step=0, optimizers=[SimpleNamespace(param_groups=[group])])
    module = SimpleNamespace(cfg=SimpleNamespace(lr=1.0))
    tb = TimeBudget(minutes=0.4 / 60, warmup_steps=2, min_ratio=0.0)
    tb.on_train_batch_start(trainer, module, None, 0)
    assert group["lr"] == 0.5  # warmup counts steps: (0 + 1) / 2
    trainer.global_step = 5
    tb.elapsed = 0.2  # half the budget spent: the cosine is at 0.5
    tb.t_last = _time.perf_counter()
    tb.on_train_batch_start(trainer, module, None, 0)
    assert group["lr"] == pytest.approx(0.5, abs=0.02)
    tb.on_train_batch_end(trainer, module, None, None, 0)
    assert not trainer.should_stop
    resumed = TimeBudget(minutes=0.4 / 60, warmup_steps=2, min_ratio=0.0)
    resumed.load_state_dict(tb.state_dict())  # a resumed run continues the clock
    resumed.elapsed += 0.25
    resumed.on_train_batch_start(trainer, module, None, 0)
    resumed.on_train_batch_end(trainer, module, None, None, 0)
    assert trainer.should_stop and group["lr"] < 0.01


def test_bf16_gradient_clip_works_with_the_fused_optimizer_and_clips_to_the_norm():
    import lightning as L

    from ttlab.worldmodel.model import size_config
    from ttlab.worldmodel.train import WorldModelModule

    mod = WorldModelModule(replace(debug(), fused_optimizer=True), size_config("tiny"))
    opt = mod.configure_optimizers()["optimizer"]
    assert opt.defaults["fused"]  # the fused CPU kernel was asked for
    mod.trainer = L.Trainer(accelerator="cpu", precision="bf16-mixed", logger=False, enable_progress_bar=False)
    for p in mod.model.parameters():
        p.grad = torch.full_like(p, 3.0)
    with pytest.raises(RuntimeError, match="fused"):  # what Lightning's own clipping does with a fused optimizer
        mod.clip_gradients(opt, gradient_clip_val=1.0)
    mod.configure_gradient_clipping(opt, gradient_clip_val=1.0)
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in mod.model.parameters()]))
    assert norm == pytest.approx(1.0, rel=1e-4)
    assert all(p.grad is None for p in mod.ema.parameters())  # the EMA copy is not part of the clip


def test_fused_optimizer_training_matches_the_default_optimizer(tmp_path):
    curves = {}
    for fused in (False, True):
        out = train(replace(debug(), max_steps=4, fused_optimizer=fused, root=str(tmp_path), run_name=f"f{fused}",
                            log_every=1, val_every=10**9))
        curves[fused] = [loss for _, loss in out["loss_curve"]]
    assert len(curves[True]) == 4
    np.testing.assert_allclose(curves[True], curves[False], rtol=1e-3)


def test_a_model_with_a_refiner_trains_exports_and_loads_with_it(tmp_path):
    cfg = replace(debug(), root=str(tmp_path), run_name="ref", max_steps=4, warmup_steps=1, val_every=10**9,
                  checkpoint_every=4, refiner=4)
    train(cfg)
    loaded = load_world_model(tmp_path / "wm" / "ref")
    assert loaded.model.cfg.refiner == 4 and loaded.train_cfg["refiner"] == 4
    assert loaded.model.refine.conv3.weight.abs().sum() > 0  # trained away from its zero init


def test_heldout_of_scores_a_larger_dataset_on_the_smaller_ones_heldout_episodes():
    from ttlab.worldmodel.data.windows import split_episodes
    from ttlab.worldmodel.train import build_datasets

    small = replace(debug(), toy_episodes=20, split_seed=0)
    _, val_small = build_datasets(small, None)
    big = replace(small, toy_episodes=60, heldout_of=20)
    tr, val = build_datasets(big, None)
    assert np.array_equal(val.episodes, val_small.episodes)  # the same held-out episodes ...
    assert np.array_equal(val.episodes, split_episodes(20, small.val_fraction, 0)[1])
    assert set(tr.episodes) == set(range(60)) - set(val.episodes)  # ... and every other episode trains
    with pytest.raises(ValueError, match="heldout-of 61"):
        build_datasets(replace(big, heldout_of=61), None)


def test_only_the_ema_copy_may_start_training_in_eval_mode():
    import warnings

    from ttlab.worldmodel.model import size_config
    from ttlab.worldmodel.train import WorldModelModule

    mod = WorldModelModule(replace(debug(), max_steps=2), size_config("tiny")).train()
    mod.ema.eval()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mod.on_train_start()
    assert not [w for w in seen if "eval mode" in str(w.message)]
    next(iter(mod.model.children())).eval()  # a trained module left in eval mode is named
    with pytest.warns(UserWarning, match="modules in eval mode at the start of training: model"):
        mod.on_train_start()
