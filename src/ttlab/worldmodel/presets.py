"""Named training configs (functions returning a `TrainConfig`): debug, per dataset, and the guide's ablations.

Ablation arms follow the guide's protocol: one shared reference (v target, additive injection, cosine +
zero-terminal-SNR) and one axis varied per arm; each target runs in its native schedule (eps: linear, no
ZTSNR; flow: no ZTSNR, no SNR weighting).
"""

from __future__ import annotations

from dataclasses import replace

from ttlab.worldmodel.config import TrainConfig
from ttlab.worldmodel.diffusion import DiffusionConfig


def debug() -> TrainConfig:
    """Seconds on CPU: toy moving squares, the tiny model, a handful of steps."""
    return TrainConfig(data="toy", toy_episodes=16, size="tiny", batch_size=8, max_steps=20, warmup_steps=5,
                       val_every=10, checkpoint_every=10, val_samples=8, sample_steps=4, log_every=5, num_workers=0,
                       device="cpu", progress_bar=False, ema_decay=0.99, threads=1)


def tiny_pusht() -> TrainConfig:
    """The demo: the `pusht_cpu_regressor` configuration (residual x target from pure noise, 1-step sampler,
    DINO-WM spacing) with a budget of a few CPU minutes: 300 steps of 16 clips, the cosine annealing inside
    them. The wall-clock guard only protects `make demo` on a very busy machine (the summary says if it hit)."""
    return replace(pusht_cpu_regressor(), data="runs/data/pusht64", batch_size=16, max_steps=300, warmup_steps=30,
                   checkpoint_every=100, ema_decay=0.99, log_every=10, time_limit="10m")


def pusht_cpu() -> TrainConfig:
    """The CPU evidence configuration (`benchmarks/wm_evidence.py`): a generative world model on PushT 64x64
    pixels from the smooth pusher at DINO-WM's spacing (frame_interval 5), 2 clean context frames + 3
    predicted, a 128-wide 6-block NanoWM with 8x8 patches.

    The diffusion runs on the change from the last context frame (`delta`, scaled x2; the model sees that
    frame as 3 extra input channels, so copying it is the zero output), x target (the patch is wider than
    the model, where x-prediction is the one that works), trained at uniform levels over the whole
    zero-terminal-SNR cosine schedule, independent per frame (diffusion forcing), and sampled with 10-step
    DDIM from pure noise. bf16 autocast on one thread (float32 on a CPU without bf16 units). `benchmarks/wm_evidence.py` trains it for a wall-clock
    budget (`budget_minutes`: the cosine anneals over the elapsed fraction), so a busy machine trains fewer steps.
    """
    return TrainConfig(data="data/pusht64_smooth", size="tiny", patch_size=8, hidden=128, heads=4, depth=6,
                       num_frames=5, frame_interval=5, n_ctx=2, sample_steps=10,
                       diffusion=DiffusionConfig(target="x", timestep_sampling="uniform", clean_context_prob=1.0,
                                                 context_frames=2, delta=True, delta_scale=2.0, snr_gamma=5.0),
                       batch_size=16, lr=6e-4, weight_decay=0.0, warmup_steps=100, max_steps=1500,
                       val_every=10**9, checkpoint_every=100, val_samples=16, num_workers=0, ema_decay=0.995,
                       log_every=25, threads=1, precision="bf16-mixed", episode_cache=-1, progress_bar=False,
                       device="cpu")


def pusht_map() -> TrainConfig:
    """The README's headline world model, as `benchmarks/wm_evidence.py --abs-actions --action-map gaussian
    --compile --refiner 32 --devices 2 --batch 32 --train-minutes 83` trains it: `pusht_cpu` with absolute PD
    targets, each drawn as a Gaussian blob in an input channel of the frame it leads to, a 32-channel
    full-resolution refiner after the patch output, `torch.compile`, and an 83-minute wall-clock budget (the
    cosine anneals over elapsed time). Batch 16 per process: with `--devices 2`, a global batch of 32.
    """
    return replace(pusht_cpu(), relative_actions=False, action_map="gaussian", refiner=32, compile=True,
                   budget_minutes=83.0, max_steps=10**7, checkpoint_every=200)


def pusht_cpu_debug() -> TrainConfig:
    """`pusht_cpu` shrunk for tests (seconds on CPU): a 32-wide 2-block model, batch 4, 2 sampling steps."""
    return replace(pusht_cpu(), hidden=32, heads=2, depth=2, batch_size=4, sample_steps=2, warmup_steps=2,
                   max_steps=4, checkpoint_every=2, log_every=1, episode_cache=64)


