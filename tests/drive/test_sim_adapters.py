"""Gym-style adapter, render/video writers, CLI render command, CPU vs CUDA parity (gpu marker)."""

import numpy as np
import pytest
import torch

from ttlab.drive.render import Recorder, rollout_frames, write_video
from ttlab.drive.sim.env import DriveEnv, EnvConfig
from ttlab.drive.sim.gym_adapter import DriveVectorEnv
from ttlab.drive.sim.toy import pad_pool, straight_road


def _env(**kw):
    return DriveEnv(EnvConfig(num_envs=2, max_agents=4, episode_length=6, **kw), pad_pool([straight_road(4)]))


def test_gym_adapter_numpy_roundtrip_matches_env():
    env = _env()
    vec = DriveVectorEnv(env)
    obs, info = vec.reset(seed=0)
    assert obs.shape == (8, env.obs_dim) and obs.dtype == np.float32 and info["controlled"].sum() == 8
    ref = _env()
    ref_obs = ref.reset(0)
    np.testing.assert_array_equal(obs, ref_obs.reshape(8, -1).numpy())
    seen = False
    for _ in range(7):
        a = np.random.default_rng(0).integers(0, 91, 8)
        o, r, term, trunc, info = vec.step(a)
        seen |= bool(trunc.any() or term.any())
        res = ref.step(torch.as_tensor(a).view(2, 4))
        np.testing.assert_array_equal(o, res.obs.reshape(8, -1).numpy())
        np.testing.assert_array_equal(r, res.reward.reshape(-1).numpy())
    assert seen


def test_gym_adapter_flags_align_with_the_internal_rollout():
    """info['new_episode'] / info['removed'] returned with an observation are exactly the terminals /
    removed flags the internal rollout stores beside that observation (and feeds the KV cache)."""
    from ttlab.drive.policy import MLPPolicy
    from ttlab.drive.rollout import Rollout

    def make():
        pool = pad_pool([straight_road(4, seed=i) for i in range(2)])
        return DriveEnv(EnvConfig(num_envs=3, max_agents=4, goal_behavior="trial", k_trials=2, trial_length=5,
                                  collision_behavior="remove", offroad_behavior="remove", box_scale=1.0), pool, seed=3)

    torch.manual_seed(0)
    env = make()
    policy = MLPPolicy(env.layout, env.num_actions, embed=8, hidden=16)
    T = 24
    ro = Rollout(env, policy, steps=T, gamma=0.9, gae_lambda=0.9, generator=torch.Generator().manual_seed(1))
    b = ro.collect()
    C = policy.context_len
    vec = DriveVectorEnv(make())
    obs, info = vec.reset()
    removed_seen = new_seen = 0
    for t in range(T):
        np.testing.assert_array_equal(obs, b.obs[:, C + t].numpy())
        np.testing.assert_array_equal(info["new_episode"], b.terminals[:, C + t].numpy(), err_msg=f"step {t}")
        np.testing.assert_array_equal(info["removed"], b.removed[:, C + t].numpy(), err_msg=f"step {t}")
        removed_seen += int(info["removed"].sum())
        new_seen += int(info["new_episode"].sum()) if t else 0
        obs, _, _, _, info = vec.step(b.actions[:, t].numpy())
        # the simulator's flag for the step just taken is kept, under its own name
        assert "was_removed" in info
    assert removed_seen > 0 and new_seen > 0  # the comparison covered limbo steps and an episode boundary


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
    from ttlab.drive.cli import main

    out = tmp_path / "r.gif"
    assert main(["render", "--steps", "3", "--size", "64", "--out", str(out), "--device", "cpu"]) == 0
    assert out.stat().st_size > 0
    assert main(["render", "--actions", "bogus", "--out", str(out)]) == 2


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="goal_behavior"):
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
