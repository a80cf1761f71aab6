"""Loader for the Waymo / GPUDrive / PufferDrive JSON scenario format.

    {"scenario_id": ..., "objects": [{"position": [{"x", "y"}, ...] (T), "velocity": [{"x", "y"}] (T),
      "heading": [...] (T), "valid": [...] (T), "width", "length", "goalPosition": {"x", "y"},
      "type": "vehicle" | "pedestrian" | "cyclist" | ..., "mark_as_expert": bool}, ...],
     "roads": [{"geometry": [{"x", "y"}, ...], "type": "lane" | "road_line" | "road_edge" | "stop_sign" |
                "crosswalk" | "speed_bump" | "driveway", "map_element_id": int}, ...], "metadata": {...}}

Invalid steps carry -1e4 positions; they become valid = False. Road polylines are simplified with
Ramer-Douglas-Peucker (`tolerance` m) before being cut into segments.

Leniency follows PufferDrive's converter (`save_map_binary`), which reads the first `trajectory_length`
entries of every per-step array, pads missing entries (position/velocity/heading 0, valid 0), and takes
defaults for missing fields (type vehicle, size 0, goal at the origin, road type from `map_element_id`).
Every file that converter reads, this loader reads too; each repair is named ("<file>: <field path>: ...")
in one `ScenarioRepairWarning` per file and kept in `Scenario.metadata["repairs"]`. Where our repair is
safer than upstream's it says so (a step whose position is missing or not finite becomes invalid instead of
a point at the origin). Vehicle logs no vehicle could drive are repaired too (`log_repair`: a teleport cuts the
log and moves the goal to the last position before it; a heading spike read from a zero displacement is held at
its neighbour), which upstream does not do (`repair_logs=False` reads them raw). `strict=True` turns every
repair into an error. What upstream cannot read either
(a value that is not a number, a point or goal that is not an object, a root or `objects` that is not what
the format says) raises `ScenarioFormatError` whose message starts with "<file>: <field path>: ...".
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ttlab.drive.scenarios.log_repair import (
    BOX_SCALE,
    MAX_STEP,
    first_overlap,
    first_teleport,
    hold_heading_spikes,
)
from ttlab.drive.scenarios.polyline import rdp, to_segments
from ttlab.drive.scenarios.types import AGENT_TYPE_ID, AGENT_TYPES, ROAD_TYPE_ID, ROAD_TYPES, Scenario

INVALID = -1e4  # position filler of invalid steps in Waymo-format files
MAX_LISTED_REPAIRS = 20  # repairs spelled out in one warning; the rest are counted


class ScenarioFormatError(ValueError):
    """A scene file that does not follow the format; the message names the file and the field."""


class ScenarioRepairWarning(UserWarning):
    """A scene file the loader read after repairing it as PufferDrive's converter does; names each repair."""


def road_type_from_element_id(element_id: int) -> str | None:
    """Waymo `map_element_id` -> road type name, with the ranges PufferDrive's converter uses."""
    if 0 <= element_id <= 3:
        return "lane"
    if 5 <= element_id <= 13:
        return "road_line"
    if 14 <= element_id <= 16:
        return "road_edge"
    return {17: "stop_sign", 18: "crosswalk", 19: "speed_bump", 20: "driveway"}.get(element_id)


