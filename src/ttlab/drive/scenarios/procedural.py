"""Procedural scenes (the embedded, offline default): roads, spawns, routes, goals and driven logs.

`generate(family, seed, num_agents)` is deterministic per (family, seed, num_agents, flags). Families:
straight, intersection, t_junction, merge, roundabout, and the adaptation families:
hidden_goal (intersection or roundabout with `goal_candidates` = the exits reachable from each
vehicle's approach; candidate 0 is the exit its route and log take), hidden_exit (the same with
M = `num_candidates` exits on a T-junction or intersection that has M exits per approach, every vehicle
spawned HIDDEN_EXIT_SPAWN metres before the junction and every exit HIDDEN_EXIT_AHEAD metres past it, so
each exit is 20-40 m of path away), t_maze (hidden_exit on the stem of a T-junction: one vehicle, exits
left and right, the driving version of the T-maze memory task), t_maze_shown (the same T-maze with one
exit, left or right, listed as both candidates: the exit is shown in the observation, so a policy learns to
drive to a shown exit on either side; a training companion of t_maze, never a test of memory) and
partner_style (any road family with `style_*` logs driven by cautious and aggressive drivers from the
same start). `exit_routes` gives each vehicle's path to each of its candidate exits (scripted drivers).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ttlab.drive.scenarios.driver import STYLES, DriverParams, drive
from ttlab.drive.scenarios.polyline import interp_at, rdp, resample, rotate, to_segments
from ttlab.drive.scenarios.roads import FAMILIES, RoadMap, build_road
from ttlab.drive.scenarios.types import ROAD_TYPE_ID, Scenario

ADAPTATION_FAMILIES: tuple[str, ...] = ("hidden_goal", "hidden_exit", "t_maze", "t_maze_shown", "partner_style")
T_MAZES = ("t_maze", "t_maze_shown")
ALL_FAMILIES: tuple[str, ...] = FAMILIES + ADAPTATION_FAMILIES
STYLE_NAMES: tuple[str, ...] = ("cautious", "aggressive")
JUNCTIONS = ("intersection", "t_junction", "roundabout")
SPEED = {"straight": (9.0, 14.0), "merge": (8.0, 13.0), "intersection": (6.0, 10.0), "t_junction": (6.0, 10.0),
         "roundabout": (6.0, 9.0)}
SPAWN_CLEARANCE = 8.0  # m between spawned vehicle centres (boxes of <= 5.2 m can never overlap)
HIDDEN_EXIT_SPAWN = (2.0, 6.0)  # hidden_exit: a vehicle starts this many metres before the junction
HIDDEN_EXIT_AHEAD = 5.0  # hidden_exit: the exit points are this many metres past the junction
EXITS_PER_APPROACH = {"t_junction": 2, "intersection": 3}  # hidden_exit roads (roundabout paths are too long)


def _segments(road: RoadMap) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All polylines of the map cut into segments <= 4 m: seg (S, 4), seg_type (S,), seg_road (S,)."""
    segs, types, ids = [], [], []
    rid = 0
    for kind, polys in (("lane", road.lanes), ("road_line", road.lines), ("road_edge", road.edges)):
        for poly in polys:
            s = to_segments(rdp(poly, 0.05), max_len=4.0)
            segs.append(s)
            types.append(np.full(len(s), ROAD_TYPE_ID[kind], np.int8))
            ids.append(np.full(len(s), rid, np.int32))
            rid += 1
    return np.concatenate(segs).astype(np.float32), np.concatenate(types), np.concatenate(ids)


def _spawn(road: RoadMap, rng: np.random.Generator, num_agents: int, tries: int = 40, near: bool = False,
           approach: int | None = None):
    """Pick (path index, start arc) per vehicle with centres >= SPAWN_CLEARANCE apart.

    near: start HIDDEN_EXIT_SPAWN metres before the junction (paths with `junction_s`); approach: only
    paths entering from that approach."""
    chosen: list[tuple[int, float]] = []
    centres: list[np.ndarray] = []
    allowed = [i for i, p in enumerate(road.paths) if approach is None or p.approach == approach]
    for _ in range(num_agents):
        for _ in range(tries):
            k = allowed[int(rng.integers(len(allowed)))]
            p = road.paths[k]
            if near:
                lo, hi = HIDDEN_EXIT_SPAWN
                s0 = float(p.junction_s[0] - rng.uniform(lo, hi))
            else:
                s0 = float(rng.uniform(p.spawn_start, p.spawn_end))
            c = interp_at(p.points, s0)
            if all(np.linalg.norm(c - q) >= SPAWN_CLEARANCE for q in centres):
                chosen.append((k, s0))
                centres.append(c)
                break
    return chosen


