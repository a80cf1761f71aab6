"""Procedural road families: lane centrelines, road lines, road edges and the drivable paths.

Right-hand traffic. Every family returns a `RoadMap` in a local frame (junction centre at the origin);
`procedural.py` places vehicles on its paths and moves the whole scene by a random rigid transform.

A `Path` is one drivable route from an entry lane to an exit (approach lane + connector + exit lane),
resampled every metre; paths with the same `approach` share their entry lane, so their exits are the
candidate goals of a hidden-goal scene.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ttlab.drive.scenarios.polyline import arc_length, circle_arc, connector, resample

FAMILIES: tuple[str, ...] = ("straight", "intersection", "t_junction", "merge", "roundabout")


@dataclass
class Path:
    points: np.ndarray  # (K, 2) every 1 m
    approach: int  # entry-lane id; paths sharing it branch from the same lane
    spawn_end: float  # vehicles spawn at arc positions in [spawn_start, spawn_end]
    exit_s: float  # arc position of this path's exit point (goal / hidden-goal candidate)
    spawn_start: float = 0.0
    junction_s: tuple[float, float] | None = None  # junctions: arc positions where the junction starts and ends

    @property
    def length(self) -> float:
        return float(arc_length(self.points)[-1])


@dataclass
class RoadMap:
    family: str
    lanes: list[np.ndarray] = field(default_factory=list)  # lane centrelines (K, 2)
    lines: list[np.ndarray] = field(default_factory=list)  # painted road lines
    edges: list[np.ndarray] = field(default_factory=list)  # road edges (offroad boundary)
    paths: list[Path] = field(default_factory=list)


def _unit(a: float) -> np.ndarray:
    return np.array([np.cos(a), np.sin(a)])


def _line(a, b) -> np.ndarray:
    return np.stack([np.asarray(a, np.float64), np.asarray(b, np.float64)])


def _join(*parts: np.ndarray) -> np.ndarray:
    """Concatenate polylines, dropping a repeated joint point; resample every metre."""
    out = [parts[0]]
    for p in parts[1:]:
        out.append(p[1:] if np.linalg.norm(p[0] - out[-1][-1]) < 1e-6 else p)
    return resample(np.concatenate(out), 1.0)


def offset(poly: np.ndarray, d: float) -> np.ndarray:
    """Polyline shifted `d` metres to its left (negative: right)."""
    t = np.gradient(poly, axis=0)
    t /= np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-9)
    return poly + d * np.stack([-t[:, 1], t[:, 0]], 1)


def straight(rng: np.random.Generator) -> RoadMap:
    """Two-way multi-lane road along +x: 1-3 lanes eastbound (y < 0), 1-2 westbound (y > 0)."""
    w = rng.uniform(3.4, 3.9)
    n_fwd, n_bwd = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    length = 220.0
    x0, x1 = -length / 2, length / 2
    m = RoadMap("straight")
    for i in range(n_fwd):
        y = -(i + 0.5) * w
        lane = resample(_line((x0, y), (x1, y)), 1.0)
        m.lanes.append(lane)
        m.paths.append(Path(lane, len(m.paths), spawn_end=length - 70.0, exit_s=length - 5.0))
    for i in range(n_bwd):
        y = (i + 0.5) * w
        lane = resample(_line((x1, y), (x0, y)), 1.0)
        m.lanes.append(lane)
        m.paths.append(Path(lane, len(m.paths), spawn_end=length - 70.0, exit_s=length - 5.0))
    m.lines.append(_line((x0, 0.0), (x1, 0.0)))
    m.lines += [_line((x0, -i * w), (x1, -i * w)) for i in range(1, n_fwd)]
    m.lines += [_line((x0, i * w), (x1, i * w)) for i in range(1, n_bwd)]
    m.edges += [_line((x0, -n_fwd * w), (x1, -n_fwd * w)), _line((x0, n_bwd * w), (x1, n_bwd * w))]
    return m


def junction(rng: np.random.Generator, angles: tuple[float, ...], family: str) -> RoadMap:
    """Arms at `angles` (rad, increasing), one lane each way, corners rounded with radius r."""
    w = rng.uniform(3.4, 3.9)
    r = rng.uniform(8.0, 11.0)  # corner radius of the kerb
    arm = rng.uniform(55.0, 70.0)  # arm length from the centre
    H = w  # kerb offset from the arm centreline
    B = H + r  # where the arms meet the junction box
    m = RoadMap(family)
    k = len(angles)
    u = [_unit(a) for a in angles]
    n = [_unit(a + np.pi / 2) for a in angles]
    incoming, outgoing = [], []
    for i in range(k):
        inc = resample(_line(arm * u[i] + n[i] * w / 2, B * u[i] + n[i] * w / 2), 1.0)
        out = resample(_line(B * u[i] - n[i] * w / 2, arm * u[i] - n[i] * w / 2), 1.0)
        incoming.append(inc)
        outgoing.append(out)
        m.lanes += [inc, out]
        m.lines.append(_line(B * u[i], arm * u[i]))
        m.edges += [_line(B * u[i] + H * n[i], arm * u[i] + H * n[i]), _line(B * u[i] - H * n[i], arm * u[i] - H * n[i])]
    for i in range(k):  # kerb between arm i and the next arm counter-clockwise
        j = (i + 1) % k
        a, b = B * u[i] + H * n[i], B * u[j] - H * n[j]
        m.edges.append(connector(a, angles[i] + np.pi, b, angles[j], n=16))
    for i in range(k):
        for j in range(k):
            if i == j:
                continue
            conn = connector(incoming[i][-1], angles[i] + np.pi, outgoing[j][0], angles[j], n=24)
            m.lanes.append(resample(conn, 1.0))
            path = _join(incoming[i], conn, outgoing[j])
            approach_len = arm - B
            out_start = float(arc_length(path)[-1] - (arm - B))
            m.paths.append(Path(path, i, spawn_end=approach_len - 10.0, exit_s=out_start + 12.0,
                                junction_s=(float(approach_len), out_start)))
    return m


def intersection(rng: np.random.Generator) -> RoadMap:
    """4-way intersection: every approach has 3 exits (left, straight, right)."""
    return junction(rng, (0.0, np.pi / 2, np.pi, 3 * np.pi / 2), "intersection")


def t_junction(rng: np.random.Generator) -> RoadMap:
    """T-junction: east, west and south arms."""
    return junction(rng, (0.0, np.pi, 3 * np.pi / 2), "t_junction")


def merge(rng: np.random.Generator) -> RoadMap:
    """One-way main road (1-2 lanes, +x) with an on-ramp that joins through an acceleration lane."""
    w = rng.uniform(3.4, 3.9)
    n_main = int(rng.integers(1, 3))
    x0, x_end = -100.0, 120.0
    y_right = -(n_main - 0.5) * w  # rightmost main lane
    y_acc = y_right - w  # acceleration lane
    y_ramp = y_acc - rng.uniform(8.0, 12.0)
    x1, x2, x3, x4 = -70.0, -30.0, 10.0, 50.0
    m = RoadMap("merge")
    for i in range(n_main):
        lane = resample(_line((x0, -(i + 0.5) * w), (x_end, -(i + 0.5) * w)), 1.0)
        m.lanes.append(lane)
        m.paths.append(Path(lane, i, spawn_end=110.0, exit_s=arc_length(lane)[-1] - 5.0))
    ramp = _join(_line((x0, y_ramp), (x1, y_ramp)), connector((x1, y_ramp), 0.0, (x2, y_acc), 0.0),
                 _line((x2, y_acc), (x3, y_acc)), connector((x3, y_acc), 0.0, (x4, y_right), 0.0),
                 _line((x4, y_right), (x_end, y_right)))
    m.lanes.append(ramp)
    m.paths.append(Path(ramp, n_main, spawn_end=40.0, exit_s=arc_length(ramp)[-1] - 5.0))
    m.lines.append(_line((x0, 0.0), (x_end, 0.0)))  # left edge line of the carriageway
    m.lines += [_line((x0, -i * w), (x_end, -i * w)) for i in range(1, n_main)]
    m.edges.append(_line((x0, 0.0 + 0.3), (x_end, 0.3)))
    y_edge = -n_main * w
    left = offset(ramp, w / 2)  # ramp's left kerb until it meets the main road's right kerb
    meet = int(np.argmax(left[:, 1] >= y_edge))
    x_meet = float(left[meet, 0])
    m.edges.append(left[: meet + 1])
    m.edges.append(_line((x0, y_edge), (x_meet, y_edge)))
    m.edges.append(offset(ramp, -w / 2))  # ramp, acceleration lane and taper right kerb
    m.lines.append(_line((x2, y_edge), (x3, y_edge)))  # dashed line beside the acceleration lane
    return m


def roundabout(rng: np.random.Generator) -> RoadMap:
    """Single-lane roundabout (counter-clockwise) with 4 arms; each entry has 3 exits."""
    w = rng.uniform(3.4, 3.9)
    rc = rng.uniform(13.0, 17.0)  # ring lane radius
    arm = rng.uniform(60.0, 75.0)
    a0 = rc + 12.0  # where the arm lanes end
    delta, gamma = 0.35, 0.62  # ring entry angle after the arm; kerb flare angle
    r_out, r_in = rc + w / 2 + 0.8, rc - w / 2 - 0.8
    angles = (0.0, np.pi / 2, np.pi, 3 * np.pi / 2)
    m = RoadMap("roundabout")
    ring = circle_arc((0.0, 0.0), rc, 0.0, 2 * np.pi, step=1.0)
    m.lanes.append(ring)
    m.edges.append(circle_arc((0.0, 0.0), r_in, 0.0, 2 * np.pi, step=1.5))
    H = w + 0.4
    entries, exits = [], []
    for a in angles:
        u, nrm = _unit(a), _unit(a + np.pi / 2)
        inc = resample(_line(arm * u + nrm * w / 2, a0 * u + nrm * w / 2), 1.0)
        out = resample(_line(a0 * u - nrm * w / 2, arm * u - nrm * w / 2), 1.0)
        ein = connector(inc[-1], a + np.pi, rc * _unit(a + delta), a + delta + np.pi / 2, n=20)
        eout = connector(rc * _unit(a - delta), a - delta + np.pi / 2, out[0], a, n=20)
        entries.append((inc, ein))
        exits.append((eout, out))
        m.lanes += [inc, out, resample(ein, 1.0), resample(eout, 1.0)]
        m.lines.append(_line(a0 * u, arm * u))
        m.edges += [_line(a0 * u + H * nrm, arm * u + H * nrm), _line(a0 * u - H * nrm, arm * u - H * nrm)]
        m.edges += [_line(a0 * u + H * nrm, r_out * _unit(a + gamma)), _line(a0 * u - H * nrm, r_out * _unit(a - gamma))]
        m.edges.append(circle_arc((0.0, 0.0), r_out, a + gamma, a + np.pi / 2 - gamma, step=1.5))
    for i, ai in enumerate(angles):
        for j, aj in enumerate(angles):
            if i == j:
                continue
            start, stop = ai + delta, aj - delta
            while stop <= start:
                stop += 2 * np.pi
            arc = circle_arc((0.0, 0.0), rc, start, stop, step=1.0)
            inc, ein = entries[i]
            eout, out = exits[j]
            path = _join(inc, ein, arc, eout, out)
            m.paths.append(Path(path, i, spawn_end=arm - a0 - 10.0, exit_s=arc_length(path)[-1] - (arm - a0) + 10.0))
    return m


BUILDERS = {"straight": straight, "intersection": intersection, "t_junction": t_junction, "merge": merge,
            "roundabout": roundabout}


def build_road(family: str, rng: np.random.Generator) -> RoadMap:
    if family not in BUILDERS:
        raise ValueError(f"unknown road family {family!r}; known: {', '.join(FAMILIES)}")
    return BUILDERS[family](rng)
