"""The self-play driving preset (issue 15, item 5) and the training time limit its benchmark uses."""

from __future__ import annotations

import dataclasses

from ttlab.drive.evaluate import EvalConfig, env_config
from ttlab.drive.presets import TRAIN_PRESETS, debug, selfplay
from ttlab.drive.train import train


def test_time_limit_stops_training_early_with_a_checkpoint(tmp_path):
    cfg = debug()
    cfg.root, cfg.run_name = str(tmp_path), "t"
    cfg.total_agent_steps = 100 * 2 * 4 * 16  # 100 updates of budget
    cfg.time_limit = 1e-6  # minutes: out of time after the first update
    seen = []
    out = train(cfg, on_log=lambda update, m: seen.append((update, m["charts/agent_steps"])))
    assert out["update"] == 1 and seen == [(1, 2 * 4 * 16)]
    assert (tmp_path / "drive" / "t" / "checkpoints" / "latest.safetensors").is_file()


def test_selfplay_trains_exactly_the_task_self_play_eval_measures():
    cfg = selfplay()
    assert TRAIN_PRESETS["selfplay"] is selfplay
    ev = env_config(EvalConfig(mode="self_play", num_envs=cfg.env.num_envs), cfg.env)
    assert ev == dataclasses.replace(cfg.env, reuse_obs=False)  # one trial, same length, behaviours and layout
    assert (cfg.env.goal_behavior, cfg.env.k_trials, cfg.env.control_mode) == ("trial", 1, "all")
    assert cfg.env.collision_behavior == cfg.env.offroad_behavior == "remove"
    assert cfg.time_limit == 60.0 and cfg.device == "cpu"


def test_selfplay_preset_runs_an_update(tmp_path):
    cfg = selfplay()
    cfg.env.num_envs, cfg.rollout_steps, cfg.total_agent_steps = 4, 16, 4 * 8 * 16
    cfg.scenarios = "procedural:n=4,agents=8"
    cfg.root, cfg.run_name, cfg.show_progress = str(tmp_path), "s", False
    out = train(cfg)
    assert out["update"] == 1 and "env/goal_rate" in out and "losses/approx_kl" in out
