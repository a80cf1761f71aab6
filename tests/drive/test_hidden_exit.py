"""The hidden-exit family: memory is necessary and sufficient, protected as an information structure.

- two worlds that differ only in the true exit give bit-identical policy inputs (observations, the
  removed and new-episode flags the learner derives) until the first exit is reached, and different
  inputs from then on; the report-step token that carries the outcome is one the memory keeps;
- a scripted driver reaches the exits within a trial; with memory (try an exit in trial 0, use the
  exit flag) it gains >= +0.4 goal rate in trial 1 at M = 2, K = 2, and K = 3 (M = 3) works too; the
  best memoryless scripted choosers gain nothing;
- shaping that would reveal the true exit is refused.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from ttlab.drive.adapt_eval import exit_flag
from ttlab.drive.config import EnvConfig
from ttlab.drive.policy import MLPPolicy, ObsLayout, TransformerPolicy
from ttlab.drive.presets import hidden_exit
from ttlab.drive.scenarios.pool import ProceduralSpec, load_pool
from ttlab.drive.scenarios.procedural import exit_routes, generate
from ttlab.drive.scripted import (
    ExitDriver,
    FixedChooser,
    MemoryChooser,
    pool_exit_routes,
    run_scripted,
)
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.state import SimState

SPEC2 = "procedural:n=24,seed=5,families=hidden_exit,agents=1,exits=2"


def _cfg(**kw) -> EnvConfig:
    """The benchmark's env config (presets.hidden_exit), 24 envs unless overridden."""
    return dataclasses.replace(hidden_exit().env, **{"num_envs": 24, **kw})


@pytest.fixture(scope="module")
def pool2():
    return load_pool(SPEC2), pool_exit_routes(SPEC2)


def test_spec_exits_sets_the_number_of_candidates_and_bad_m_is_refused():
    spec = ProceduralSpec.parse("procedural:n=2,families=hidden_exit,agents=1,exits=2")
    assert spec.exits == 2 and spec.scenes()[0].goal_candidates.shape[1:] == (2, 2)
    sc = generate("hidden_exit", 3, 1, num_candidates=3)
    assert sc.goal_candidates.shape[1:] == (3, 2) and sc.metadata["road_family"] == "intersection"
    with pytest.raises(ValueError, match="4 exits per approach"):
        generate("hidden_exit", 0, 1, num_candidates=4)
    tm = generate("t_maze", 1, 3, num_candidates=2)  # the stem of a T: one vehicle, exits left and right
    assert tm.num_agents == 1 and tm.metadata["road_family"] == "t_junction"
    with pytest.raises(ValueError, match="exactly 2 exits"):
        generate("t_maze", 0, 1, num_candidates=3)


def test_t_maze_shown_lists_one_exit_twice_on_either_side_and_keeps_the_t_maze_scene():


    sides = set()
    for seed in range(12):
        tm, sh = generate("t_maze", seed, 1), generate("t_maze_shown", seed, 1)
        assert np.array_equal(tm.pos, sh.pos) and np.array_equal(tm.seg, sh.seg)  # the same T-maze
        c = sh.goal_candidates[0]  # (2, 2): one exit of the T-maze, listed twice
        assert np.array_equal(c[0], c[1])
        j = int(np.argmin(np.linalg.norm(tm.goal_candidates[0] - c[0], axis=-1)))
        assert np.array_equal(tm.goal_candidates[0, j], c[0])
        sides.add(j)
        r = exit_routes("t_maze_shown", seed, 1)
        assert np.array_equal(r[0, 0], r[0, 1])
    assert sides == {0, 1}, "the shown exit is either one"


def test_the_benchmark_t_maze_memory_pays_and_memoryless_does_not():
    spec = "procedural:n=16,seed=11,families=t_maze,agents=1,exits=2"
    pool, routes = load_pool(spec), pool_exit_routes(spec)
    cfg = _cfg(num_envs=32)
    mem = run_scripted(DriveEnv(cfg, pool, seed=0), routes, MemoryChooser(), episodes=4)
    # trial 1 always right; the gap is the share of wrong first tries (1/2 expected, 0.39 in this sample)
    assert mem["trial_0_exit_rate"] >= 0.95 and mem["trial_1_goal_rate"] >= 0.95, mem
    assert mem["ada_delta_trial_1_minus_0"] >= 0.3, mem
    fixed = run_scripted(DriveEnv(cfg, pool, seed=0), routes, FixedChooser(1), episodes=4)
    assert abs(fixed["ada_delta_trial_1_minus_0"]) <= 0.05, fixed
    # after a wrong first try the memory driver switches (goal), the fixed one repeats (no goal)
    assert mem["trial_1_goal_rate_after_wrong_0"] >= 0.95 and mem["trial_1_goal_rate_after_goal_0"] >= 0.95, mem
    assert fixed["trial_1_goal_rate_after_wrong_0"] == 0.0 and fixed["trial_1_goal_rate_after_goal_0"] >= 0.9, fixed


