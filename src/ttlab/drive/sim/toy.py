"""Tiny hand-built scenes (a straight multi-lane road with cars driving at constant speed).

Used by the simulator's own tests and as a last-resort scene when the procedural generator is absent.
`pad_pool` pads scenes into a `ScenarioPool` with the scenario package's `build_pool` (same checks and padding).
"""

from __future__ import annotations

import numpy as np
import torch

from ttlab.drive.scenarios.pool import build_pool
from ttlab.drive.scenarios.types import ROAD_TYPE_ID, Scenario, ScenarioPool


def straight_road(num_agents: int = 4, road_length: float = 200.0, lanes: int = 2, lane_width: float = 4.0,
                  speed: float = 5.0, steps: int = 91, gap: float = 15.0, goal_ahead: float = 40.0,
                  seed: int = 0, candidates: int = 0, styles: int = 0, name: str = "straight") -> Scenario:
    """Cars in `lanes` lanes along +x, spaced `gap` m, logged at constant `speed`; goal `goal_ahead` m on.

    candidates > 0 adds hidden-goal candidates (the logged goal plus laterally shifted decoys);
    styles > 0 adds per-style logs whose speeds scale with the style index."""
    rng = np.random.default_rng(seed)
    dt = 0.1
    t = np.arange(steps, dtype=np.float32) * dt
    lane_y = (np.arange(lanes) - (lanes - 1) / 2) * lane_width
    n = num_agents
    lane = np.arange(n) % lanes
    x0 = 10.0 + (np.arange(n) // lanes) * gap + rng.uniform(0, 2, n)
    y0 = lane_y[lane] + rng.uniform(-0.3, 0.3, n)
    v = speed * (1 + 0.1 * rng.uniform(-1, 1, n))

    def logs(scale: float):
        pos = np.zeros((n, steps, 2), np.float32)
        pos[..., 0] = x0[:, None] + (scale * v)[:, None] * t[None]
        pos[..., 1] = y0[:, None]
        vel = np.zeros((n, steps, 2), np.float32)
        vel[..., 0] = (scale * v)[:, None]
        return pos, np.zeros((n, steps), np.float32), vel, np.ones((n, steps), bool)

    pos, heading, vel, valid = logs(1.0)
    goal = np.stack([x0 + goal_ahead, y0], 1).astype(np.float32)
    segs, types, road = [], [], []
    xs = np.linspace(0.0, road_length, 21)
    half = lanes * lane_width / 2

    def poly(y: float, kind: str, rid: int):
        for a, b in zip(xs[:-1], xs[1:], strict=True):
            segs.append([a, y, b, y])
            types.append(ROAD_TYPE_ID[kind])
            road.append(rid)

    rid = 0
    for y in lane_y:
        poly(float(y), "lane", rid)
        rid += 1
    for y in (-half, half):
        poly(y, "road_edge", rid)
        rid += 1
    route = np.stack([np.stack([x0 + d, y0], 1) for d in np.arange(0, road_length, 5.0)], 1).astype(np.float32)
    sc = Scenario(
        name=name, pos=pos, heading=heading, vel=vel, valid=valid,
        length=np.full(n, 4.5, np.float32), width=np.full(n, 2.0, np.float32),
        agent_type=np.zeros(n, np.int8), goal=goal, expert=np.zeros(n, bool),
        seg=np.asarray(segs, np.float32), seg_type=np.asarray(types, np.int8), seg_road=np.asarray(road, np.int32),
        dt=dt, route=route,
    )
    if candidates > 0:
        offs = (np.arange(candidates) - 0) * 10.0
        sc.goal_candidates = np.stack([goal + np.array([0.0, o], np.float32) for o in offs], 1).astype(np.float32)
    if styles > 0:
        ls = [logs(0.5 + i) for i in range(styles)]
        sc.style_names = tuple(f"style{i}" for i in range(styles))
        sc.style_pos = np.stack([x[0] for x in ls])
        sc.style_heading = np.stack([x[1] for x in ls])
        sc.style_vel = np.stack([x[2] for x in ls])
        sc.style_valid = np.stack([x[3] for x in ls])
    return sc


def pad_pool(scenes: list[Scenario], device: torch.device | str = "cpu") -> ScenarioPool:
    """Pad scenes to common N agents, T steps, S segments: the scenario package's `build_pool`."""
    return build_pool(scenes, device=device)
