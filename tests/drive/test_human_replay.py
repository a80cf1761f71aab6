"""Human-replay evaluation in trial mode: the ego drives, every other logged agent replays
its log rewound at every trial; logged agents enter when their valid window starts and leave when it ends;
trial resets stay bit-identical; `ttlab drive eval --mode human_replay` reports paired trial metrics."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from ttlab.common.data import shared_data_file
from ttlab.drive.cli import main as drive_main
from ttlab.drive.config import EnvConfig
from ttlab.drive.evaluate import ALL_LOGGED, EvalConfig, env_config
from ttlab.drive.scenarios import build_pool, load_scenario
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.state import EXPERT, POLICY
from ttlab.drive.sim.toy import straight_road
from ttlab.drive.trials import TRIAL_KEYS

CARLA = shared_data_file("carla_town02_womd.json", required=False)  # None when the sample is absent
needs_carla = pytest.mark.skipif(CARLA is None, reason="shared CARLA sample not present")
COAST = 45
WINDOW = (5, 15)  # the late agent's log is valid on steps [5, 15) only


def _toy():
    sc = straight_road(3, lanes=2, gap=15.0, goal_ahead=300.0, seed=0)
    return sc, 2  # ego = agent 0; agent 2 (15 m on, the other lane) becomes the late one


def _carla():
    sc = load_scenario(CARLA)
    return sc, 21  # ego = agent 0 (the first controllable vehicle); agent 21 is 30 m from it


def _late_env(scene_fn, k: int = 3, trial_length: int = 20, window: tuple[int, int] = WINDOW):
    sc, late = scene_fn()
    sc.valid[late] = False
    sc.valid[late, window[0]:window[1]] = True
    cfg = EnvConfig(num_envs=1, max_agents=64, goal_behavior="trial", k_trials=k, trial_length=trial_length,
                    control_mode="ego_only", collision_behavior="ignore", offroad_behavior="ignore", partner_slots=8,
                    road_slots=32)
    return DriveEnv(cfg, build_pool([sc]), seed=0), late


def _partners_seen(env, obs: torch.Tensor) -> int:
    """Occupied partner slots in the ego's observation."""
    _, par, _ = env.layout.split(obs)
    return int((par[0, 0].abs().sum(-1) > 0).sum())


@pytest.mark.parametrize("scene_fn", [_toy, pytest.param(_carla, marks=needs_carla)], ids=["toy", "carla"])
def test_a_late_logged_agent_enters_and_leaves_with_its_log_in_every_trial_and_trials_stay_bit_identical(scene_fn):
    K, L = 3, 20
    env, late = _late_env(scene_fn, K, L)
    obs = env.reset()
    assert int(env.state.role[0, 0]) == POLICY and int(env.controlled.sum()) == 1  # ego only
    assert int(env.state.role[0, late]) == EXPERT  # not valid at the start step, yet in the scene
    trials: list[list[tuple[torch.Tensor, bool, int]]] = [[]]
    for _ in range(K * L):
        trials[-1].append((obs.clone(), bool(env.visible()[0, late]), _partners_seen(env, obs)))
        res = env.step(torch.full((1, env.num_agents), COAST))
        obs = res.obs
        if bool(res.trial_ended[0, 0]) and len(trials) < K:
            trials.append([])
    assert [len(t) for t in trials] == [L] * K  # every trial ran its L ticks (nothing ended one early)
    first = trials[0]
    on = [v for _, v, _ in first]
    assert on == [WINDOW[0] <= s < WINDOW[1] for s in range(L)]  # on the map exactly while its log is valid
    never, _ = _late_env(scene_fn, K, L, window=(0, 0))  # the same scene with that agent never valid
    o = never.reset()
    seen_without = []
    for _ in range(L):
        seen_without.append(_partners_seen(never, o))
        o = never.step(torch.full((1, never.num_agents), COAST)).obs
    extra = [n - m for (_, _, n), m in zip(first, seen_without, strict=True)]
    assert extra == [int(x) for x in on]  # the ego observes it exactly while it is on the map
    for k in range(1, K):  # the log clock and every entity are rewound: the same steps, bit for bit
        for s in range(L):
            assert torch.equal(trials[k][s][0], first[s][0]), (k, s)
            assert trials[k][s][1:] == first[s][1:]


