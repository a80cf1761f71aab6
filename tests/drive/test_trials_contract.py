"""The trial contract (DESIGN.md "drive: the trial contract"), one test per clause."""

import numpy as np
import pytest
import torch

from ttlab.drive.config import EnvConfig
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.state import EXPERT, POLICY
from ttlab.drive.sim.toy import pad_pool, straight_road

COAST = 45


def coast(env):
    return torch.full((env.num_envs, env.num_agents), COAST, dtype=torch.long)


def _reach_scene():
    """Car 0 reaches its goal 4 m ahead in a few ticks; car 1 (20 m behind, same lane) never does."""
    sc = straight_road(2, lanes=1, gap=20.0, speed=5.0, goal_ahead=500.0, seed=0)
    sc.pos[:, :, 1] = 0.0
    sc.goal[:, 1] = 0.0
    sc.goal[0] = sc.pos[0, 0] + np.array([4.0, 0.0], np.float32)
    return sc


def test_trial_ends_on_timeout_when_nobody_reaches():
    sc = straight_road(3, lanes=1, gap=10.0, goal_ahead=500.0)
    env = DriveEnv(EnvConfig(num_envs=2, max_agents=3, goal_behavior="trial", k_trials=3, trial_length=10), pad_pool([sc]))
    env.reset()
    ended = [env.step(coast(env)).trial_ended.all(1).tolist() for _ in range(25)]
    assert [i for i, e in enumerate(ended) if any(e)] == [9, 19]
    assert all(e == [True, True] for e in (ended[9], ended[19]))
    m = env.metrics()
    assert float(m["n_trials_completed"]) == 4 and float(m["trial_timeout_rate"]) == 1.0


def test_reaching_ego_is_removed_and_absent_from_others_observations():
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=2, goal_behavior="trial", k_trials=2, trial_length=50),
                   pad_pool([_reach_scene()]))
    obs = env.reset()
    L = env.layout
    assert L.split(obs)[1][0, 1].abs().sum() > 0  # car 1 sees car 0
    for _ in range(10):
        r = env.step(coast(env))
        if float(r.reward[0, 0]) > 0:
            break
    assert float(r.reward[0, 0]) == 1.0 and not bool(r.removed[0, 0])  # reward on the reach step
    assert not bool(r.truncations.any()) and not bool(r.trial_ended.any())
    assert L.split(r.obs)[1][0, 1].abs().sum() == 0  # gone from car 1's partners at once
    # put car 1 exactly on car 0's spot: no collision with a removed car
    env.state.x[0, 1] = env.state.x[0, 0]
    r = env.step(coast(env))
    assert bool(r.removed[0, 0]) and not bool(r.removed[0, 1])
    assert float(r.reward[0, 0]) == 0.0 and float(r.reward[0, 1]) == 0.0
    assert not bool(env.state.collided[0, 1])


def test_truncations_fire_only_at_trial_end_never_on_individual_reach():
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=2, goal_behavior="trial", k_trials=2, trial_length=30),
                   pad_pool([_reach_scene()]))
    env.reset()
    rows = [env.step(coast(env)) for _ in range(60)]
    for r in rows:
        assert torch.equal(r.truncations, r.trial_ended)
        if r.truncations.any():
            assert r.truncations.all()  # every ego of the env
    reach_steps = [i for i, r in enumerate(rows) if float(r.reward[0, 0]) > 0]
    assert len(reach_steps) == 2 and not any(rows[i].truncations.any() for i in reach_steps)
    assert [i for i, r in enumerate(rows) if r.truncations.any()] == [29, 59]


def test_terminals_after_exactly_k_trials():
    sc = straight_road(2, lanes=1, gap=10.0, goal_ahead=500.0)
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=2, goal_behavior="trial", k_trials=3, trial_length=5),
                   pad_pool([sc]))
    env.reset()
    rows = [env.step(coast(env)) for _ in range(31)]
    assert [i for i, r in enumerate(rows) if r.terminals.any()] == [14, 29]
    assert all(rows[i].terminals.all() for i in (14, 29))
    assert int(env.episode[0]) == 2 and int(env.trial[0]) == 0  # new episode started at once


@pytest.mark.parametrize("k", [2, 4])
def test_trial_start_observations_bit_identical_to_trial_0(k):
    scenes = [straight_road(6, lanes=2, seed=i, goal_ahead=8.0, styles=2) for i in range(3)]
    for sc in scenes:
        sc.expert[4] = True  # a log-replay agent
        sc.pos[5] = sc.pos[5, :1]  # a static (parked) agent
    cfg = EnvConfig(num_envs=4, max_agents=6, goal_behavior="trial", k_trials=k, trial_length=12,
                    reward_conditioning=True, partner_style=True, collision_behavior="remove",
                    offroad_behavior="stop", dynamics="jerk", init_steps=2)
    env = DriveEnv(cfg, pad_pool(scenes), seed=3)
    start = env.reset().clone()  # trial-0 start obs per env
    g = torch.Generator().manual_seed(0)
    checked = 0
    for _ in range(12 * k * 2):
        r = env.step(torch.randint(0, 91, (4, 6), generator=g))
        trial_end = r.trial_ended.any(1)
        ep_end = r.terminals.any(1)
        for e in torch.nonzero(trial_end & ~ep_end).flatten().tolist():
            assert (r.obs[e] - start[e]).abs().max().item() == 0.0
            checked += 1
        for e in torch.nonzero(ep_end).flatten().tolist():
            start[e] = r.obs[e]
    assert checked >= 4 * (k - 1)


