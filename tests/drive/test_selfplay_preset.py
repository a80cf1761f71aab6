"""The self-play driving preset and the training time limit its benchmark uses."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from ttlab.common.duration import parse_duration
from ttlab.drive.adapt import apply_overrides
from ttlab.drive.evaluate import ALL_LOGGED, EvalConfig, env_config, evaluate
from ttlab.drive.ppo import schedule_progress
from ttlab.drive.presets import TRAIN_PRESETS, debug, selfplay, selfplay_yield
from ttlab.drive.scenarios import load_scenarios
from ttlab.drive.sim.reward import step_reward
from ttlab.drive.stats import SceneCounts, choose_checkpoint, cluster_ratio_stderr
from ttlab.drive.train import collision_penalty, make_env, train

ROOT = Path(__file__).resolve().parents[2]


def _tiny(cfg, tmp_path, name: str) -> None:
    """Shrink a self-play preset to one update of 4 envs x 16 steps on 4 scenes, run under tmp_path/drive/name."""
    cfg.env.num_envs, cfg.rollout_steps, cfg.total_agent_steps = 4, 16, 4 * 8 * 16
    cfg.scenarios = "procedural:n=4,agents=8"
    cfg.root, cfg.run_name, cfg.show_progress = str(tmp_path), name, False


def test_time_limit_stops_training_early_with_a_checkpoint(tmp_path):
    cfg = debug()
    cfg.root, cfg.run_name = str(tmp_path), "t"
    cfg.total_agent_steps = 100 * 2 * 4 * 16  # 100 updates of budget
    cfg.time_limit = "0.001s"  # out of time after the first update
    seen = []
    out = train(cfg, on_log=lambda update, m: seen.append((update, m["charts/agent_steps"])))
    assert out["update"] == 1 and seen == [(1, 2 * 4 * 16)]
    assert (tmp_path / "drive" / "t" / "checkpoints" / "latest.safetensors").is_file()


def test_selfplay_trains_exactly_the_task_self_play_eval_measures():
    cfg = selfplay()
    assert TRAIN_PRESETS["selfplay"] is selfplay
    cfg.env.validate()
    ev = env_config(EvalConfig(mode="self_play", num_envs=cfg.env.num_envs), cfg.env)
    # one trial, same length, behaviours and layout; every vehicle of a scene drives
    assert ev == dataclasses.replace(cfg.env, reuse_obs=False, max_agents=ALL_LOGGED)
    assert (cfg.env.goal_behavior, cfg.env.k_trials, cfg.env.control_mode) == ("trial", 1, "all")
    assert cfg.env.collision_behavior == cfg.env.offroad_behavior == "remove"
    assert max(int(sc.valid[:, 0].sum()) for sc in load_scenarios(cfg.scenarios.replace("n=256", "n=16"))) \
        <= cfg.env.max_agents <= cfg.env.partner_slots + 1  # no vehicle of a training scene is left out or unseen


def test_selfplay_budgets_fit_the_cpu_hour_they_claim():
    """Both self-play presets are CPU runs that stop within the hour their figures claim (`selfplay_yield` leaves
    time inside it to generate its scenes); a budget that does not parse fails here, not an hour into a run."""
    for preset in (selfplay, selfplay_yield):
        cfg = preset()
        assert cfg.device == "cpu"
        assert 0 < parse_duration(cfg.time_limit) <= 3600, preset.__name__
    assert parse_duration(selfplay_yield().time_limit) < parse_duration(selfplay().time_limit)


def test_selfplay_preset_runs_an_update(tmp_path):
    cfg = selfplay()
    _tiny(cfg, tmp_path, "s")
    out = train(cfg)
    assert out["update"] == 1 and "env/goal_rate" in out and "losses/approx_kl" in out


def test_schedule_progress_follows_the_wall_clock_when_a_time_limit_ends_the_run_first():
    assert schedule_progress(0, 100) == 0.0 and schedule_progress(99, 100) == 1.0
    assert schedule_progress(10, 1000, elapsed_s=30.0, time_limit_s=60.0) == 0.5  # time is further along
    assert schedule_progress(500, 1000, elapsed_s=6.0, time_limit_s=60.0) == 500 / 999  # steps are
    assert schedule_progress(10, 1000, elapsed_s=600.0, time_limit_s=60.0) == 1.0  # clipped


def test_lr_end_anneals_the_optimizer_learning_rate_linearly(tmp_path):
    cfg = debug()
    cfg.root, cfg.run_name, cfg.log_every = str(tmp_path), "lr", 1
    cfg.total_agent_steps = 5 * 2 * 4 * 16  # 5 updates
    cfg.ppo.lr, cfg.ppo.lr_end = 1e-3, 0.0
    lrs = []
    train(cfg, on_log=lambda update, m: lrs.append(m["charts/learning_rate"]))
    assert lrs == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0], abs=1e-12)  # the lr each update used
    cfg2 = debug()
    cfg2.root, cfg2.run_name, cfg2.log_every = str(tmp_path), "const", 1
    cfg2.total_agent_steps = 3 * 2 * 4 * 16
    const = []
    train(cfg2, on_log=lambda update, m: const.append(m["charts/learning_rate"]))
    assert const == [cfg2.ppo.lr] * 3


def test_collision_penalty_schedule_holds_then_ramps_and_reaches_the_env_rewards(tmp_path):
    cfg = debug()
    cfg.env.reward_collision, cfg.reward_collision_end, cfg.reward_schedule_start = -0.5, -2.0, 0.5
    assert [collision_penalty(cfg, f) for f in (0.0, 0.5, 0.75, 1.0)] == pytest.approx([-0.5, -0.5, -1.25, -2.0])
    cfg.root, cfg.run_name, cfg.log_every = str(tmp_path), "pen", 1
    cfg.total_agent_steps = 5 * 2 * 4 * 16  # 5 updates: progress 0, .25, .5, .75, 1
    seen = []
    train(cfg, on_log=lambda update, m: seen.append(m["charts/reward_collision"]))
    assert seen == pytest.approx([-0.5, -0.5, -0.5, -1.25, -2.0])  # the penalty each update's rollout ended on
    with pytest.raises(ValueError, match=r"--reward-schedule-start 1.0: must be in \[0, 1\)"):
        train(dataclasses.replace(cfg, reward_schedule_start=1.0))


def test_set_reward_weights_changes_the_reward_of_a_collision():
    cfg = debug()
    env = make_env(cfg.env, cfg.scenarios, torch.device("cpu"), 0)
    coll = torch.ones(env.num_envs, env.num_agents, dtype=torch.bool)
    none = torch.zeros_like(coll)
    assert torch.all(step_reward(env.weights, none, coll, none) == cfg.env.reward_collision)
    env.set_reward_weights(cfg.env.reward_goal, -3.0, cfg.env.reward_offroad)
    assert torch.all(step_reward(env.weights, none, coll, none) == -3.0)
    env.reset(1)  # a new episode keeps the override
    assert torch.all(step_reward(env.weights, none, coll, none) == -3.0)


def test_keep_every_keeps_numbered_checkpoints_and_the_selection_rule(tmp_path):
    cfg = debug()
    cfg.root, cfg.run_name, cfg.keep_every = str(tmp_path), "keep", 2
    cfg.total_agent_steps = 5 * 2 * 4 * 16  # 5 updates
    train(cfg)
    ck = tmp_path / "drive" / "keep" / "checkpoints"
    assert sorted(p.name for p in ck.glob("update_*.safetensors")) == ["update_000002.safetensors",
                                                                       "update_000004.safetensors"]
    rows = [{"checkpoint": "a", "goal_rate": 0.97, "collision_plus_offroad": 0.03, "score": 0.96},
            {"checkpoint": "b", "goal_rate": 0.94, "collision_plus_offroad": 0.01, "score": 0.97},
            {"checkpoint": "c", "goal_rate": 0.96, "collision_plus_offroad": 0.02, "score": 0.95}]
    assert choose_checkpoint(rows)["checkpoint"] == "c"  # b has fewer events but misses the goal-rate floor
    assert choose_checkpoint([dict(r, goal_rate=0.5) for r in rows])["checkpoint"] == "b"  # none qualifies: best score


def test_selfplay_yield_is_the_configuration_its_first_seed_was_measured_with():
    """Seed 0 of the README's self-play figure was trained as `--preset selfplay` with the overrides its result file
    records; the preset must be that configuration, so the figure's other seeds (trained with the preset) and seed
    0 measure the same thing. The comparison is with the result file, not with numbers in this test."""
    res = json.loads((ROOT / "benchmarks" / "results" / "drive_selfplay" / "yield_s0.json").read_text())
    assert res["preset"] == "selfplay" and res["overrides"]
    measured = apply_overrides(selfplay(), dict(kv.split("=", 1) for kv in res["overrides"]))
    # the benchmark sets the time limit from its own --minutes flag, so only the preset's own limit may differ
    assert dataclasses.replace(selfplay_yield(), time_limit="") == dataclasses.replace(measured, time_limit="")
    assert TRAIN_PRESETS["selfplay_yield"] is selfplay_yield
    for seed in (1, 2, 3):
        assert json.loads((ROOT / "benchmarks" / "results" / "drive_selfplay" / f"yield_s{seed}.json")
                          .read_text())["preset"] == "selfplay_yield"


def test_selfplay_yield_preset_runs_an_update(tmp_path):
    cfg = selfplay_yield()
    _tiny(cfg, tmp_path, "y")
    out = train(cfg)
    assert out["update"] == 1 and "env/goal_rate" in out


def test_heldout_scene_counts_equal_the_evaluation(tmp_path):
    """`SceneCounts` (the held-out benchmark's hook) counts per scene exactly what the evaluation counts in total."""

    cfg = selfplay()
    _tiny(cfg, tmp_path, "h")
    train(cfg)
    rec = SceneCounts(episodes=2, num_scenes=6)
    m = evaluate(EvalConfig(checkpoint=str(tmp_path / "drive" / "h" / "checkpoints" / "latest"), mode="self_play",
                            scenarios="procedural:n=6,agents=8,seed=1000", num_envs=3, episodes=2, device="cpu",
                            out=tmp_path / "e.json"), on_step=rec)
    s = rec.summary(first=3)
    assert s["ego_episodes"] == m["ego_trials"] == 3 * 2 * 8
    assert s["goal_rate"] == pytest.approx(m["trial_0_goal_rate"], abs=1e-5)
    assert s["collision_plus_offroad"] == pytest.approx(m["trial_0_collision_rate"] + m["trial_0_offroad_rate"], abs=1e-5)
    assert s["collision_plus_offroad"] > 0  # an untrained policy crashes: the counts see real events
    # per scene: every draw of a scene starts all its vehicles, so a scene's egos are a multiple of its size
    sizes = torch.tensor([int(sc.valid[:, 0].sum()) for sc in load_scenarios("procedural:n=6,agents=8,seed=1000")])
    assert bool(((rec.egos % sizes) == 0).all()) and int(rec.egos.sum()) == s["ego_episodes"]
    for events in (rec.goals, rec.collisions, rec.offroads):  # no scene has more events than vehicles started
        assert bool((events <= rec.egos).all())
    assert s["first_3"]["scenes"] == int((rec.egos[:3] > 0).sum())
    # scene_order=cycle: 3 envs x 2 episodes play the pool of 6 exactly once, so every scene starts its 8 vehicles
    cyc = SceneCounts(episodes=2, num_scenes=6)
    m2 = evaluate(EvalConfig(checkpoint=str(tmp_path / "drive" / "h" / "checkpoints" / "latest"), mode="self_play",
                             scenarios="procedural:n=6,agents=8,seed=1000", num_envs=3, episodes=2, device="cpu",
                             scene_order="cycle", out=tmp_path / "c.json"), on_step=cyc)
    assert cyc.egos.tolist() == [8] * 6 and m2["ego_trials"] == 48 and m2["scene_order"] == "cycle"
    assert cyc.summary(first=3)["collision_plus_offroad"] == pytest.approx(
        m2["trial_0_collision_rate"] + m2["trial_0_offroad_rate"], abs=1e-5)
    with pytest.warns(UserWarning, match="do not cover the 6 scenes"):  # 3 envs x 1 episode: half the pool
        evaluate(EvalConfig(checkpoint=str(tmp_path / "drive" / "h" / "checkpoints" / "latest"), mode="self_play",
                            scenarios="procedural:n=6,agents=8,seed=1000", num_envs=3, episodes=1, device="cpu",
                            scene_order="cycle", out=tmp_path / "c1.json"))


def test_cluster_ratio_stderr():
    """The scene-clustered standard error: equal clusters give std(rates) / sqrt(S); unequal ones weight by size;
    one cluster has none."""
    bad, egos = torch.tensor([0, 2, 1, 5]), torch.tensor([8, 8, 8, 8])
    rates = bad.double() / 8
    assert cluster_ratio_stderr(bad, egos) == pytest.approx(float(rates.std() / 2), rel=1e-12)
    # unplayed scenes are left out; a cluster twice as large counts twice
    bad2, egos2 = torch.tensor([0, 4, 1, 0]), torch.tensor([8, 16, 8, 0])
    r = 5 / 32
    want = (3 / 2 * ((0 - r * 8) ** 2 + (4 - r * 16) ** 2 + (1 - r * 8) ** 2)) ** 0.5 / 32
    assert cluster_ratio_stderr(bad2, egos2) == pytest.approx(want, rel=1e-12)
    assert cluster_ratio_stderr(torch.tensor([1]), torch.tensor([8])) != cluster_ratio_stderr(
        torch.tensor([1]), torch.tensor([8]))  # nan: no spread from one scene
