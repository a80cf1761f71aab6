"""Behaviour-cloning warm start (`drive.bc`): the expert drives, the returns are right, cloning learns from it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ttlab.drive.bc import clone, collect, discounted_returns, tracking_actions
from ttlab.drive.config import PolicyConfig
from ttlab.drive.policy import build_policy
from ttlab.drive.presets import hidden_exit, selfplay
from ttlab.drive.sim.state import POLICY
from ttlab.drive.train import _warm_start, make_env


def _env(num_envs: int = 8):
    cfg = dataclasses.replace(selfplay().env, num_envs=num_envs)
    return make_env(cfg, "procedural:n=8,seed=1000,agents=8", torch.device("cpu"), 0)


def test_the_log_tracking_expert_reaches_goals_without_leaving_the_road():
    env = _env()
    env.reset()
    env.metrics()
    for _ in range(3 * 91):
        env.step(tracking_actions(env))
    m = {k: float(v) for k, v in env.metrics().items()}
    assert m["episodes"] >= 40, m
    assert m["goal_rate"] >= 0.9 and m["offroad_rate"] <= 0.02 and m["collision_rate"] <= 0.05, m


def test_tracking_needs_classic_discrete_actions():
    cfg = dataclasses.replace(selfplay().env, num_envs=2, dynamics="jerk")
    env = make_env(cfg, "procedural:n=2,seed=3,agents=4", torch.device("cpu"), 0)
    with pytest.raises(ValueError, match="classic"):
        tracking_actions(env)


def test_discounted_returns_stop_at_episode_ends():
    r = torch.tensor([1.0, 1.0, 1.0, 1.0])
    end = torch.tensor([False, True, False, False])
    g = discounted_returns(r, end, 0.5)
    assert torch.allclose(g, torch.tensor([1.5, 1.0, 1.5, 1.0]))


def test_cloning_fits_the_expert_and_refuses_a_policy_with_memory():
    env = _env(4)
    data = collect(env, 60, 0.99)
    assert data.obs.shape[0] == data.actions.shape[0] == data.returns.shape[0] > 500
    assert data.metrics["episodes"] >= 0
    torch.manual_seed(0)
    pol = build_policy(PolicyConfig(core="mlp", embed=32, hidden=64), env.layout, env.num_actions)
    with torch.no_grad():
        before = (pol.forward_eval(data.obs, None)[0].argmax(-1) == data.actions).float().mean()
    out = clone(pol, data, epochs=8, batch_size=512, lr=3e-3)
    assert out["bc_accuracy"] > max(0.3, float(before) + 0.2), (out, float(before))
    tr = build_policy(PolicyConfig(core="transformer", embed=16, hidden=32, n_layers=1, n_heads=2), env.layout,
                      env.num_actions, horizon=91)
    with pytest.raises(ValueError, match="memoryless"):
        clone(tr, data)


def test_the_trainer_warm_start_logs_the_expert_and_the_fit():
    cfg = selfplay()
    cfg.env = dataclasses.replace(cfg.env, num_envs=4)
    cfg.bc_ticks, cfg.bc_epochs = 30, 1
    env = _env(4)
    pol = build_policy(cfg.policy, env.layout, env.num_actions)
    out = _warm_start(cfg, env, pol)
    assert {"bc/bc_loss", "bc/bc_accuracy", "bc/expert_goal_rate", "bc/samples"} <= set(out)
    hx = hidden_exit()
    hx_env = make_env(dataclasses.replace(hx.env, num_envs=2), "procedural:n=2,families=t_maze,agents=1,exits=2",
                      torch.device("cpu"), 0)
    with pytest.raises(ValueError, match="exit intent"):
        tracking_actions(hx_env)


def test_each_sample_pairs_the_observation_the_action_was_chosen_on():
    """The env reuses one observation buffer: a sample must hold the observation before its step, not after."""

    env = _env(2)
    obs0 = env.reset().clone()
    st = env.state
    keep = (st.role == POLICY) & ~st.removed & ~st.stopped
    act0 = tracking_actions(env)
    data = collect(env, 2, 0.99)
    n0 = int(keep.sum())
    assert torch.equal(data.obs[:n0], obs0[keep]) and torch.equal(data.actions[:n0], act0[keep])
    assert not torch.equal(data.obs[n0:2 * n0], data.obs[:n0])  # the second tick's rows are the next observations
