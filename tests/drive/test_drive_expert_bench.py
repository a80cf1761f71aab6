"""benchmarks/drive_expert.py: the log-tracking expert on the self-play protocol (what the scenes allow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _module():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "drive_expert.py"
    spec = importlib.util.spec_from_file_location("drive_expert", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_expert_drives_the_held_out_scenes_and_counts_every_vehicle_once():
    mod = _module()
    r = mod.expert_rates("selfplay_yield", "procedural:n=8,agents=8,seed=1000", envs=4, episodes=2,
                         scene_order="cycle")
    assert r["ego_episodes"] == 8 * 8  # 4 envs x 2 episodes play the 8 scenes once, 8 vehicles each
    assert r["goal_rate"] >= 0.9 and r["collision_plus_offroad"] <= 0.05


def test_random_actions_do_not_drive():
    """The same counting with the expert replaced by random actions: the high figure above is the expert's."""
    import torch

    mod = _module()
    g = torch.Generator().manual_seed(0)
    mod.tracking_actions = lambda env: torch.randint(0, env.num_actions, (env.num_envs, env.num_agents), generator=g)
    r = mod.expert_rates("selfplay_yield", "procedural:n=8,agents=8,seed=1000", envs=4, episodes=2,
                         scene_order="cycle")
    assert r["goal_rate"] < 0.5
