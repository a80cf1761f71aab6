"""Object-level scores and the cheap predictors of the PushT scorecard: what a blur cannot fake."""

import numpy as np
import pytest
import torch

from ttlab.worldmodel.data.pusht import motion_stats, rollout_episode
from ttlab.worldmodel.data.windows import to_model_frames
from ttlab.worldmodel.objects import (
    AGENT_RGB,
    TEE_RGB,
    blur_frames,
    ink_counts,
    ink_in_place,
    pose_errors,
    pose_targets,
    read_poses,
)
from ttlab.worldmodel.scorecard import fit_baselines, fit_blend_alpha, scorecard_targets


@pytest.fixture(scope="module")
def episode():
    return rollout_episode(3, resolution=64, max_steps=60)


def test_smooth_pusher_moves_a_few_pixels_per_model_frame_and_the_scripted_one_many(episode):
    smooth = motion_stats([episode["states"]], [60], 5)
    old = rollout_episode(3, resolution=64, max_steps=60, pusher="scripted")
    fast = motion_stats([old["states"]], [60], 5)
    assert 1.0 < smooth["agent_px_median"] < 7.0 and smooth["agent_px_p90"] < 9.0
    assert fast["agent_px_mean"] > 2 * smooth["agent_px_mean"]
    with pytest.raises(ValueError, match="pusher"):
        rollout_episode(3, resolution=64, max_steps=2, pusher="random")


def test_ink_sees_the_t_and_the_agent_and_a_blur_loses_them(episode):
    frames = to_model_frames(episode["frames"][:10])  # (10, 3, 64, 64)
    ink = ink_counts(frames)
    assert (ink["tee"] > 50).all() and (ink["agent"] > 3).all()
    blurred = ink_counts(blur_frames(frames))
    assert (blurred["tee"] < 0.6 * ink["tee"]).all() and (blurred["agent"] < 0.5 * ink["agent"]).all()
    white = torch.ones_like(frames)
    assert ink_counts(white)["tee"].sum() == 0
    solid = torch.tensor(TEE_RGB, dtype=torch.float32).view(3, 1, 1) / 127.5 - 1
    assert ink_counts(solid.expand(3, 8, 8))["tee"] == 64 and AGENT_RGB != TEE_RGB


def test_ink_in_place_tells_a_shifted_t_from_a_blur_and_from_a_speckle_cloud(episode):
    frames = to_model_frames(episode["frames"][:6])  # (6, 3, 64, 64)
    same = ink_in_place(frames, frames)
    assert torch.equal(same["kept"], torch.ones(6)) and torch.equal(same["placed"], torch.ones(6))
    shifted = ink_in_place(torch.roll(frames, 1, dims=-1), frames)  # the rigid T one pixel off
    assert (shifted["kept"] > 0.95).all() and (shifted["placed"] > 0.95).all()
    far = ink_in_place(torch.roll(frames, 6, dims=-1), frames)  # six pixels off: mostly not in place
    assert (far["kept"] < 0.8).all() and (far["placed"] < 0.8).all()
    assert (ink_in_place(blur_frames(frames), frames)["kept"] < 0.7).all()
    # T-coloured speckle: as much ink as the T, a third of it on the T and the rest scattered around it
    tee = torch.tensor(TEE_RGB, dtype=torch.float32).view(3, 1, 1) / 127.5 - 1
    g = torch.Generator().manual_seed(0)
    cloud = frames.clone()
    on_tee = ink_counts(frames)["tee"][0]
    spots = torch.rand(6, 1, 64, 64, generator=g) < (2 * on_tee / 3) / (64 * 64)
    cloud = torch.where(spots, tee, torch.where(torch.rand(6, 1, 64, 64, generator=g) < 0.66, 1.0, cloud))
    speckle = ink_in_place(cloud, frames)
    assert (ink_counts(cloud)["tee"] > 0.5 * ink_counts(frames)["tee"]).all()  # plenty of ink by count
    assert (speckle["placed"] < 0.7).all()


def test_pose_errors_in_pixels_and_degrees():
    t = torch.tensor(pose_targets(np.array([[256.0, 256.0, 100.0, 100.0, 0.0]])))
    moved = t.clone()
    moved[0, 0] += 8 / 512  # the agent one 64-px pixel to the right
    a = np.pi / 2
    moved[0, 4:] = torch.tensor([np.cos(a), np.sin(a)])
    e = pose_errors(moved, t, 64)
    assert e["agent_px"].item() == pytest.approx(1.0) and e["tee_px"].item() == 0.0
    assert e["tee_deg"].item() == pytest.approx(90.0, abs=1e-3)


