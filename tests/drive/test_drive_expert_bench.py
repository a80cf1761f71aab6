"""drive.replay.expert_rates: the log-tracking expert on the self-play protocol (what the scenes allow)."""

from __future__ import annotations

import torch

from ttlab.drive.presets import selfplay_yield
from ttlab.drive.replay import expert_rates


def test_expert_drives_the_held_out_scenes_and_counts_every_vehicle_once():
    r = expert_rates(selfplay_yield().env, "procedural:n=8,agents=8,seed=1000", envs=4, episodes=2,
                     scene_order="cycle")
    assert r["ego_episodes"] == 8 * 8  # 4 envs x 2 episodes play the 8 scenes once, 8 vehicles each
    assert r["goal_rate"] >= 0.9 and r["collision_plus_offroad"] <= 0.05


def test_random_actions_do_not_drive():
    """The same counting with the expert replaced by random actions: the high figure above is the expert's."""
    g = torch.Generator().manual_seed(0)
    r = expert_rates(selfplay_yield().env, "procedural:n=8,agents=8,seed=1000", envs=4, episodes=2,
                     scene_order="cycle",
                     actions=lambda env: torch.randint(0, env.num_actions, (env.num_envs, env.num_agents), generator=g))
    assert r["goal_rate"] < 0.5