def test_exits_are_tens_of_metres_of_path_away(pool2):
    _, routes = pool2  # (P, 1, M, R, 2) from each start to past each exit
    pool = pool2[0]
    start = pool.pos[:, 0, 0]  # (P, 2)
    cand = pool.goal_candidates[:, 0]  # (P, M, 2)
    seg = (routes[:, 0, :, 1:] - routes[:, 0, :, :-1]).norm(dim=-1).cumsum(-1)  # (P, M, R-1)
    near = (routes[:, 0, :, 1:] - cand.unsqueeze(2)).norm(dim=-1).argmin(-1)  # (P, M) route index of the exit
    path_len = seg.gather(2, near.unsqueeze(-1)).squeeze(-1)
    assert (path_len > 12).all() and (path_len < 45).all(), path_len
    assert ((cand - start.unsqueeze(1)).norm(dim=-1) > 8).all()
    # the exits of one vehicle are far apart: reaching one never touches the other
    assert ((cand[:, 0] - cand[:, 1]).norm(dim=-1) > 10).all()


def test_a_scripted_driver_reaches_the_exits_within_a_trial(pool2):
    pool, routes = pool2
    for k in (0, 1):
        out = run_scripted(DriveEnv(_cfg(), pool, seed=0), routes, FixedChooser(k), episodes=1)
        assert out["trial_0_exit_rate"] >= 0.95 and out["trial_1_exit_rate"] >= 0.95, out
        assert out["trial_0_goal_rate"] + out["trial_0_wrong_exit_rate"] == pytest.approx(out["trial_0_exit_rate"])


def _world(cfg, pool, flip: bool) -> tuple[DriveEnv, torch.Tensor]:
    """An env at its first episode; flip: the same draws except every ego's true exit is the other one."""
    env = DriveEnv(cfg, pool, seed=3)
    if flip:
        env.true_goal = (env.true_goal + 1) % pool.goal_candidates.shape[2]
        env.start = env._start_state()
        env.state = SimState(**{k: v.clone() for k, v in vars(env.start).items()})
    return env, env._observe(env.state).clone()


def _inputs(env, obs):
    """What the learner feeds the policy for this observation: obs, removed, new-episode (as the rollout)."""
    removed = (env.state.removed | env.state.stopped) & env.controlled
    return obs.clone(), removed.clone(), (env.ep_step == 0).clone()


def test_worlds_differing_only_in_the_true_exit_look_identical_until_an_exit_is_reached(pool2):
    pool, routes = pool2
    cfg = _cfg(num_envs=24)
    (a, obs_a), (b, obs_b) = _world(cfg, pool, False), _world(cfg, pool, True)
    assert not torch.equal(a.true_goal, b.true_goal)
    drv_a, drv_b = ExitDriver(a, routes), ExitDriver(b, routes)
    E = cfg.num_envs
    first_hit = torch.full((E,), -1)
    first_diff = torch.full((E,), -1)
    choice = torch.zeros(E, 1, dtype=torch.long)
    for t in range(cfg.k_trials * cfg.trial_length):
        ia, ib = _inputs(a, obs_a), _inputs(b, obs_b)
        differ = torch.zeros(E, dtype=torch.bool)
        for x, y in zip(ia, ib, strict=True):
            differ |= (x != y).reshape(E, -1).any(1)
        first_diff = torch.where((first_diff < 0) & differ, t, first_diff)
        act_a, act_b = drv_a.act(choice), drv_b.act(choice)  # the same chooser: actions follow the inputs
        obs_a, obs_b = a.step(act_a).obs, b.step(act_b).obs
        hit = (exit_flag(a, obs_a) != 0).any(1) | (exit_flag(b, obs_b) != 0).any(1)  # (E,)
        first_hit = torch.where((first_hit < 0) & hit & (a.episode == 0), t + 1, first_hit)
    assert (first_hit > 0).all(), "every env reached an exit in its first episode"
    # identical inputs up to the observation that reports the first exit, different from it on
    assert torch.equal(first_diff, first_hit), (first_diff, first_hit)


