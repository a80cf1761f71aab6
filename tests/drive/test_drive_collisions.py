"""drive.collisions: the recorded per-event counts agree with the evaluation's own rates."""

from __future__ import annotations

import pytest

from ttlab.drive.collisions import CollisionRecorder, kind
from ttlab.drive.evaluate import EvalConfig, evaluate
from ttlab.drive.presets import selfplay
from ttlab.drive.train import train


def test_kind_reads_the_geometry_from_the_vehicles_frame():
    k = kind
    assert (k(5, 4.0), k(-5, -4.0), k(170, 3.0), k(-90, 2.0)) == ("rear", "hit_from_behind", "head_on", "crossing")


def test_recorded_events_match_the_evaluations_collision_and_goal_counts(tmp_path):
    cfg = selfplay()
    cfg.env.num_envs, cfg.rollout_steps, cfg.total_agent_steps = 4, 16, 4 * 8 * 16
    cfg.scenarios = "procedural:n=4,agents=8"
    cfg.env.box_scale = 1.0  # full boxes: the barely trained policy then collides in these few episodes
    cfg.root, cfg.run_name, cfg.show_progress = str(tmp_path), "s", False
    train(cfg)
    rec = CollisionRecorder(episodes=2)
    m = evaluate(EvalConfig(checkpoint=str(tmp_path / "drive" / "s" / "checkpoints" / "latest"), mode="self_play",
                            scenarios="procedural:n=16,agents=8,seed=5", num_envs=8, episodes=2, device="cpu",
                            out=tmp_path / "e.json"), on_step=rec)
    n = m["ego_trials"]
    assert len(rec.collisions) == pytest.approx(m["trial_0_collision_rate"] * n, abs=1e-6)
    assert len(rec.goal_ticks) == pytest.approx(m["trial_0_goal_rate"] * n, abs=1e-6)
    assert len(rec.collisions) > 0 and len(rec.goal_ticks) > 0 and all(1 <= e["tick"] <= 91 for e in rec.collisions)