def _exit_paths(road: RoadMap, k: int, m: int) -> list:
    """The paths sharing path k's approach, path k first, then counter-clockwise; the first m."""
    own = road.paths[k]
    sib = [p for p in road.paths if p.approach == own.approach and p is not own]
    paths = [own, *sib]
    if len(paths) < m:
        raise ValueError(f"hidden goal needs {m} exits per approach; the {road.family} has {len(paths)}")
    return paths[:m]


def _candidates(road: RoadMap, k: int, m: int) -> np.ndarray:
    """Exit points of the paths sharing path k's approach, path k first, then counter-clockwise. (m, 2)"""
    return np.stack([interp_at(p.points, p.exit_s) for p in _exit_paths(road, k, m)])


def generate(family: str | None = None, seed: int = 0, num_agents: int = 12, *, hidden_goal: bool = False,
             num_candidates: int | None = None, styles: bool = False, steps: int = 91, dt: float = 0.1) -> Scenario:
    """One procedural scene. family None picks one of the road families from the seed.

    Fewer than `num_agents` vehicles are placed when the road has no free room left (a scene always has
    at least one). hidden_goal / styles add the issue-4 fields (the families of the same names set them).
    num_candidates: M exits per vehicle; None = the family's default (2 for t_maze, else 3)."""
    return _generate(family, seed, num_agents, hidden_goal, num_candidates, styles, steps, dt)[0]


def exit_routes(family: str | None = None, seed: int = 0, num_agents: int = 12, *, num_candidates: int | None = None,
                hidden_goal: bool = True, styles: bool = False, steps: int = 91, dt: float = 0.1) -> np.ndarray:
    """(N, M, R, 2) float32: every vehicle's path from its start to past each candidate exit (candidate order,
    world frame, every metre, padded by repeating the end) of the scene `generate` makes with these arguments."""
    return _generate(family, seed, num_agents, hidden_goal, num_candidates, styles, steps, dt, routes=True)[1]


