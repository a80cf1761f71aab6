"""The blind all-way-stop crossing: one ego, one partner, one conflict point (the partner-adaptation family).

Two roads (7 m wide, each driven along its centreline) cross at right angles. The ego waits at its stop line D_e
metres before the conflict point (the crossing centre), the partner at its stop line D_p metres before it, coming
from the ego's left or right; both start at rest. Buildings stand at the corners: with the observation radius of the benchmark
(`EnvConfig.partner_radius` = 6 m) neither driver sees the other while both wait at their lines (about 10 m
apart), only once they are both near the crossing. Each has a goal G metres past the crossing.

Nothing in the scene says how the partner will drive: that is the partner's type (`drive.partners`), drawn per
episode and kept for its K trials. The logs exist only because a scene needs them (they give the start states
and mark both vehicles as moving, i.e. controllable); no policy-driven agent replays them.

    scenes = crossing_scenes(CrossingSpec(n=64, seed=0))
    pool = build_pool(scenes)        # or load_pool("crossing:n=64,seed=0")

The source string is "crossing[:n=64,seed=0]"; scene i is seeded with seed * 100003 + i (deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ttlab.drive.scenarios.polyline import rdp, resample, rotate, to_segments
from ttlab.drive.scenarios.source_text import as_int, parse_items
from ttlab.drive.scenarios.types import ROAD_TYPE_ID, Scenario

LANE_WIDTH = 7.0  # m: road width (two lanes' worth: a car has 2.5 m to spare on each side of the centreline it drives)
ARM = 45.0  # m: each road runs this far from the centre
STOP_LINE = (6.5, 7.5)  # m: stop line to crossing centre (ego and partner)
GOAL_PAST = (12.0, 16.0)  # m: goal past the crossing centre
STEPS = 91


@dataclass
class CrossingSpec:
    """A pool of crossing scenes."""

    n: int = 64
    seed: int = 0

    @classmethod
    def parse(cls, text: str) -> CrossingSpec:
        """'crossing' or 'crossing:n=64,seed=0'."""
        items = parse_items(text, "crossing", (f.name for f in fields(cls)), "crossing[:n=..,seed=..]")
        spec = cls(**{key: as_int(text, key, val) for key, val in items.items()})
        if spec.n < 1:
            raise ValueError(f"scenario source {text!r}: n must be >= 1")
        return spec


def _edges() -> list[np.ndarray]:
    """Four L-shaped corner kerbs of two crossing lanes (in the conflict frame: ego road along x)."""
    h = LANE_WIDTH / 2
    out = []
    for sx in (-1.0, 1.0):
        for sy in (-1.0, 1.0):
            out.append(np.array([[sx * ARM, sy * h], [sx * h, sy * h], [sx * h, sy * ARM]]))
    return out


def _drive_log(start: np.ndarray, heading: float, delay: float, accel: float, length: float,
               steps: int, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """A plausible log: at rest for `delay` s, then straight ahead at `accel` up to 10 m/s, `length` m at most."""
    t = np.arange(steps) * dt
    tau = np.clip(t - delay, 0.0, None)
    v = np.minimum(accel * tau, 10.0)
    s = np.where(accel * tau <= 10.0, 0.5 * accel * tau ** 2, 50.0 / accel + 10.0 * (tau - 10.0 / accel))
    s = np.minimum(s, length)
    v = np.where(s >= length, 0.0, v)
    d = np.array([np.cos(heading), np.sin(heading)])
    return start + s[:, None] * d, v[:, None] * d


def crossing_scene(seed: int, steps: int = STEPS, dt: float = 0.1) -> Scenario:
    """One crossing scene (deterministic per seed). Agent 0 is the ego, agent 1 the partner."""
    rng = np.random.default_rng([seed, 4241])
    d_e, d_p = rng.uniform(*STOP_LINE, 2)
    g_e, g_p = rng.uniform(*GOAL_PAST, 2)
    side = 1.0 if rng.random() < 0.5 else -1.0  # +1: the partner comes from the ego's right (moving +y)
    length = rng.uniform(4.2, 5.0, 2).astype(np.float32)
    width = rng.uniform(1.8, 2.1, 2).astype(np.float32)
    start = np.array([[-d_e, 0.0], [0.0, -side * d_p]])
    head = np.array([0.0, side * np.pi / 2])
    goal = np.array([[g_e, 0.0], [0.0, side * g_p]])
    logs = [_drive_log(start[0], head[0], 0.0, 2.5, d_e + g_e, steps, dt),
            _drive_log(start[1], head[1], 3.0, 2.5, d_p + g_p, steps, dt)]
    pos = np.stack([p for p, _ in logs])  # (2, T, 2)
    vel = np.stack([v for _, v in logs])
    heading = np.repeat(head[:, None], steps, 1)
    ahead = np.stack([np.cos(head), np.sin(head)], 1)  # (2, 2)
    route = start[:, None] + 2.0 * np.arange(25)[None, :, None] * ahead[:, None]  # (2, 25, 2) every 2 m, 48 m
    segs, types, ids = [], [], []
    lanes = [np.array([[-ARM, 0.0], [ARM, 0.0]]), np.array([[0.0, -ARM], [0.0, ARM]])]
    for rid, (kind, poly) in enumerate([("lane", p) for p in lanes] + [("road_edge", p) for p in _edges()]):
        s = to_segments(rdp(resample(poly, 1.0), 0.05), max_len=4.0)
        segs.append(s)
        types.append(np.full(len(s), ROAD_TYPE_ID[kind], np.int8))
        ids.append(np.full(len(s), rid, np.int32))
    seg = np.concatenate(segs)

    ang, shift = float(rng.uniform(-np.pi, np.pi)), rng.uniform(-300.0, 300.0, 2)  # a random rigid motion

    def place(p):
        return (rotate(np.asarray(p, np.float64), ang) + shift).astype(np.float32)

    return Scenario(
        name=f"crossing_{seed}", pos=place(pos), heading=np.angle(np.exp(1j * (heading + ang))).astype(np.float32),
        vel=rotate(vel, ang).astype(np.float32), valid=np.ones((2, steps), bool), length=length, width=width,
        agent_type=np.zeros(2, np.int8), goal=place(goal), expert=np.zeros(2, bool),
        seg=np.concatenate([place(seg[:, :2]), place(seg[:, 2:])], 1), seg_type=np.concatenate(types),
        seg_road=np.concatenate(ids), dt=dt, route=place(route),
        metadata={"family": "crossing", "seed": seed, "stop_line": (float(d_e), float(d_p)),
                  "goal_past": (float(g_e), float(g_p)), "partner_side": "right" if side > 0 else "left"},
    )


def crossing_scenes(spec: CrossingSpec | str) -> list[Scenario]:
    """The scenes of a crossing pool: scene i seeded with seed * 100003 + i."""
    spec = CrossingSpec.parse(spec) if isinstance(spec, str) else spec
    return [crossing_scene(spec.seed * 100003 + i) for i in range(spec.n)]
