"""Render/video writers, CLI render command, CPU vs CUDA parity (gpu marker). The gymnasium vector env is
tested in test_vector_env.py."""

import numpy as np
import pytest
import torch

from ttlab.drive.cli import main
from ttlab.drive.config import EnvConfig
from ttlab.drive.render import Recorder, rollout_frames, write_video
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.toy import pad_pool, straight_road


def _env(**kw):
    return DriveEnv(EnvConfig(num_envs=2, max_agents=4, episode_length=6, **kw), pad_pool([straight_road(4)]))


def test_render_trial_overlay_and_writers(tmp_path):
    env = _env(goal_behavior="trial", k_trials=2, trial_length=3)
    frames = rollout_frames(env, 5, "random", size=96)
    assert len(frames) == 6 and frames[0].shape == (96, 96, 3) and frames[0].dtype == np.uint8
    assert frames[0].std() > 0
    gif = write_video(frames, tmp_path / "a.gif")
    mp4 = write_video(frames, tmp_path / "a.mp4")
    assert gif.stat().st_size > 0 and mp4.stat().st_size > 0
    with pytest.raises(ValueError, match="unsupported"):
        write_video(frames, tmp_path / "a.avi")
    rec = Recorder(env, 1, size=64)
    assert rec.capture().shape == (64, 64, 3)


def test_cli_render_writes_video(tmp_path):
    out = tmp_path / "r.gif"
    assert main(["render", "--steps", "3", "--size", "64", "--out", str(out), "--device", "cpu"]) == 0
    assert out.stat().st_size > 0
    assert main(["render", "--actions", "bogus", "--out", str(out)]) == 2


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="--env.goal-behavior"):
        _env(goal_behavior="teleport")
    with pytest.raises(ValueError, match="hidden_goal"):
        _env(hidden_goal=True)


def _rollout(device):
    pool = pad_pool([straight_road(6, seed=i) for i in range(3)])
    env = DriveEnv(EnvConfig(num_envs=4, max_agents=6, goal_behavior="trial", k_trials=2, trial_length=7,
                             reward_conditioning=True, collision_behavior="remove"), pool, device=device, seed=2)
    g = torch.Generator().manual_seed(0)
    out = [env.reset().cpu()]
    for _ in range(20):
        r = env.step(torch.randint(0, 91, (4, 6), generator=g).to(device))
        out += [r.obs.cpu(), r.reward.cpu(), r.truncations.cpu().float(), r.removed.cpu().float()]
    return out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cpu_and_cuda_give_the_same_step_results():
    a, b = _rollout("cpu"), _rollout("cuda")
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, atol=1e-4, rtol=1e-4)