def pusht_cpu_regressor() -> TrainConfig:
    """The earlier CPU configuration, kept for comparison: PushT 64x64 from the scripted pusher (frame_interval 5),
    1 clean context frame + 3 predicted, a 128-wide 4-block NanoWM with 8x8 patches.

    The model predicts the *change* from the context frame (residual x target: copying the last frame is
    the zero output) from pure noise only (terminal levels), i.e. the conditional mean that maximises PSNR;
    its matching sampler is one step: a regressor, not a generative model. Frame 0 embeds the mean action
    (`null_first_action=False`) and PyTorch's shuffling and RNG stream (`rank_invariant=False`), as when it
    was measured.
    """
    return TrainConfig(data="data/pusht64", size="tiny", patch_size=8, hidden=128, heads=4, depth=4,
                       num_frames=4, frame_interval=5, n_ctx=1, sample_steps=1,
                       diffusion=DiffusionConfig(target="x", timestep_sampling="terminal", clean_context_prob=1.0,
                                                 context_frames=1, residual=True),
                       batch_size=32, lr=1e-3, weight_decay=0.0, warmup_steps=100, max_steps=1500,
                       val_every=10**9, checkpoint_every=100, val_samples=16, num_workers=0, ema_decay=0.995,
                       log_every=25, threads=1, precision="bf16-mixed", episode_cache=1024, progress_bar=False,
                       device="cpu", null_first_action=False, rank_invariant=False)


def pusht_b4() -> TrainConfig:
    """PushT 64x64 pixels (ttlab wm data pusht), B/2 widths with 4x4 patches (256 tokens/frame), one H100."""
    return TrainConfig(data="runs/data/pusht64", size="B/2", patch_size=4, frame_interval=1, batch_size=64, lr=2e-4,
                       warmup_steps=500, max_steps=20_000, time_limit="28m", val_every=2000, checkpoint_every=2000,
                       num_workers=8)


def pusht_b2() -> TrainConfig:
    """DINO-WM PushT through a latent codec (4x32x32 latents from `ttlab wm encode`), NanoWM-B/2."""
    return TrainConfig(data="runs/data/pusht_latents", format="latents", size="B/2", frame_interval=5,
                       batch_size=32, max_steps=100_000)


def rt1_b2() -> TrainConfig:
    """RT-1 fractal latents, NanoWM-B/2 (the guide's main RT-1 run)."""
    return TrainConfig(data="runs/data/rt1_latents", format="latents", size="B/2", batch_size=32, max_steps=300_000)


def csgo_l2() -> TrainConfig:
    """CSGO latents, NanoWM-L/2."""
    return TrainConfig(data="runs/data/csgo_latents", format="latents", size="L/2", batch_size=8, max_steps=100_000,
                       n_ctx=4, num_frames=8)


def _diffusion_for(target: str) -> DiffusionConfig:
    if target == "eps":
        return DiffusionConfig(target="eps", schedule="linear", zero_terminal_snr=False)
    if target == "flow":
        return DiffusionConfig(target="flow", zero_terminal_snr=False, snr_gamma=0.0)
    return DiffusionConfig(target=target)


def _ablations(base_fn) -> dict:
    out = {}
    for t in ("v", "x", "eps", "flow"):
        out[f"abl_pred_{t}"] = lambda t=t: replace(base_fn(), diffusion=_diffusion_for(t))
    for inj in ("additive", "adaln", "adaln_fuse", "film", "cross_attention"):
        out[f"abl_inj_{inj}"] = lambda inj=inj: replace(base_fn(), injection=inj)
    for s in ("S/2", "B/2", "L/2"):
        out[f"abl_scale_{s[0].lower()}2"] = lambda s=s: replace(base_fn(), size=s)
    return out


TRAIN_PRESETS = {"debug": debug, "tiny_pusht": tiny_pusht, "pusht_cpu": pusht_cpu, "pusht_map": pusht_map,
                 "pusht_cpu_debug": pusht_cpu_debug,
                 "pusht_cpu_regressor": pusht_cpu_regressor, "pusht_b4": pusht_b4, "pusht_b2": pusht_b2,
                 "rt1_b2": rt1_b2, "csgo_l2": csgo_l2, **_ablations(pusht_b4)}
