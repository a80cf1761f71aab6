"""Loader for the Waymo / GPUDrive JSON scenario format.

    {"scenario_id": ..., "objects": [{"position": [{"x", "y"}, ...] (T), "velocity": [{"x", "y"}] (T),
      "heading": [...] (T), "valid": [...] (T), "width", "length", "goalPosition": {"x", "y"},
      "type": "vehicle" | "pedestrian" | "cyclist" | ..., "mark_as_expert": bool}, ...],
     "roads": [{"geometry": [{"x", "y"}, ...], "type": "lane" | "road_line" | "road_edge" | "stop_sign" |
                "crosswalk" | "speed_bump" | "driveway"}, ...], "metadata": {...}}

Invalid steps carry -1e4 positions; they become valid = False. Road polylines are simplified with
Ramer-Douglas-Peucker (`tolerance` m) before being cut into segments. Every malformed input raises
`ScenarioFormatError` whose message starts with "<file>: <field path>: ...".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ttlab.drive.scenarios.polyline import rdp, to_segments
from ttlab.drive.scenarios.types import AGENT_TYPE_ID, AGENT_TYPES, ROAD_TYPE_ID, ROAD_TYPES, Scenario

INVALID = -1e4  # position filler of invalid steps in Waymo-format files


class ScenarioFormatError(ValueError):
    """A scene file that does not follow the format; the message names the file and the field."""


class _Ctx:
    def __init__(self, name: str):
        self.name = name

    def fail(self, where: str, what: str) -> ScenarioFormatError:
        return ScenarioFormatError(f"{self.name}: {where}: {what}")

    @staticmethod
    def join(where: str, key: str) -> str:
        return f"{where}.{key}" if where else key

    def get(self, obj: dict, key: str, where: str) -> Any:
        if key not in obj:
            raise self.fail(self.join(where, key), "missing field")
        return obj[key]

    def lst(self, obj: dict, key: str, where: str, n: int | None = None) -> list:
        v = self.get(obj, key, where)
        if not isinstance(v, list):
            raise self.fail(self.join(where, key), f"expected a list, got {type(v).__name__}")
        if n is not None and len(v) != n:
            raise self.fail(self.join(where, key), f"expected {n} entries, got {len(v)}")
        return v

    def num(self, v: Any, where: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(where, f"expected a number, got {v!r}")
        return float(v)

    def points(self, pts: list, where: str) -> np.ndarray:
        """[{x, y}, ...] -> (K, 2) float64; the first bad entry is named."""
        try:
            out = np.array([[p["x"], p["y"]] for p in pts], dtype=np.float64).reshape(len(pts), 2)
            if np.all(np.isfinite(out)) and not any(isinstance(p["x"], (bool, str)) or
                                                    isinstance(p["y"], (bool, str)) for p in pts):
                return out
        except (KeyError, TypeError, ValueError):
            pass
        for i, p in enumerate(pts):
            if not isinstance(p, dict):
                raise self.fail(f"{where}[{i}]", f"expected an object {{x, y}}, got {p!r}")
            for k in ("x", "y"):
                if k not in p:
                    raise self.fail(f"{where}[{i}].{k}", "missing field")
                v = self.num(p[k], f"{where}[{i}].{k}")
                if not np.isfinite(v):
                    raise self.fail(f"{where}[{i}].{k}", f"expected a finite number, got {v!r}")
        raise self.fail(where, "could not read the points")

    def numbers(self, vals: list, where: str) -> np.ndarray:
        for i, v in enumerate(vals):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise self.fail(f"{where}[{i}]", f"expected a number, got {v!r}")
        return np.asarray(vals, dtype=np.float64)

    def bools(self, vals: list, where: str) -> np.ndarray:
        for i, v in enumerate(vals):
            if not isinstance(v, (bool, int)):
                raise self.fail(f"{where}[{i}]", f"expected a boolean, got {v!r}")
        return np.asarray(vals, dtype=bool)


def parse_scenario(data: Any, name: str = "<scene>", tolerance: float = 0.1,
                   max_segment_length: float | None = None) -> Scenario:
    """A decoded JSON document -> Scenario (see the module docstring for the format)."""
    cx = _Ctx(name)
    if not isinstance(data, dict):
        raise cx.fail("<root>", f"expected a JSON object, got {type(data).__name__}")
    objects = cx.lst(data, "objects", "")
    roads = cx.lst(data, "roads", "")
    if not objects:
        raise cx.fail("objects", "no objects")
    first = objects[0]
    if not isinstance(first, dict):
        raise cx.fail("objects[0]", "expected an object")
    T = len(cx.lst(first, "position", "objects[0]"))
    if T < 1:
        raise cx.fail("objects[0].position", "empty")
    N = len(objects)
    pos = np.zeros((N, T, 2), np.float32)
    vel = np.zeros((N, T, 2), np.float32)
    heading = np.zeros((N, T), np.float32)
    valid = np.zeros((N, T), bool)
    length, width = np.zeros(N, np.float32), np.zeros(N, np.float32)
    goal = np.zeros((N, 2), np.float32)
    agent_type = np.zeros(N, np.int8)
    expert = np.zeros(N, bool)
    for i, o in enumerate(objects):
        w = f"objects[{i}]"
        if not isinstance(o, dict):
            raise cx.fail(w, f"expected an object, got {type(o).__name__}")
        p = cx.points(cx.lst(o, "position", w, T), f"{w}.position")
        v = cx.points(cx.lst(o, "velocity", w, T), f"{w}.velocity")
        h = cx.numbers(cx.lst(o, "heading", w, T), f"{w}.heading")
        ok = cx.bools(cx.lst(o, "valid", w, T), f"{w}.valid")
        filler = (np.abs(p[:, 0] - INVALID) < 1.0) | (np.abs(p[:, 1] - INVALID) < 1.0)
        pos[i], vel[i], heading[i], valid[i] = p, v, h, ok & ~filler
        length[i] = cx.num(cx.get(o, "length", w), f"{w}.length")
        width[i] = cx.num(cx.get(o, "width", w), f"{w}.width")
        g = cx.get(o, "goalPosition", w)
        if not isinstance(g, dict):
            raise cx.fail(f"{w}.goalPosition", f"expected an object {{x, y}}, got {g!r}")
        goal[i] = cx.points([g], f"{w}.goalPosition")[0]
        t = cx.get(o, "type", w)
        if not isinstance(t, str):
            raise cx.fail(f"{w}.type", f"expected a string, got {t!r}")
        agent_type[i] = AGENT_TYPE_ID.get(t.lower(), AGENT_TYPE_ID["other"])
        e = o.get("mark_as_expert", False)
        if not isinstance(e, (bool, int)):
            raise cx.fail(f"{w}.mark_as_expert", f"expected a boolean, got {e!r}")
        expert[i] = bool(e)
    segs, types, ids = [], [], []
    skipped: dict[str, int] = {}
    for j, r in enumerate(roads):
        w = f"roads[{j}]"
        if not isinstance(r, dict):
            raise cx.fail(w, f"expected an object, got {type(r).__name__}")
        t = cx.get(r, "type", w)
        if not isinstance(t, str):
            raise cx.fail(f"{w}.type", f"expected a string, got {t!r}")
        geom = cx.points(cx.lst(r, "geometry", w), f"{w}.geometry")
        if t not in ROAD_TYPE_ID or len(geom) == 0:
            key = t if t not in ROAD_TYPE_ID else "empty geometry"
            skipped[key] = skipped.get(key, 0) + 1
            continue
        s = to_segments(rdp(geom, tolerance), max_segment_length)
        segs.append(s)
        types.append(np.full(len(s), ROAD_TYPE_ID[t], np.int8))
        ids.append(np.full(len(s), j, np.int32))
    meta = data.get("metadata", {})
    if not isinstance(meta, dict):
        raise cx.fail("metadata", f"expected an object, got {type(meta).__name__}")
    sid = data.get("scenario_id", None)
    metadata = {"source": name, "scenario_id": sid, **meta}
    if skipped:
        metadata["skipped_roads"] = skipped
    return Scenario(
        name=str(sid) if sid not in (None, "") else Path(name).stem, pos=pos, heading=heading, vel=vel, valid=valid,
        length=length, width=width, agent_type=agent_type, goal=goal, expert=expert,
        seg=np.concatenate(segs).astype(np.float32) if segs else np.zeros((0, 4), np.float32),
        seg_type=np.concatenate(types) if types else np.zeros(0, np.int8),
        seg_road=np.concatenate(ids) if ids else np.zeros(0, np.int32), dt=0.1, metadata=metadata,
    )


def load_scenario(path: str | Path, tolerance: float = 0.1, max_segment_length: float | None = None) -> Scenario:
    """Read one Waymo/GPUDrive-format JSON file (see `parse_scenario`)."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as e:
        raise ScenarioFormatError(f"{path.name}: cannot read file ({e.strerror or e})") from e
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ScenarioFormatError(f"{path.name}: not valid JSON ({e})") from e
    return parse_scenario(data, path.name, tolerance, max_segment_length)


