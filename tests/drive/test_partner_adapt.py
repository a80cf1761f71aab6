"""The partner-adaptation family (the blind all-way-stop crossing, `scenarios.crossing` + `drive.partners`):
the hidden variable is the other driver's type, drawn per episode and kept for its trials.

- trial resets are bit-identical (the ego's observations of trial 1 equal trial 0's under the same actions);
- two worlds that differ only in the partner's type give identical ego inputs until the partner's behaviour first
  differs, and different inputs later (the type is learnable by interacting, and only so);
- a scripted ego with memory gains >= +0.3 in trial-1 score and scores ~1 in trial 1; no memoryless scripted ego
  (open-loop or reactive, any start time, two accelerations) gains anything, and the best of them stays >= 0.3
  below the memory ego's trial 1 (the best ego behaviour depends on the type);
- the memory ego's rule transfers to the held-out partner variants.
"""

from __future__ import annotations

import pytest
import torch

from ttlab.drive.partner_eval import partner_summary, run_paired
from ttlab.drive.partner_scripted import MemoryEgo, ReactiveEgo, TimedEgo
from ttlab.drive.partners import HELD_OUT_PARTNERS, SCRIPTED, TRAIN_PARTNERS, build_population
from ttlab.drive.presets import partner_adapt
from ttlab.drive.scenarios.crossing import CrossingSpec, crossing_scene
from ttlab.drive.scenarios.pool import load_pool
from ttlab.drive.sim.env import DriveEnv

SPEC = "crossing:n=16,seed=3"


def _env(num_envs: int = 16, pool=None, **kw) -> DriveEnv:
    cfg = partner_adapt().env
    cfg.num_envs = num_envs
    for k, v in kw.items():
        setattr(cfg, k, v)
    return DriveEnv(cfg, pool if pool is not None else load_pool(SPEC), seed=0)


def _run(ego_fn, partners, num_envs=16, episodes=1, pool=None, weights=None):
    env = _env(num_envs, pool)
    pop = build_population(list(partners), weights, env)
    return partner_summary(*run_paired(env, ego_fn(env), pop, episodes), pop.names)


def test_crossing_scenes_and_bad_sources():
    sc = crossing_scene(5)
    assert sc.num_agents == 2 and (sc.vel[:, 0] == 0).all(), "ego and partner start at rest"
    assert sc.metadata["partner_side"] in ("left", "right")
    assert CrossingSpec.parse("crossing:n=3,seed=2") == CrossingSpec(n=3, seed=2)
    with pytest.raises(ValueError, match="bad item"):
        CrossingSpec.parse("crossing:m=3")
    with pytest.raises(ValueError, match="not an integer"):
        CrossingSpec.parse("crossing:n=x")
    pool = load_pool("crossing:n=4,seed=1")
    assert pool.size == 4 and pool.pos.shape[1] == 2


def test_both_drivers_are_controlled_and_out_of_sight_at_the_start():
    env = _env(8)
    assert env.controlled.all(), "slot 0 the ego, slot 1 the partner: both policy-driven"
    obs = env.reset()
    L = env.layout
    partner_rows = obs[:, :, L.partner_offset:L.road_offset]
    assert (partner_rows == 0).all(), "blind corners: nobody sees the other at the stop lines"


def test_trial_resets_are_bit_identical_for_the_ego():
    for partner in TRAIN_PARTNERS:
        E = 8
        env = _env(E)
        pop = build_population([partner], None, env)
        ego = TimedEgo(env, 0, 6)
        obs = env.reset().reshape(2 * E, -1)
        seen: dict[tuple[int, int, int], torch.Tensor] = {}  # (env, trial, tick) -> the ego's observation
        new_ep = torch.ones(2 * E, dtype=torch.bool)
        removed = torch.zeros(2 * E, dtype=torch.bool)
        compared = 0
        for _ in range(2 * env.cfg.trial_length):
            for e in range(E):
                if int(env.episode[e]) == 0:
                    key = (e, int(env.trial[e]), int(env.trial_step[e]))
                    seen[key] = obs.view(E, 2, -1)[e, 0].clone()
                    if key[1] == 1 and (e, 0, key[2]) in seen:
                        assert torch.equal(seen[key], seen[(e, 0, key[2])]), (partner, key)
                        compared += 1
            act = pop.act(obs, new_ep, removed, ego(obs, new_ep, removed))
            obs = env.step(act.view(E, 2)).obs.reshape(2 * E, -1)
            new_ep = (env.ep_step == 0).repeat_interleave(2)
            removed = (env.state.removed | env.state.stopped).reshape(-1)
        assert compared >= 10 * E, compared


def _inputs(env, obs):
    """What the learner feeds the ego's policy: its observation, removed flag, new-episode flag (slot 0)."""
    removed = (env.state.removed | env.state.stopped)[:, 0]
    return obs.view(env.num_envs, 2, -1)[:, 0].clone(), removed.clone(), (env.ep_step == 0).clone()


