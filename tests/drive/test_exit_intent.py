"""Exit intent (`EnvConfig.exit_intent`, `policy.intent`): the route of a hidden-exit trial as one sampled action.

What must hold: the joint distribution factorises (driving action x candidate) and the candidate is a free
choice only at a trial's first tick (elsewhere it adds nothing to log-prob, entropy or gradient); the env reads
the candidate at that tick only, shows it as the goal and shapes toward it; two worlds that differ only in the
true exit still give identical policy inputs until an exit is reached; the training forward equals stepping.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ttlab.drive.config import EnvConfig, PolicyConfig
from ttlab.drive.policy import IntentPolicy, build_policy
from ttlab.drive.policy.dist import entropy, log_prob, sample
from ttlab.drive.policy.intent import joint_logits, split_action
from ttlab.drive.presets import hidden_exit
from ttlab.drive.scenarios.pool import load_pool
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.geometry import to_ego
from ttlab.drive.sim.state import SimState

SPEC = "procedural:n=8,seed=5,families=t_maze,agents=1,exits=2"
D = 91


@pytest.fixture(scope="module")
def pool():
    return load_pool(SPEC)


def _cfg(**kw) -> EnvConfig:
    return dataclasses.replace(hidden_exit().env, **{"num_envs": 8, **kw})


def test_joint_logits_factorise_when_open_and_pin_candidate_0_when_closed():
    g = torch.Generator().manual_seed(0)
    raw = torch.randn(5, D + 2, generator=g, requires_grad=True)
    open_ = torch.tensor([True, False, True, False, True])
    joint = joint_logits(raw, open_, 2)  # (5, 182)
    lp = torch.log_softmax(joint, -1).view(5, 2, D)
    lp_drive = torch.log_softmax(raw[:, :D], -1)
    lp_int = torch.log_softmax(raw[:, D:], -1)
    for i in (0, 2, 4):  # open: a product of the two distributions
        assert torch.allclose(lp[i], lp_int[i].unsqueeze(-1) + lp_drive[i].unsqueeze(0), atol=1e-5)
    for i in (1, 3):  # closed: candidate 0 with probability 1; the driving part unchanged
        assert torch.allclose(lp[i, 0], lp_drive[i], atol=1e-5)
        assert torch.exp(lp[i, 1]).max() == 0
    ent = entropy(joint, False)
    assert torch.allclose(ent[1], entropy(raw[1, :D], False), atol=1e-4)
    assert ent[0] > entropy(raw[0, :D], False) + 0.1  # the open tick adds the intent's entropy
    a = torch.stack([sample(joint, False) for _ in range(200)])  # (200, 5)
    d, k = split_action(a, D)
    assert (k[:, [1, 3]] == 0).all() and (k[:, 0] == 1).any() and (k[:, 0] == 0).any()
    assert (d < D).all()
    # no gradient reaches the intent logits on a closed tick
    log_prob(joint, a[0], False)[[1, 3]].sum().backward()
    assert raw.grad[[1, 3], D:].abs().max() == 0
    assert raw.grad[[1, 3], :D].abs().max() > 0


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="--env.exit-intent needs hidden_goal"):
        EnvConfig(exit_intent=True).validate()
    with pytest.raises(ValueError, match="exit-intent needs"):
        dataclasses.replace(hidden_exit().env, action="continuous").validate()
    with pytest.raises(ValueError, match="progress_target='intent' needs exit_intent"):
        dataclasses.replace(hidden_exit(intent=False).env, progress_target="intent").validate()


def test_the_env_reads_the_pick_at_a_trials_first_tick_only_and_shows_it_as_the_goal(pool):
    env = DriveEnv(_cfg(), pool, seed=1)
    assert env.num_actions == 2 * D and env.layout.exit_intent
    col = env.layout.intent_col
    obs = env._observe(env.state)
    assert (obs[..., col] == 1).all() and (obs[..., 0:2] == 0).all()  # pick open, no goal shown yet
    E = env.num_envs
    pick = torch.arange(E).remainder(2).view(E, 1)
    straight = 3 * 13 + 6  # a fixed driving action (no steering)
    seen_open = []
    for t in range(env.cfg.trial_length + 5):
        # after the first tick of a trial, ask for the other candidate: it must be ignored
        want = pick if t == 0 else 1 - pick
        res = env.step(want * D + straight)
        obs = res.obs
        is_open = obs[..., col] == 1
        seen_open.append(bool(is_open.any()))
        assert torch.equal(is_open[:, 0], env.trial_step == 0)
        if t < env.cfg.trial_length - 1:  # still trial 0: the pick of tick 0 is held
            assert torch.equal(env.intent, pick)
            cand = env.view.candidates[env.scene]  # (E, 1, 2, 2)
            want_goal = torch.gather(cand, 2, pick.view(E, 1, 1, 1).expand(E, 1, 1, 2)).squeeze(2)
            st = env.state
            gx, gy = to_ego(want_goal[..., 0] - st.x, want_goal[..., 1] - st.y, torch.cos(st.heading),
                            torch.sin(st.heading))
            assert torch.allclose(obs[..., 0], gx / 50.0, atol=1e-5) and torch.allclose(obs[..., 1], gy / 50.0, atol=1e-5)
    assert any(seen_open), "trial 1 opened a new pick"
    # trial 1 started with the pick open and read the action's candidate then (1 - pick)
    assert (env.trial == 1).all() and torch.equal(env.intent, 1 - pick)


def test_shaping_rewards_progress_toward_the_picked_candidate(pool):
    cfg = _cfg(reward_goal=0.0, reward_offroad=0.0, reward_collision=0.0)
    env = DriveEnv(cfg, pool, seed=1)
    st = env.state
    E = env.num_envs
    cand = env.view.candidates[env.scene]  # (E, 1, 2, 2)
    d0 = torch.hypot(cand[..., 0] - st.x.unsqueeze(-1), cand[..., 1] - st.y.unsqueeze(-1))  # (E, 1, 2)
    fast = 6 * 13 + 6  # full acceleration, no steering
    res = [env.step(torch.full((E, 1), k * D + fast)) for k in (0,)][0]
    st1 = env.state
    d1 = torch.hypot(cand[..., 0] - st1.x.unsqueeze(-1), cand[..., 1] - st1.y.unsqueeze(-1))
    assert torch.allclose(res.reward, cfg.reward_progress * (d0 - d1)[..., 0], atol=1e-5)


def test_worlds_differing_only_in_the_true_exit_give_identical_inputs_for_the_same_actions(pool):
    cfg = _cfg()
    envs = []
    for flip in (False, True):
        env = DriveEnv(cfg, pool, seed=3)
        if flip:
            env.true_goal = (env.true_goal + 1) % 2
            env.start = env._start_state()
            env.state = SimState(**{k: v.clone() for k, v in vars(env.start).items()})
        envs.append(env)
    assert not torch.equal(envs[0].true_goal, envs[1].true_goal)
    g = torch.Generator().manual_seed(0)
    E = cfg.num_envs
    for _ in range(20):  # before any exit can be reached
        a = torch.randint(0, 2 * D, (E, 1), generator=g)
        o0, o1 = envs[0].step(a).obs, envs[1].step(a).obs
        assert torch.equal(o0, o1)


@pytest.mark.parametrize("core", ["transformer", "mlp"])
def test_the_training_forward_equals_stepping(pool, core):
    cfg = _cfg()
    env = DriveEnv(cfg, pool, seed=2)
    torch.manual_seed(0)
    pol = build_policy(PolicyConfig(core=core, embed=16, hidden=32, n_layers=1, n_heads=2, task_classes=2),
                       env.layout, env.num_actions, False, horizon=2 * cfg.trial_length).eval()
    assert isinstance(pol, IntentPolicy) and pol.num_actions == 2 * D
    E, T = env.num_envs, cfg.trial_length + 10  # across the trial boundary
    obs = env._observe(env.state).reshape(E, -1)
    state = pol.initial_state(E)
    term = torch.ones(E, dtype=torch.bool)
    rem = torch.zeros(E, dtype=torch.bool)
    O, TE, R, L = [], [], [], []
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(T):
            logits, _, state = pol.forward_eval(obs, state, term, rem)
            O.append(obs), TE.append(term), R.append(rem), L.append(logits)
            res = env.step(sample(logits, False, g).view(E, 1))
            obs = res.obs.reshape(E, -1)
            term = env.ep_step == 0
            rem = ((env.state.removed | env.state.stopped) & res.controlled).reshape(-1)
        full, _, _ = pol.forward(torch.stack(O, 1), torch.stack(TE, 1), torch.stack(R, 1))
    step = torch.stack(L, 1)  # (E, T, 182)
    keep = ~torch.stack(R, 1)
    assert torch.allclose(full[keep], step[keep], atol=1e-4)


def test_the_intent_floor_keeps_every_candidate_at_least_floor_over_m():
    raw = torch.zeros(3, D + 2)
    raw[:, D] = 30.0  # the core is sure of candidate 0
    open_ = torch.tensor([True, True, False])
    p = torch.softmax(joint_logits(raw, open_, 2, floor=0.2), -1).view(3, 2, D).sum(-1)  # (3, 2) intent marginals
    assert torch.allclose(p[0], torch.tensor([0.9, 0.1]), atol=1e-5)
    assert torch.allclose(p[2], torch.tensor([1.0, 0.0]))  # closed: pinned as before
    assert torch.allclose(torch.softmax(joint_logits(raw, open_, 2), -1).view(3, 2, D).sum(-1)[0],
                          torch.tensor([1.0, 0.0]), atol=1e-6)  # no floor: the plain softmax
    with pytest.raises(ValueError, match="floor"):
        IntentPolicy(torch.nn.Linear(1, 1), 2, 0, floor=1.0)
