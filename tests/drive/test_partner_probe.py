"""`partner_eval.forgetful_ego`, the probe of what carries a policy's memory across trials: at the first tick of every
later trial it wipes what the policy saw (transformer: cache slots invalidated, position kept; LSTM: state zeroed) or
(transformer) only the clock (cache kept, position set to k x trial_length); earlier ticks are untouched."""

from __future__ import annotations

import pytest
import torch

from ttlab.drive.partner_eval import forgetful_ego, policy_ego, run_paired
from ttlab.drive.partners import build_population
from ttlab.drive.policy import build_policy
from ttlab.drive.presets import partner_adapt_debug
from ttlab.drive.train import env_horizon, make_env


def _setup(core: str):
    cfg = partner_adapt_debug()
    cfg.policy.core = core
    torch.manual_seed(0)
    env = make_env(cfg.env, cfg.scenarios, torch.device("cpu"), 0)
    pop = build_population(list(cfg.partners), None, env)
    policy = build_policy(cfg.policy, env.layout, env.num_actions, False, horizon=env_horizon(env)).eval()
    return env, pop, policy


def _spy(env, ego, seen: list):
    """Records, at every call, (later-trial first tick (N,), trial index (N,), the memory after the call)."""
    A = env.num_agents

    def spy(obs, new_ep, removed, active=None):
        later = ((env.trial_step == 0) & (env.ep_step > 0)).repeat_interleave(A)
        trial = env.trial.repeat_interleave(A)
        out = ego(obs, new_ep, removed, active)
        st = ego.state["s"]
        snap = tuple(x.clone() for x in st) if isinstance(st, tuple) else (st.valid.clone(), st.pos.clone())
        seen.append((later, trial, active.clone(), obs.clone(), snap))
        return out

    return spy


def test_wipe_content_forgets_what_the_transformer_saw_and_keeps_its_clock():
    env, pop, policy = _setup("transformer")
    seen: list = []
    run_paired(env, _spy(env, forgetful_ego(policy, "content")(env), seen), pop, 1)
    hits = [(later, act, valid, pos) for later, _, act, _, (valid, pos) in seen if (later & act).any()]
    assert hits, "no later trial started"
    for later, act, valid, pos in hits:
        rows = later & act
        assert (valid[rows].sum(-1) == 1).all(), "only the step just taken is in the cache"
        assert (pos[rows] > 1).all(), "the position (clock) is kept"
    before = [valid[act].sum(-1).max() for later, _, act, _, (valid, _) in seen if act.any() and not later.any()]
    assert max(before) > 1, "without a wipe the cache holds many steps"


def test_wipe_clock_keeps_what_the_transformer_saw_and_sets_the_clock_to_full_trials():
    env, pop, policy = _setup("transformer")
    L = env.cfg.trial_length
    seen: list = []
    run_paired(env, _spy(env, forgetful_ego(policy, "clock")(env), seen), pop, 1)
    hits = [(later & act, trial, valid, pos) for later, trial, act, _, (valid, pos) in seen if (later & act).any()]
    assert hits
    for rows, trial, valid, pos in hits:
        assert (pos[rows] == trial[rows] * L + 1).all(), "the step taken at position k x trial_length"
        assert (valid[rows].sum(-1) > 1).all(), "the earlier trial's steps are still in the cache"


def test_wipe_content_zeroes_the_lstm_state_at_a_later_trial():
    env, pop, policy = _setup("lstm")
    seen: list = []
    run_paired(env, _spy(env, forgetful_ego(policy, "content")(env), seen), pop, 1)
    hits = [(later, obs, h) for later, _, _, obs, (h, _) in seen if later.any()]
    assert hits
    for later, obs, h in hits:
        fresh = policy_ego(policy)
        fresh(obs, torch.ones_like(later), torch.zeros_like(later))  # one step from a zero state
        assert torch.allclose(h[later], fresh.state["s"][0][later], atol=1e-6)


def test_bad_wipes_are_refused():
    env, pop, policy = _setup("lstm")
    with pytest.raises(ValueError, match="wipe='x'"):
        forgetful_ego(policy, "x")
    with pytest.raises(ValueError, match="needs a transformer"):
        run_paired(env, forgetful_ego(policy, "clock")(env), pop, 1)