def test_the_outcome_lands_in_a_token_the_memory_keeps(pool2):
    """The report step is not removed (so attention reads it) and the ego is removed right after it. A
    transformer with random weights therefore acts differently in trial 1 of the two worlds; an MLP does not."""
    pool, routes = pool2
    cfg = _cfg(num_envs=24)
    worlds = [_world(cfg, pool, f) for f in (False, True)]
    layout = ObsLayout.of(worlds[0][0].layout)
    torch.manual_seed(0)
    tf = TransformerPolicy(layout, 91, embed=16, d_model=32, n_layers=1, n_heads=2,
                           horizon=cfg.k_trials * cfg.trial_length).eval()
    mlp = MLPPolicy(layout, 91, embed=16, hidden=32).eval()
    E = cfg.num_envs
    logits = torch.zeros(2, 2, E, 91)  # world, (transformer, mlp), env, actions: at each env's trial-1 start
    for w, (env, obs) in enumerate(worlds):
        drv = ExitDriver(env, routes)
        state = tf.initial_state(E)
        seen_report = torch.zeros(E, dtype=torch.bool)
        seen_t1 = torch.zeros(E, dtype=torch.bool)
        for _ in range(cfg.k_trials * cfg.trial_length):
            o, removed, term = _inputs(env, obs)
            flag = exit_flag(env, o)[:, 0]
            assert not removed[flag != 0].any(), "a report-step token is never removed"
            seen_report |= (flag != 0) & (env.episode == 0)
            with torch.no_grad():
                lt, _, state = tf.forward_eval(o[:, 0], state, term, removed[:, 0])
                lm = mlp.forward_eval(o[:, 0])[0]
            t1 = (env.trial == 1) & (env.trial_step == 0) & (env.episode == 0)  # (E,) trial 1 starts here
            logits[w, 0, t1], logits[w, 1, t1] = lt[t1], lm[t1]
            seen_t1 |= t1
            was_report = flag != 0
            obs = env.step(drv.act(torch.zeros(E, 1, dtype=torch.long))).obs
            done = was_report & (env.trial_step > 0) & (env.state.exit_flag[:, 0] == 0)
            assert env.state.removed[done, 0].all(), "removed right after its last report step"
        assert seen_report.all() and seen_t1.all()
    assert torch.equal(logits[0, 1], logits[1, 1]), "a memoryless policy sees the same trial-1 start in both worlds"
    assert ((logits[0, 0] - logits[1, 0]).abs().amax(-1) > 1e-6).all(), "the cache carries the outcome into trial 1"


def test_memory_pays_at_m2_k2_and_memoryless_choosers_gain_nothing(pool2):
    pool, routes = pool2
    cfg = _cfg(num_envs=48)  # 192 ego-episodes: the gap's standard error is about 0.035
    mem = run_scripted(DriveEnv(cfg, pool, seed=0), routes, MemoryChooser(), episodes=4)
    assert mem["ada_delta_trial_1_minus_0"] >= 0.4, mem
    assert mem["trial_1_goal_rate"] >= 0.95 and mem["trial_1_wrong_exit_rate"] <= 0.05, mem
    best = None
    for ch in (FixedChooser(0), FixedChooser(1)):
        out = run_scripted(DriveEnv(cfg, pool, seed=0), routes, ch, episodes=4)
        assert abs(out["ada_delta_trial_1_minus_0"]) <= 0.05, out
        best = out if best is None or out["trial_0_goal_rate"] > best["trial_0_goal_rate"] else best
    assert mem["trial_1_goal_rate"] - best["trial_1_goal_rate"] >= 0.3


def test_k3_with_three_exits_memory_finds_the_exit_by_the_third_trial():
    spec = "procedural:n=16,seed=7,families=hidden_exit,agents=1,exits=3"
    pool, routes = load_pool(spec), pool_exit_routes(spec)
    cfg = _cfg(num_envs=16, k_trials=3)
    mem = run_scripted(DriveEnv(cfg, pool, seed=0), routes, MemoryChooser(), episodes=3)
    assert mem["ada_delta_trial_1_minus_0"] >= 0.2 and mem["ada_delta_trial_2_minus_0"] >= 0.5, mem
    assert mem["trial_2_goal_rate"] >= 0.9, mem
    fixed = run_scripted(DriveEnv(cfg, pool, seed=0), routes, FixedChooser(0), episodes=3)
    assert abs(fixed["ada_delta_trial_2_minus_0"]) <= 0.05, fixed


def test_shaping_that_reveals_the_exit_is_refused_and_nearest_exit_is_allowed():
    with pytest.raises(ValueError, match="reveal"):
        EnvConfig(hidden_goal=True, reward_progress=0.1).validate()
    with pytest.raises(ValueError, match="nearest_exit"):
        EnvConfig(hidden_goal=False, reward_progress=0.1, progress_target="nearest_exit").validate()
    EnvConfig(hidden_goal=True, reward_progress=0.1, progress_target="nearest_exit").validate()


def test_without_exit_feedback_the_worlds_never_differ(pool2):
    """The old structure (a wrong exit removes the ego silently): no input ever tells the worlds apart."""
    pool, routes = pool2
    cfg = _cfg(num_envs=8, exit_feedback=False)
    (a, obs_a), (b, obs_b) = _world(cfg, pool, False), _world(cfg, pool, True)
    assert not a.layout.exit_feedback
    drv_a, drv_b = ExitDriver(a, routes), ExitDriver(b, routes)
    choice = torch.zeros(8, 1, dtype=torch.long)
    for _ in range(cfg.k_trials * cfg.trial_length):
        for x, y in zip(_inputs(a, obs_a), _inputs(b, obs_b), strict=True):
            assert torch.equal(x, y)
        obs_a, obs_b = a.step(drv_a.act(choice)).obs, b.step(drv_b.act(choice)).obs