@pytest.mark.parametrize("go", [0, 8])
def test_worlds_differing_only_in_the_partner_type_look_identical_until_the_partner_behaves_differently(go):
    E = 16
    worlds = []
    for partner in TRAIN_PARTNERS:
        env = _env(E)
        worlds.append((env, build_population([partner], None, env), TimedEgo(env, go, 6)))
    obs = [w[0].reset().reshape(2 * E, -1) for w in worlds]
    flags = [(torch.ones(2 * E, dtype=torch.bool), torch.zeros(2 * E, dtype=torch.bool)) for _ in worlds]
    first_partner_diff = torch.full((E,), -1)
    first_input_diff = torch.full((E,), -1)
    T = worlds[0][0].cfg.trial_length
    for t in range(T):  # the first trial
        (ea, _, _), (eb, _, _) = worlds
        pa = torch.stack([ea.state.x[:, 1], ea.state.y[:, 1], ea.state.speed[:, 1]], -1)
        pb = torch.stack([eb.state.x[:, 1], eb.state.y[:, 1], eb.state.speed[:, 1]], -1)
        pdiff = (pa != pb).any(-1)
        idiff = torch.zeros(E, dtype=torch.bool)
        for x, y in zip(_inputs(ea, obs[0]), _inputs(eb, obs[1]), strict=True):
            idiff |= (x != y).reshape(E, -1).any(1)
        first_partner_diff = torch.where((first_partner_diff < 0) & pdiff, t, first_partner_diff)
        first_input_diff = torch.where((first_input_diff < 0) & idiff, t, first_input_diff)
        for i, (env, pop, ego) in enumerate(worlds):
            new_ep, removed = flags[i]
            act = pop.act(obs[i], new_ep, removed, ego(obs[i], new_ep, removed))
            obs[i] = env.step(act.view(E, 2)).obs.reshape(2 * E, -1)
            flags[i] = ((env.ep_step == 0).repeat_interleave(2), (env.state.removed | env.state.stopped).reshape(-1))
    assert (first_partner_diff >= 0).all() and (first_input_diff >= 0).all(), "the types differ and the ego notices"
    # identical inputs while the partners drive alike, and (blind corners) for a while after
    assert (first_input_diff > first_partner_diff).all(), (first_partner_diff, first_input_diff)


def _memory_vs_memoryless(gos, lons, num_envs):
    pool = load_pool(f"crossing:n={num_envs},seed=2")
    mem = _run(lambda e: MemoryEgo(e, 12), TRAIN_PARTNERS, num_envs=num_envs, episodes=2, pool=pool)
    assert mem["ada_delta_trial_1_minus_0"] >= 0.3, mem
    assert mem["trial_1_score"] >= 0.95, mem
    assert mem["per_partner"]["never_yield"]["trial_0_collision_rate"] >= 0.95  # the probe meets the never-yielder
    best = 0.0
    for go in gos:
        for lon in lons:
            for cls in (TimedEgo, ReactiveEgo):
                out = _run(lambda e, c=cls, g=go, n=lon: c(e, g, n), TRAIN_PARTNERS, num_envs=num_envs, pool=pool)
                assert abs(out["ada_delta_trial_1_minus_0"]) < 1e-9, (cls.__name__, go, lon, out)
                best = max(best, out["trial_1_score"])
                # the best ego behaviour depends on the type: no start time suits both partners
                pp = out["per_partner"]
                assert min(pp["never_yield"]["trial_1_score"], pp["yield"]["trial_1_score"]) <= 0.1, (go, lon, pp)
    assert best <= mem["trial_1_score"] - 0.3, (best, mem["trial_1_score"])


def test_memory_pays_and_no_memoryless_ego_gains():
    _memory_vs_memoryless(gos=(0, 8, 16, 24), lons=(6,), num_envs=16)


@pytest.mark.slow
def test_memory_pays_and_no_memoryless_ego_gains_on_a_fine_grid():
    _memory_vs_memoryless(gos=range(0, 36, 2), lons=(4, 5, 6), num_envs=32)


def test_the_memory_rule_transfers_to_the_held_out_partners():
    assert set(HELD_OUT_PARTNERS) <= set(SCRIPTED) and not set(HELD_OUT_PARTNERS) & set(TRAIN_PARTNERS)
    mem = _run(lambda e: MemoryEgo(e, 12), HELD_OUT_PARTNERS, num_envs=32, episodes=2)
    assert mem["ada_delta_trial_1_minus_0"] >= 0.3 and mem["trial_1_score"] >= 0.95, mem
    now = _run(lambda e: TimedEgo(e, 0, 6), HELD_OUT_PARTNERS, num_envs=32, episodes=2)
    assert now["per_partner"]["never_yield_late"]["trial_1_score"] <= 0.05
    assert now["per_partner"]["yield_soon"]["trial_1_score"] >= 0.95
    assert mem["per_partner"]["yield_soon"]["trial_1_time_to_goal"] < mem["per_partner"]["never_yield_late"][
        "trial_1_time_to_goal"], "going at once is faster than letting the partner through"


def test_bad_partner_names_and_weights_are_refused():
    env = _env(2)
    with pytest.raises(ValueError, match="not a scripted type"):
        build_population(["yeld"], None, env)
    with pytest.raises(ValueError, match="weights"):
        build_population(["yield", "never_yield"], [1.0], env)
    with pytest.raises(ValueError, match="weights"):
        build_population(["yield"], [-1.0], env)