def test_pose_reader_finds_the_agent_and_the_t_in_true_frames_and_nothing_in_a_blank_one(episode):
    frames = to_model_frames(episode["frames"][::6])
    y = torch.from_numpy(pose_targets(episode["states"][::6]))
    e = pose_errors(read_poses(frames), y, 64)
    assert e["agent_px"].mean() < 1.0 and e["tee_px"].mean() < 1.0 and e["tee_deg"].mean() < 5.0
    blank = pose_errors(read_poses(torch.ones_like(frames)), y, 64)  # no ink: the image centre, angle 0
    assert blank["tee_px"].mean() > 5 * e["tee_px"].mean() + 2.0


def test_blend_weight_is_the_least_squares_one():
    g = torch.Generator().manual_seed(0)
    last, mean = torch.rand(4, 3, 8, 8, generator=g), torch.rand(3, 8, 8, generator=g)
    target = 0.3 * last + 0.7 * mean
    assert fit_blend_alpha(last, target, mean) == pytest.approx(0.3, abs=1e-6)
    assert fit_blend_alpha(last, last, mean) == pytest.approx(1.0, abs=1e-6)
    assert fit_blend_alpha(last, 2 * mean - last, mean) == 0.0  # clipped to [0, 1]


class _ShortSource:
    """Two 12-step episodes of random uint8 frames."""

    def length(self, e: int) -> int:
        return 12

    def frames(self, e: int, idx: np.ndarray) -> np.ndarray:
        rng = np.random.default_rng(e)
        return rng.integers(0, 256, size=(len(idx), 8, 8, 3), dtype=np.uint8)


def test_baselines_name_the_lag_that_episodes_are_too_short_for():
    fit_baselines(_ShortSource(), np.arange(2), interval=5, max_lag=2)  # lags 1-2 fit in 12 steps
    with pytest.raises(ValueError, match="lag 3 x frame interval 5 = 15 steps"):
        fit_baselines(_ShortSource(), np.arange(2), interval=5, max_lag=3)


def _scores(model_psnr: float, tee_px: list[float], ink: float, other_psnr: float, placed: float = 0.9) -> dict:
    """A scorecard result (`score_windows` / `score_rollouts` keys) with fixed baselines; the T's ink kept is
    `ink` capped at 1, its ink placed `placed`."""
    out = {"n_ctx": 2, "model/psnr": model_psnr, "model/ssim": 0.8, "model/tee_px/by_lag": tee_px,
           "model/tee_px": sum(tee_px) / len(tee_px), "model/tee_ink_ratio/by_lag": [ink] * 22,
           "model/tee_kept/by_lag": [min(ink, 1.0)] * 22, "model/tee_placed/by_lag": [placed] * 22,
           "model/agent_ink_ratio": 0.6, "model/agent_px": 1.5, "model_other_actions/psnr": other_psnr,
           "model_other_actions/tee_px": 4.0, "copy_last/tee_px/by_lag": [2.0, 4.0, 6.0]}
    for name, (ps, ss) in {"copy_last": (25.0, 0.7), "mean_frame": (15.0, 0.5), "blend": (26.0, 0.75)}.items():
        out[f"{name}/psnr"], out[f"{name}/ssim"] = ps, ss
    return out


def test_scorecard_targets_are_met_only_past_every_baseline_and_every_margin():
    t = scorecard_targets(_scores(27.0, [1.0, 2.0, 3.0], 0.9, 24.0), _scores(26.5, [1.0, 2.0, 3.0], 0.85, 24.0))
    assert all(v["met"] for v in t.values()), {k for k, v in t.items() if not v["met"]}
    assert t["windows_psnr_beats_all_baselines"] == {"model": 27.0, "best_baseline": 26.0, "met": True}
    assert t["true_actions_beat_other_by_2db_windows"]["gap_db"] == 3.0
    # rollouts below the blend; a lag-3 pose error over half copy-last's; ink lost by frame 8; a 1.5 dB gap
    t = scorecard_targets(_scores(27.0, [1.0, 2.0, 3.5], 0.9, 25.5), _scores(25.9, [1.0, 2.0, 3.0], 0.7, 24.0))
    met = {k: v["met"] for k, v in t.items()}
    assert met == {"windows_psnr_beats_all_baselines": True, "windows_ssim_beats_all_baselines": True,
                   "rollouts_psnr_beats_all_baselines": False, "rollouts_ssim_beats_all_baselines": True,
                   "tee_pose_error_at_most_half_copy_last_lags_1_3": False,
                   "tee_ink_at_rollout_frame_8_at_least_0.8": False, "agent_drawn": True,
                   "true_actions_beat_other_by_2db_windows": False,
                   "true_actions_halve_tee_pose_error_windows": False}  # mean 2.17 px, over half the other 4.0 px
    # enough ink by count, but most of it off the T (a speckle cloud): the ink target is not met
    t = scorecard_targets(_scores(27.0, [1.0, 2.0, 3.0], 0.9, 24.0), _scores(26.5, [1.0, 2.0, 3.0], 1.3, 24.0, 0.5))
    assert t["tee_ink_at_rollout_frame_8_at_least_0.8"] == {"value": 1.3, "kept": 1.0, "placed": 0.5, "met": False}

