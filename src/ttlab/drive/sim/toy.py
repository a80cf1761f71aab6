"""Tiny hand-built scenes (a straight multi-lane road with cars driving at constant speed).

Used by the simulator's own tests and as a last-resort scene when the procedural generator is absent.
`pad_pool` pads scenes into a `ScenarioPool` (the scenario package's `build_pool` does the same job
with caching; this minimal version keeps the simulator testable on its own).
"""

from __future__ import annotations

import numpy as np
import torch

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
    """Pad scenes to common N agents, T steps, S segments; optional fields only when every scene has them."""
    if not scenes:
        raise ValueError("pad_pool: no scenes")
    P = len(scenes)
    N = max(s.num_agents for s in scenes)
    T = max(s.num_steps for s in scenes)
    S = max(s.num_segments for s in scenes)

    def pad(get, shape, dtype, fill=0):
        out = np.full((P, *shape), fill, dtype=dtype)
        for i, s in enumerate(scenes):
            a = np.asarray(get(s))
            out[(i, *tuple(slice(0, d) for d in a.shape))] = a
        return torch.as_tensor(out, device=device)

    pool = ScenarioPool(
        names=[s.name for s in scenes],
        pos=pad(lambda s: s.pos, (N, T, 2), np.float32), heading=pad(lambda s: s.heading, (N, T), np.float32),
        vel=pad(lambda s: s.vel, (N, T, 2), np.float32), valid=pad(lambda s: s.valid, (N, T), bool, False),
        exists=pad(lambda s: np.ones(s.num_agents, bool), (N,), bool, False),
        length=pad(lambda s: s.length, (N,), np.float32), width=pad(lambda s: s.width, (N,), np.float32),
        agent_type=pad(lambda s: s.agent_type.astype(np.int64), (N,), np.int64),
        goal=pad(lambda s: s.goal, (N, 2), np.float32), expert=pad(lambda s: s.expert, (N,), bool, False),
        seg=pad(lambda s: s.seg, (S, 4), np.float32), seg_type=pad(lambda s: s.seg_type.astype(np.int64), (S,), np.int64),
        num_segments=torch.as_tensor([s.num_segments for s in scenes], device=device),
        dt=scenes[0].dt,
    )
    if all(s.route is not None for s in scenes):
        R = max(s.route.shape[1] for s in scenes)
        # pad routes by repeating each one's end point
        rt = np.zeros((P, N, R, 2), np.float32)
        for i, s in enumerate(scenes):
            r = s.route
            rt[i, : r.shape[0], : r.shape[1]] = r
            rt[i, : r.shape[0], r.shape[1]:] = r[:, -1:]
        pool.route = torch.as_tensor(rt, device=device)
    if all(s.goal_candidates is not None for s in scenes):
        M = max(s.goal_candidates.shape[1] for s in scenes)
        pool.goal_candidates = pad(lambda s: s.goal_candidates, (N, M, 2), np.float32)
    if all(s.style_pos is not None for s in scenes):
        Y = max(s.style_pos.shape[0] for s in scenes)
        pool.style_pos = pad(lambda s: s.style_pos, (Y, N, T, 2), np.float32)
        pool.style_heading = pad(lambda s: s.style_heading, (Y, N, T), np.float32)
        pool.style_vel = pad(lambda s: s.style_vel, (Y, N, T, 2), np.float32)
        pool.style_valid = pad(lambda s: s.style_valid, (Y, N, T), bool, False)
    return pool