def test_reset_hides_a_logged_agent_not_yet_valid_as_trial_restarts_do():
    env, late = _late_env(_toy, k=2, trial_length=3)
    o0 = env.reset().clone()
    assert not bool(env.visible()[0, late])
    for _ in range(3):
        res = env.step(torch.full((1, env.num_agents), COAST))
    assert bool(res.trial_ended[0, 0]) and torch.equal(res.obs, o0)


def test_human_replay_is_trial_mode_with_the_ego_among_every_logged_agent():
    trained = EnvConfig(goal_behavior="trial", k_trials=3, trial_length=40, max_agents=8, partner_style=True,
                        partner_slots=8, road_slots=64)
    env = env_config(EvalConfig(mode="human_replay", num_envs=4), trained)
    assert (env.goal_behavior, env.k_trials, env.trial_length, env.control_mode) == ("trial", 3, 40, "ego_only")
    assert env.max_agents == ALL_LOGGED and not env.partner_style and not env.hidden_goal
    with pytest.warns(UserWarning, match="k_trials=3"):
        assert env_config(EvalConfig(mode="human_replay", k_trials=5), trained).k_trials == 5
    assert env_config(EvalConfig(mode="human_replay", max_agents=16), trained).max_agents == 16
    assert env_config(EvalConfig(mode="self_play"), trained).k_trials == 1
    hidden = dataclasses.replace(trained, hidden_goal=True)
    with pytest.raises(ValueError, match="trained with hidden_goal=True"):
        env_config(EvalConfig(mode="human_replay"), hidden)
    assert env_config(EvalConfig(mode="human_replay", hidden_goal=True), hidden).hidden_goal


@needs_carla
def test_cli_human_replay_on_the_carla_sample_reports_paired_trials_and_a_video(tmp_path):
    assert drive_main(["train", "--preset", "debug", "--root", str(tmp_path), "--run-name", "h"]) == 0
    stem = tmp_path / "drive" / "h" / "checkpoints" / "latest"
    out, video = tmp_path / "hr.json", tmp_path / "hr.gif"
    with pytest.warns(UserWarning, match="k_trials=2"):
        assert drive_main(["eval", "--checkpoint", str(stem), "--mode", "human_replay", "--scenarios", str(CARLA),
                           "--k-trials", "3", "--num-envs", "2", "--episodes", "2", "--device", "cpu",
                           "--out", str(out), "--video", str(video)]) == 0
    m = json.loads(out.read_text())
    assert m["mode"] == "human_replay" and m["control_mode"] == "ego_only" and m["k_trials"] == 3
    assert m["agents_per_env"] == 32  # every logged agent of the scene, not the checkpoint's 4 slots
    assert m["episodes"] == 2 * 2 and m["ego_trials"] == 2 * 2 * 3  # one ego per env, 3 trials per episode
    for k in (1, 2):
        assert m[f"ada_delta_trial_{k}_minus_0_pairs"] == 4
        assert np.isfinite(m[f"ada_delta_trial_{k}_minus_0"])
        assert m[f"ada_delta_trial_{k}_minus_0"] == pytest.approx(m[f"trial_{k}_score"] - m["trial_0_score"])
    assert {"trial_0_score", "trial_2_goal_rate", "trial_1_collision_rate"} <= set(m)
    # every per-trial key is a whole metric name (no "trial_0_exit_" or "trial_0_wrong"), for every trial k
    for k in range(3):
        names = {key[len(f"trial_{k}_"):] for key in m if key.startswith(f"trial_{k}_")}
        assert names == set(TRIAL_KEYS), names ^ set(TRIAL_KEYS)
    assert video.is_file() and m["video"] == str(video)