def _generate(family, seed, num_agents, hidden_goal, num_candidates, styles, steps, dt, routes=False):
    if num_candidates is None:
        num_candidates = 2 if family in T_MAZES else 3
    rng = np.random.default_rng([seed, 7919])
    if family is None:
        family = FAMILIES[int(rng.integers(len(FAMILIES)))]
    if family not in ALL_FAMILIES:
        raise ValueError(f"unknown scenario family {family!r}; known: {', '.join(ALL_FAMILIES)}")
    if family == "hidden_goal":
        hidden_goal, road_family = True, ("intersection", "roundabout")[int(rng.integers(2))]
    elif family == "hidden_exit":
        choices = tuple(f for f, n in EXITS_PER_APPROACH.items() if n >= num_candidates)
        if not choices:
            raise ValueError(f"hidden_exit: no junction has {num_candidates} exits per approach "
                             f"(at most {max(EXITS_PER_APPROACH.values())})")
        hidden_goal, road_family = True, choices[int(rng.integers(len(choices)))]
    elif family in T_MAZES:
        if num_candidates != 2:
            raise ValueError(f"{family} has exactly 2 exits (left, right), got num_candidates={num_candidates}")
        hidden_goal, road_family = True, "t_junction"
    elif family == "partner_style":
        choices = ("intersection", "roundabout") if hidden_goal else FAMILIES  # roads with 3 exits per approach
        styles, road_family = True, choices[int(rng.integers(len(choices)))]
    else:
        road_family = family
    road = build_road(road_family, rng)
    if family in ("hidden_exit", *T_MAZES):  # exits just past the junction: every candidate is tens of metres away
        road.paths = [dataclasses.replace(p, exit_s=p.junction_s[1] + HIDDEN_EXIT_AHEAD) for p in road.paths]
    spawns = _spawn(road, rng, num_agents, near=family in ("hidden_exit", *T_MAZES),
                    approach=2 if family in T_MAZES else None)  # t_junction arm 2 is the stem (south)
    n = len(spawns)
    length = rng.uniform(4.2, 5.0, n).astype(np.float32)
    width = rng.uniform(1.8, 2.1, n).astype(np.float32)
    lo, hi = SPEED[road_family]
    v_des = rng.uniform(lo, hi, n)
    v0 = v_des * rng.uniform(0.4, 0.8, n)
    paths = [road.paths[k] for k, _ in spawns]
    s0 = np.array([s for _, s in spawns])
    plen = np.array([p.length for p in paths])
    R = max(len(p.points) for p in paths)
    routes_full = np.stack([np.concatenate([p.points, np.repeat(p.points[-1:], R - len(p.points), 0)]) for p in paths])

    def run(params: DriverParams):
        return drive(routes_full, plen, s0, v0, v_des, length, params, steps=steps, dt=dt)

    pos, heading, vel = run(STYLES["normal"])
    # goal: the exit of the route at junctions, else 30-70 m ahead along the lane
    if road_family in JUNCTIONS:
        s_goal = np.array([p.exit_s for p in paths])
    else:
        s_goal = np.minimum(s0 + rng.uniform(30.0, 70.0, n), plen - 3.0)
    goal = np.stack([interp_at(p.points, sg) for p, sg in zip(paths, s_goal, strict=True)])
    # as in logged data (WOMD's goalPosition), a goal the log does not reach within its steps moves back
    # to where the log ends, so every goal is reachable in one episode at the logged driver's pace
    short = np.linalg.norm(pos - goal[:, None, :], axis=-1).min(1) > 2.0  # (n,)
    goal[short] = pos[short, -1]
    # route: from the start position to the end of the path, every 2 m, padded by repeating the end
    rts = [resample(p.points[int(np.floor(s)):], 2.0) for p, s in zip(paths, s0, strict=True)]
    R2 = max(len(r) for r in rts)
    route = np.stack([np.concatenate([r, np.repeat(r[-1:], R2 - len(r), 0)]) for r in rts])
    seg, seg_type, seg_road = _segments(road)
    cand = np.stack([_candidates(road, k, num_candidates) for k, _ in spawns]) if hidden_goal else None
    # t_maze_shown: one exit (left or right, its own draw: the t_maze stream is untouched) listed twice
    shown = int(np.random.default_rng([seed, 104729]).integers(2)) if family == "t_maze_shown" else None
    if shown is not None:
        cand = cand[:, [shown, shown]]
    style = None
    if styles:
        style = [run(STYLES[name]) for name in STYLE_NAMES]

    # a random rigid motion so the policy sees every orientation
    ang, shift = float(rng.uniform(-np.pi, np.pi)), rng.uniform(-300.0, 300.0, 2)

    def place(p):
        return (rotate(np.asarray(p, np.float64), ang) + shift).astype(np.float32)

    def turn(h):
        return np.angle(np.exp(1j * (np.asarray(h, np.float64) + ang))).astype(np.float32)

    seg_xy = np.concatenate([place(seg[:, :2]), place(seg[:, 2:])], 1)
    sc = Scenario(
        name=f"{family}_{seed}", pos=place(pos), heading=turn(heading), vel=rotate(vel, ang).astype(np.float32),
        valid=np.ones((n, steps), bool), length=length, width=width, agent_type=np.zeros(n, np.int8),
        goal=place(goal), expert=np.zeros(n, bool), seg=seg_xy, seg_type=seg_type, seg_road=seg_road, dt=dt,
        route=place(route), metadata={"family": family, "road_family": road_family, "seed": seed},
    )
    if cand is not None:
        sc.goal_candidates = place(cand)
        sc.goal = sc.goal_candidates[:, 0].copy()
    ex_routes = None
    if routes:
        if cand is None:
            raise ValueError(f"exit_routes: scene family {family!r} has no candidate exits (use hidden_goal/hidden_exit)")
        per = [[resample(p.points[int(np.floor(s)):], 1.0) for p in _exit_paths(road, k, num_candidates)]
               for k, s in spawns]
        if shown is not None:
            per = [[r[shown], r[shown]] for r in per]
        R3 = max(len(r) for rs in per for r in rs)
        ex_routes = np.stack([np.stack([place(np.concatenate([r, np.repeat(r[-1:], R3 - len(r), 0)])) for r in rs])
                              for rs in per])  # (N, M, R, 2)
    if style is not None:
        sc.style_names = STYLE_NAMES
        sc.style_pos = np.stack([place(p) for p, _, _ in style])
        sc.style_heading = np.stack([turn(h) for _, h, _ in style])
        sc.style_vel = np.stack([rotate(v, ang).astype(np.float32) for _, _, v in style])
        sc.style_valid = np.ones((len(STYLE_NAMES), n, steps), bool)
    return sc, ex_routes


def generate_pool_scenarios(n: int, seed: int = 0, families: tuple[str, ...] | list[str] = FAMILIES,
                            num_agents: int = 12, **kwargs) -> list[Scenario]:
    """n scenes cycling through `families`, scene i seeded with seed * 100003 + i (deterministic)."""
    bad = [f for f in families if f not in ALL_FAMILIES]
    if bad or not families:
        raise ValueError(f"unknown scenario families {bad}; known: {', '.join(ALL_FAMILIES)}")
    return [generate(families[i % len(families)], seed * 100003 + i, num_agents, **kwargs) for i in range(n)]