def test_log_replay_restarts_at_each_trial():
    sc = straight_road(3, lanes=1, gap=12.0, goal_ahead=500.0, seed=1)
    pool = pad_pool([sc])
    cfg = EnvConfig(num_envs=1, max_agents=3, goal_behavior="trial", k_trials=3, trial_length=7,
                    control_mode="ego_only", init_steps=4)
    env = DriveEnv(cfg, pool)
    env.reset()
    assert env.state.role[0].tolist() == [POLICY, EXPERT, EXPERT]
    for trial in range(2):
        for k in range(1, 8):
            env.step(coast(env))
            t = 4 + (k if k < 7 else 0)  # at the trial end the clock rewinds to init_steps
            assert torch.equal(env.state.x[0, 1:], pool.pos[0, 1:, t, 0]), (trial, k)
        assert int(env.trial[0]) == trial + 1


@pytest.mark.parametrize("k", [4, 9])
def test_metric_keys_for_any_k(k):
    sc = straight_road(2, lanes=1, gap=10.0, goal_ahead=500.0)
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=2, goal_behavior="trial", k_trials=k, trial_length=2),
                   pad_pool([sc]))
    env.reset()
    for _ in range(2 * k):
        env.step(coast(env))
    m = env.metrics()
    for i in range(k):
        for name in ("score", "goal_rate", "collision_rate", "offroad_rate", "length"):
            assert f"trial_{i}_{name}" in m
            if i > 0:
                assert f"ada_delta_trial_{i}_minus_0_{name}" in m
        if i > 0:
            assert f"ada_delta_trial_{i}_minus_0" in m
    assert f"trial_{k}_score" not in m
    assert float(m["n_trials_completed"]) == k and float(m[f"trial_{k - 1}_length"]) == 2.0
    assert float(m["episodes"]) == 2.0  # two egos finished one episode
    assert all(v.device == env.device for v in m.values())


def _non_trial_rollout(k_trials):
    pool = pad_pool([straight_road(4, seed=i, goal_ahead=6.0) for i in range(2)])
    env = DriveEnv(EnvConfig(num_envs=2, max_agents=4, goal_behavior="respawn", k_trials=k_trials, trial_length=3,
                             episode_length=9), pool, seed=5)
    g = torch.Generator().manual_seed(0)
    out = [env.reset()]
    for _ in range(20):
        r = env.step(torch.randint(0, 91, (2, 4), generator=g))
        assert not r.trial_ended.any()
        out += [r.obs, r.reward, r.truncations.float(), r.terminals.float()]
    return out, env.metrics()


def test_non_trial_behaviours_unchanged_by_trial_settings():
    a, ma = _non_trial_rollout(2)
    b, mb = _non_trial_rollout(7)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not any(k.startswith("trial_") for k in ma) and ma.keys() == mb.keys()
    assert float(ma["episodes"]) == 16  # 2 envs x 4 egos x 2 episodes of 9 ticks in 20 steps


def test_hidden_goal_reward_only_at_true_goal_wrong_one_removes():
    sc = straight_road(2, lanes=1, gap=30.0, speed=5.0, goal_ahead=4.0, candidates=2)
    sc.pos[:, :, 1] = 0.0
    sc.goal[:, 1] = 0.0
    sc.goal[1, 0] += 16.0  # car 1 reaches later, so car 0's removal shows on the following steps
    sc.goal_candidates = np.stack([sc.goal, sc.goal + np.array([0.0, 10.0], np.float32)], 1)  # straight / left
    cfg = EnvConfig(num_envs=8, max_agents=2, goal_behavior="trial", k_trials=3, trial_length=60, hidden_goal=True,
                    exit_feedback=False)  # the silent structure; with feedback see tests/drive/test_hidden_exit.py
    env = DriveEnv(cfg, pad_pool([sc]), seed=0)
    obs = env.reset()
    ego, _, _ = env.layout.split(obs)
    assert env.layout.ego_dim == 9 + 4 and (ego[..., 0:2] == 0).all()  # goal hidden, 2 candidates shown
    true0 = env.true_goal.clone()
    assert (true0 == 0).any() and (true0 == 1).any()
    rewarded = torch.zeros_like(true0, dtype=torch.bool)
    removed_wrong = torch.zeros_like(rewarded)
    for _ in range(40):  # coasting straight reaches candidate 0 only
        tg = env.true_goal.clone()
        r = env.step(coast(env))
        assert not (r.reward > 0)[tg == 1].any()  # never a reward at the wrong candidate
        rewarded |= r.reward > 0
        removed_wrong |= r.removed & (tg == 1)
        kept = (r.trial_ended & ~r.terminals).any(1)
        assert torch.equal(env.true_goal[kept], tg[kept])  # true goal fixed across the episode's trials
    assert rewarded.any() and removed_wrong.any()


def test_partner_style_drawn_per_episode_and_kept_across_trials():
    pool = pad_pool([straight_road(3, lanes=1, gap=12.0, goal_ahead=500.0, styles=3)])
    cfg = EnvConfig(num_envs=16, max_agents=3, goal_behavior="trial", k_trials=2, trial_length=4,
                    partner_style=True, control_mode="ego_only")
    env = DriveEnv(cfg, pool, seed=0)
    env.reset()
    styles = [env.style.clone()]
    for _ in range(4 * 2 * 3):
        r = env.step(coast(env))
        if r.trial_ended.any() and not r.terminals.any():
            assert torch.equal(env.style, styles[-1])
        if r.terminals.any():
            styles.append(env.style.clone())
    assert len(styles[0].unique()) > 1 and not torch.equal(styles[0], styles[1])
    # replayed partners follow the drawn style's log
    env.reset()
    env.step(coast(env))
    want = pool.style_pos[0, env.style, 1:, 1, 0]  # (E, 2)
    assert torch.equal(env.state.x[:, 1:], want)