def scenario_to_json(sc: Scenario) -> dict:
    """A Scenario in the same JSON format (invalid steps written as -1e4), e.g. to export procedural scenes.

    Roads are written one element per `seg_road` polyline; loading the result gives back the same arrays
    (segments up to the loader's polyline simplification)."""
    objects = []
    for i in range(sc.num_agents):
        ok = sc.valid[i]
        p = np.where(ok[:, None], sc.pos[i], INVALID)
        v = np.where(ok[:, None], sc.vel[i], INVALID)
        h = np.where(ok, sc.heading[i], INVALID)
        objects.append({
            "position": [{"x": float(x), "y": float(y)} for x, y in p],
            "velocity": [{"x": float(x), "y": float(y)} for x, y in v],
            "heading": [float(a) for a in h], "valid": [bool(b) for b in ok],
            "width": float(sc.width[i]), "length": float(sc.length[i]),
            "goalPosition": {"x": float(sc.goal[i, 0]), "y": float(sc.goal[i, 1])},
            "type": AGENT_TYPES[int(sc.agent_type[i])], "mark_as_expert": bool(sc.expert[i]),
        })
    roads = []
    for rid in np.unique(sc.seg_road):
        m = sc.seg_road == rid
        s = sc.seg[m]
        pts = np.concatenate([s[:, :2], s[-1:, 2:]])
        roads.append({"geometry": [{"x": float(x), "y": float(y)} for x, y in pts],
                      "type": ROAD_TYPES[int(sc.seg_type[m][0]) - 1]})
    meta = {k: v for k, v in sc.metadata.items() if isinstance(v, (str, int, float, bool, type(None)))}
    return {"scenario_id": sc.name, "objects": objects, "roads": roads, "metadata": meta}