class _Ctx:
    """Error and repair bookkeeping for one file."""

    def __init__(self, name: str, strict: bool):
        self.name, self.strict = name, strict
        self.repairs: list[str] = []

    def fail(self, where: str, what: str) -> ScenarioFormatError:
        return ScenarioFormatError(f"{self.name}: {where}: {what}")

    def repair(self, where: str, what: str) -> None:
        if self.strict:
            raise self.fail(where, what + " (strict)")
        self.repairs.append(f"{self.name}: {where}: {what}")

    @staticmethod
    def join(where: str, key: str) -> str:
        return f"{where}.{key}" if where else key

    def get(self, obj: dict, key: str, where: str) -> Any:
        if key not in obj:
            raise self.fail(self.join(where, key), "missing field")
        return obj[key]

    def lst(self, obj: dict, key: str, where: str) -> list:
        v = self.get(obj, key, where)
        if not isinstance(v, list):
            raise self.fail(self.join(where, key), f"expected a list, got {type(v).__name__}")
        return v

    def num(self, v: Any, where: str) -> float:
        """A number; a numeric string is read as upstream's float() would, with a repair note."""
        if isinstance(v, bool) or v is None or isinstance(v, (list, dict)):
            raise self.fail(where, f"expected a number, got {v!r}")
        if isinstance(v, str):
            try:
                f = float(v)
            except ValueError:
                raise self.fail(where, f"expected a number, got {v!r}") from None
            self.repair(where, f"number given as a string {v!r}, read as {f}")
            return f
        if not isinstance(v, (int, float)):
            raise self.fail(where, f"expected a number, got {v!r}")
        return float(v)

    def scalar(self, obj: dict, key: str, where: str, default: float) -> float:
        w = self.join(where, key)
        if key not in obj:
            self.repair(w, f"missing field, set to {default} as upstream does")
            return default
        f = self.num(obj[key], w)
        if not math.isfinite(f):
            self.repair(w, f"not finite ({f}), set to {default}")
            return default
        return f

    def per_step(self, obj: dict, key: str, where: str, T: int) -> list | None:
        """The list `obj[key]` cut or noted against the scene length T; None when the field is missing."""
        w = self.join(where, key)
        if key not in obj:
            self.repair(w, f"missing field, all {T} steps padded as upstream does")
            return None
        v = obj[key]
        if not isinstance(v, list):
            raise self.fail(w, f"expected a list, got {type(v).__name__}")
        if len(v) > T:
            self.repair(w, f"{len(v)} entries, truncated to the scene length {T}")
            return v[:T]
        if len(v) < T:
            self.repair(w, f"{len(v)} entries, steps {len(v)}..{T - 1} padded as invalid")
        return v

    def points(self, pts: list | None, where: str, T: int, step_field: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """[{x, y}, ...] -> (T, 2) float64 and (T,) ok: padded, missing or non-finite entries are not ok.

        step_field: the repair note says the step becomes invalid (positions); otherwise it is read as 0."""
        fix = "the step is marked invalid" if step_field else "read as 0.0"
        out = np.zeros((T, 2), np.float64)
        ok = np.zeros(T, bool)
        if not pts:
            return out, ok
        try:  # fast path: every entry a {x, y} of plain finite numbers
            if not any(isinstance(p["x"], (bool, str)) or isinstance(p["y"], (bool, str)) for p in pts):
                arr = np.array([[p["x"], p["y"]] for p in pts], dtype=np.float64).reshape(len(pts), 2)
                if np.all(np.isfinite(arr)):
                    out[:len(pts)], ok[:len(pts)] = arr, True
                    return out, ok
        except (KeyError, TypeError, ValueError):
            pass
        for i, p in enumerate(pts):
            if not isinstance(p, dict):
                raise self.fail(f"{where}[{i}]", f"expected an object {{x, y}}, got {p!r}")
            good = True
            for j, k in enumerate(("x", "y")):
                if k not in p:
                    self.repair(f"{where}[{i}].{k}", f"missing field; {fix}" +
                                (" (upstream reads 0.0 there)" if step_field else " as upstream does"))
                    good = False
                    continue
                f = self.num(p[k], f"{where}[{i}].{k}")
                if not math.isfinite(f):
                    self.repair(f"{where}[{i}].{k}", f"not finite ({f}); {fix}")
                    good = False
                    continue
                out[i, j] = f
            ok[i] = good
        return out, ok

    def numbers(self, vals: list | None, where: str, T: int) -> tuple[np.ndarray, np.ndarray]:
        """[...] -> (T,) float64 and (T,) ok (padded or non-finite entries are not ok)."""
        out = np.zeros(T, np.float64)
        ok = np.zeros(T, bool)
        for i, v in enumerate(vals or []):
            f = self.num(v, f"{where}[{i}]")
            if math.isfinite(f):
                out[i], ok[i] = f, True
            else:
                self.repair(f"{where}[{i}]", f"not finite ({f}); the step is marked invalid")
        return out, ok

    def bools(self, vals: list | None, where: str, T: int) -> np.ndarray:
        """[...] -> (T,) bool; padded entries False (upstream pads valid with 0)."""
        out = np.zeros(T, bool)
        for i, v in enumerate(vals or []):
            if isinstance(v, bool) or (isinstance(v, (int, float)) and math.isfinite(v)):
                out[i] = bool(int(v))
            else:
                raise self.fail(f"{where}[{i}]", f"expected a boolean, got {v!r}")
        return out


def _scene_length(objects: list, cx: _Ctx, trajectory_length: int | None) -> int:
    """The scene's step count: given, or the most common `position` length (ties: the longest)."""
    if trajectory_length is not None:
        if trajectory_length < 1:
            raise ValueError(f"trajectory_length must be >= 1, got {trajectory_length}")
        return trajectory_length
    lengths = Counter(len(o["position"]) for o in objects
                      if isinstance(o, dict) and isinstance(o.get("position"), list) and o["position"])
    if not lengths:
        raise cx.fail("objects", "no object has a non-empty position list, so the scene has no length")
    top = max(lengths.values())
    return max(n for n, c in lengths.items() if c == top)


def _repair_log(cx: _Ctx, where: str, pos: np.ndarray, heading: np.ndarray, vel: np.ndarray, valid: np.ndarray,
                goal: np.ndarray) -> None:
    """A vehicle's log made drivable in place (`log_repair`): teleports cut, heading spikes held; each named."""
    t = first_teleport(pos, valid)
    if t is not None:
        prev = int(np.flatnonzero(valid[:t])[-1])
        jump = float(np.hypot(*(pos[t] - pos[prev])))
        valid[t:] = False
        vel[t:] = 0.0
        old = goal.copy()
        goal[:] = pos[prev]
        cx.repair(f"{where}.position[{t}]", f"jumps {jump:.1f} m in one step (more than {MAX_STEP} m: a teleport); "
                  f"steps {t}.. marked invalid and the goal moved from ({old[0]:.1f}, {old[1]:.1f}) to the last "
                  f"position before the jump ({goal[0]:.1f}, {goal[1]:.1f})")
    fixed, steps = hold_heading_spikes(pos, heading, valid)
    if steps:
        heading[:] = fixed
        shown = ", ".join(map(str, steps[:8])) + (", ..." if len(steps) > 8 else "")
        cx.repair(f"{where}.heading", f"{len(steps)} step(s) ({shown}) turn more than 1 rad in one step without "
                  "moving that way (a heading read from a zero displacement); held at the neighbouring heading")


def _cut_overlaps(cx: _Ctx, pos: np.ndarray, heading: np.ndarray, vel: np.ndarray, valid: np.ndarray,
                  length: np.ndarray, width: np.ndarray, goal: np.ndarray, vehicle: np.ndarray) -> None:
    """Vehicles whose logs drive through each other: the later-listed one's log cut at the first overlap."""
    ids = np.flatnonzero(vehicle)
    while True:
        hit = first_overlap(pos[ids], heading[ids], length[ids], width[ids], valid[ids])
        if hit is None:
            return
        t, a, b = hit
        i, j = int(ids[a]), int(ids[b])
        valid[j, t:] = False
        vel[j, t:] = 0.0
        before = np.flatnonzero(valid[j])
        old = goal[j].copy()
        if len(before):
            goal[j] = pos[j, before[-1]]
        cx.repair(f"objects[{j}].position[{t}]", f"its box overlaps objects[{i}]'s in the log (at the simulator's "
                  f"box scale {BOX_SCALE}: the logged drivers drove through each other); steps {t}.. marked invalid "
                  f"and the goal moved from ({old[0]:.1f}, {old[1]:.1f}) to ({goal[j, 0]:.1f}, {goal[j, 1]:.1f})")


def parse_scenario(data: Any, name: str = "<scene>", tolerance: float = 0.1,
                   max_segment_length: float | None = None, trajectory_length: int | None = None,
                   strict: bool = False, repair_logs: bool = True) -> Scenario:
    """A decoded JSON document -> Scenario (see the module docstring for the format and the repairs).

    trajectory_length: steps to keep (upstream uses 91); None = the most common `position` length.
    strict: refuse the file at its first repair instead of warning.
    repair_logs: repair vehicle logs no vehicle could drive (`log_repair`: teleports, heading spikes)."""
    cx = _Ctx(name, strict)
    if not isinstance(data, dict):
        raise cx.fail("<root>", f"expected a JSON object, got {type(data).__name__}")
    objects = cx.lst(data, "objects", "")
    if "roads" in data:
        roads = cx.lst(data, "roads", "")
    else:
        cx.repair("roads", "missing field, read as no roads as upstream does")
        roads = []
    if not objects:
        raise cx.fail("objects", "no objects")
    for i, o in enumerate(objects):
        if not isinstance(o, dict):
            raise cx.fail(f"objects[{i}]", f"expected an object, got {type(o).__name__}")
    T = _scene_length(objects, cx, trajectory_length)
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
        p, p_ok = cx.points(cx.per_step(o, "position", w, T), f"{w}.position", T)
        v, _ = cx.points(cx.per_step(o, "velocity", w, T), f"{w}.velocity", T, step_field=False)
        h, h_ok = cx.numbers(cx.per_step(o, "heading", w, T), f"{w}.heading", T)
        ok = cx.bools(cx.per_step(o, "valid", w, T), f"{w}.valid", T)
        filler = (np.abs(p[:, 0] - INVALID) < 1.0) | (np.abs(p[:, 1] - INVALID) < 1.0)
        pos[i], vel[i], heading[i], valid[i] = p, v, h, ok & p_ok & h_ok & ~filler
        length[i] = cx.scalar(o, "length", w, 0.0)
        width[i] = cx.scalar(o, "width", w, 0.0)
        if "goalPosition" in o:
            g = o["goalPosition"]
            if not isinstance(g, dict):
                raise cx.fail(f"{w}.goalPosition", f"expected an object {{x, y}}, got {g!r}")
            gp, g_ok = cx.points([g], f"{w}.goalPosition", 1)
            goal[i] = gp[0] if g_ok[0] else 0.0
        else:
            cx.repair(f"{w}.goalPosition", "missing field, set to (0, 0) as upstream does")
        if "type" in o:
            t = o["type"]
            if not isinstance(t, str):
                raise cx.fail(f"{w}.type", f"expected a string, got {t!r}")
            agent_type[i] = AGENT_TYPE_ID.get(t.lower(), AGENT_TYPE_ID["other"])
        else:
            cx.repair(f"{w}.type", "missing field, read as vehicle as upstream does")
            agent_type[i] = AGENT_TYPE_ID["vehicle"]
        e = o.get("mark_as_expert", False)
        if not isinstance(e, (bool, int)):
            raise cx.fail(f"{w}.mark_as_expert", f"expected a boolean, got {e!r}")
        expert[i] = bool(e)
        if repair_logs and agent_type[i] == AGENT_TYPE_ID["vehicle"]:
            _repair_log(cx, w, pos[i], heading[i], vel[i], valid[i], goal[i])
    if repair_logs:
        _cut_overlaps(cx, pos, heading, vel, valid, length, width, goal, agent_type == AGENT_TYPE_ID["vehicle"])
    segs, types, ids = [], [], []
    skipped: dict[str, int] = {}
    for j, r in enumerate(roads):
        w = f"roads[{j}]"
        if not isinstance(r, dict):
            raise cx.fail(w, f"expected an object, got {type(r).__name__}")
        t = r.get("type")
        if t is not None and not isinstance(t, str):
            raise cx.fail(f"{w}.type", f"expected a string, got {t!r}")
        if t is None or t not in ROAD_TYPE_ID:
            eid = r.get("map_element_id")
            by_id = road_type_from_element_id(eid) if isinstance(eid, int) and not isinstance(eid, bool) else None
            if by_id is not None:
                cx.repair(f"{w}.type", f"{'missing' if t is None else repr(t)}, read as {by_id!r} from "
                          f"map_element_id {eid} as upstream does")
                t = by_id
            elif t is None:
                cx.repair(f"{w}.type", "missing field and no usable map_element_id; element skipped")
                skipped["missing type"] = skipped.get("missing type", 0) + 1
                continue
        if "geometry" in r:
            geom_list = cx.lst(r, "geometry", w)
        else:
            cx.repair(f"{w}.geometry", "missing field, read as empty as upstream does")
            geom_list = []
        geom, g_ok = cx.points(geom_list, f"{w}.geometry", len(geom_list))
        geom = geom[g_ok]  # points dropped by a repair are named above
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
    if cx.repairs:
        metadata["repairs"] = list(cx.repairs)
        shown = cx.repairs[:MAX_LISTED_REPAIRS]
        more = len(cx.repairs) - len(shown)
        warnings.warn(ScenarioRepairWarning(
            f"{name}: read with {len(cx.repairs)} repair(s) as PufferDrive's converter would:\n  "
            + "\n  ".join(shown) + (f"\n  ... and {more} more (Scenario.metadata['repairs'])" if more else "")),
            stacklevel=2)
    return Scenario(
        name=str(sid) if sid not in (None, "") else Path(name).stem, pos=pos, heading=heading, vel=vel, valid=valid,
        length=length, width=width, agent_type=agent_type, goal=goal, expert=expert,
        seg=np.concatenate(segs).astype(np.float32) if segs else np.zeros((0, 4), np.float32),
        seg_type=np.concatenate(types) if types else np.zeros(0, np.int8),
        seg_road=np.concatenate(ids) if ids else np.zeros(0, np.int32), dt=0.1, metadata=metadata,
    )


def load_scenario(path: str | Path, tolerance: float = 0.1, max_segment_length: float | None = None,
                  trajectory_length: int | None = None, strict: bool = False, repair_logs: bool = True) -> Scenario:
    """Read one Waymo/GPUDrive/PufferDrive-format JSON file (see `parse_scenario`)."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as e:
        raise ScenarioFormatError(f"{path.name}: cannot read file ({e.strerror or e})") from e
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ScenarioFormatError(f"{path.name}: not valid JSON ({e})") from e
    return parse_scenario(data, path.name, tolerance, max_segment_length, trajectory_length, strict, repair_logs)


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
