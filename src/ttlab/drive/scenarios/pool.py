"""Scenes -> a padded `ScenarioPool` on one device, and `load_pool` from any scenario source.

Sources: a directory of Waymo/GPUDrive JSON scenes, a converted cache (a directory with index.json),
one JSON file, or a procedural spec (`ProceduralSpec`, or the string
"procedural[:n=100,seed=0,families=intersection+merge,agents=12,hidden_goal=1,styles=1,exits=3]"); a file or
directory may carry ego options ("town02.json?egos=odd&split=each", `scenarios.select`), and sources joined by
';' are concatenated into one pool.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from ttlab.common.data import expand_shared
from ttlab.drive.scenarios.cache import INDEX, load_cache
from ttlab.drive.scenarios.crossing import crossing_scenes
from ttlab.drive.scenarios.procedural import generate_pool_scenarios
from ttlab.drive.scenarios.select import EgoSelection, select
from ttlab.drive.scenarios.source_text import as_bool, as_int, parse_items
from ttlab.drive.scenarios.types import Scenario, ScenarioPool
from ttlab.drive.scenarios.waymo_json import load_scenario


@dataclass
class ProceduralSpec:
    """A procedural pool: n scenes cycling through `families`, deterministic per seed."""

    n: int = 100
    seed: int = 0
    families: tuple[str, ...] = ("straight", "intersection", "t_junction", "merge", "roundabout")
    agents: int = 12
    hidden_goal: bool = False
    styles: bool = False
    exits: int = 0
    """Hidden-goal candidate exits per vehicle (M); 0 = the family's default (2 for t_maze(_shown), else 3)."""

    @classmethod
    def parse(cls, text: str) -> ProceduralSpec:
        """'procedural' or 'procedural:n=100,seed=0,families=a+b,agents=12,hidden_goal=1,styles=0,exits=3'."""
        items = parse_items(text, "procedural", (f.name for f in fields(cls)), "procedural[:key=value,...]")
        spec = cls()
        for key, val in items.items():
            if key == "families":
                spec.families = tuple(val.split("+"))
            elif key in ("hidden_goal", "styles"):
                setattr(spec, key, as_bool(val))
            else:
                setattr(spec, key, as_int(text, key, val))
        return spec

    def scenes(self) -> list[Scenario]:
        return generate_pool_scenarios(self.n, self.seed, self.families, self.agents,
                                       hidden_goal=self.hidden_goal, styles=self.styles,
                                       num_candidates=self.exits or None)


def _check(sc: Scenario) -> None:
    """Shapes of one scene agree with its agent, step and segment counts (error names scene and field)."""
    N, T, S = sc.num_agents, sc.num_steps, sc.num_segments
    want = {"pos": (N, T, 2), "heading": (N, T), "vel": (N, T, 2), "valid": (N, T), "length": (N,), "width": (N,),
            "agent_type": (N,), "goal": (N, 2), "expert": (N,), "seg": (S, 4), "seg_type": (S,), "seg_road": (S,)}
    for name, shape in want.items():
        got = tuple(np.shape(getattr(sc, name)))
        if got != shape:
            raise ValueError(f"scene {sc.name!r}: field {name} has shape {got}, expected {shape}")
    if sc.route is not None and (sc.route.ndim != 3 or sc.route.shape[0] != N or sc.route.shape[2] != 2):
        raise ValueError(f"scene {sc.name!r}: field route has shape {sc.route.shape}, expected ({N}, R, 2)")
    if sc.goal_candidates is not None and (sc.goal_candidates.ndim != 3 or sc.goal_candidates.shape[0] != N
                                           or sc.goal_candidates.shape[2] != 2):
        raise ValueError(f"scene {sc.name!r}: field goal_candidates has shape {sc.goal_candidates.shape}, "
                         f"expected ({N}, M, 2)")
    if sc.style_pos is not None:
        Y = len(sc.style_names)
        for name, shape in (("style_pos", (Y, N, T, 2)), ("style_heading", (Y, N, T)), ("style_vel", (Y, N, T, 2)),
                            ("style_valid", (Y, N, T))):
            got = tuple(np.shape(getattr(sc, name)))
            if got != shape:
                raise ValueError(f"scene {sc.name!r}: field {name} has shape {got}, expected {shape}")


def _all_or_none(scenes: list[Scenario], name: str) -> bool:
    have = [getattr(s, name) is not None for s in scenes]
    if any(have) and not all(have):
        missing = [s.name for s, h in zip(scenes, have, strict=True) if not h][:3]
        raise ValueError(f"build_pool: some scenes have {name} and some do not (e.g. {missing}); "
                         f"a pool needs it in every scene or in none")
    return all(have)


def build_pool(scenarios: list[Scenario], device: torch.device | str = "cpu", max_agents: int | None = None,
               max_segments: int | None = None) -> ScenarioPool:
    """Pad P scenes to common N agents, T steps, S segments (padding: valid/exists False, type 0).

    max_agents / max_segments fix N / S (an error names a scene that exceeds them). Routes are kept when
    every scene has one (padded by repeating each route's end), else dropped; goal candidates and style
    logs must be in every scene or in none."""
    if not scenarios:
        raise ValueError("build_pool: no scenes")
    for sc in scenarios:
        _check(sc)
    dts = {float(s.dt) for s in scenarios}
    if len(dts) > 1:
        raise ValueError(f"build_pool: scenes disagree on dt: {sorted(dts)}")
    P = len(scenarios)
    N = max(s.num_agents for s in scenarios)
    S = max(max(s.num_segments for s in scenarios), 1)
    T = max(s.num_steps for s in scenarios)
    for limit, have, what in ((max_agents, N, "agents"), (max_segments, S, "segments")):
        if limit is not None and have > limit:
            worst = max(scenarios, key=lambda s: s.num_agents if what == "agents" else s.num_segments)
            raise ValueError(f"build_pool: scene {worst.name!r} has {have} {what} > max_{what}={limit}")
    N = max_agents or N
    S = max_segments or S

    def pad(get, shape, dtype, fill=0):
        out = np.full((P, *shape), fill, dtype=dtype)
        for i, s in enumerate(scenarios):
            a = np.asarray(get(s))
            out[(i, *tuple(slice(0, d) for d in a.shape))] = a
        return torch.as_tensor(out, device=device)

    pool = ScenarioPool(
        names=[s.name for s in scenarios],
        pos=pad(lambda s: s.pos, (N, T, 2), np.float32),  # (P, N, T, 2)
        heading=pad(lambda s: s.heading, (N, T), np.float32),  # (P, N, T)
        vel=pad(lambda s: s.vel, (N, T, 2), np.float32),  # (P, N, T, 2)
        valid=pad(lambda s: s.valid, (N, T), bool, False),  # (P, N, T)
        exists=pad(lambda s: np.ones(s.num_agents, bool), (N,), bool, False),  # (P, N)
        length=pad(lambda s: s.length, (N,), np.float32),
        width=pad(lambda s: s.width, (N,), np.float32),
        agent_type=pad(lambda s: s.agent_type.astype(np.int64), (N,), np.int64),
        goal=pad(lambda s: s.goal, (N, 2), np.float32),  # (P, N, 2)
        expert=pad(lambda s: s.expert, (N,), bool, False),
        seg=pad(lambda s: s.seg, (S, 4), np.float32),  # (P, S, 4)
        seg_type=pad(lambda s: s.seg_type.astype(np.int64), (S,), np.int64),  # (P, S)
        num_segments=torch.as_tensor([s.num_segments for s in scenarios], dtype=torch.long, device=device),
        dt=dts.pop(),
    )
    if all(s.route is not None for s in scenarios):
        R = max(s.route.shape[1] for s in scenarios)
        rt = np.zeros((P, N, R, 2), np.float32)
        for i, s in enumerate(scenarios):
            r = s.route
            rt[i, : r.shape[0], : r.shape[1]] = r
            rt[i, : r.shape[0], r.shape[1]:] = r[:, -1:]
        pool.route = torch.as_tensor(rt, device=device)  # (P, N, R, 2)
    if _all_or_none(scenarios, "goal_candidates"):
        M = max(s.goal_candidates.shape[1] for s in scenarios)
        pool.goal_candidates = pad(lambda s: s.goal_candidates, (N, M, 2), np.float32)  # (P, N, M, 2)
    if _all_or_none(scenarios, "style_pos"):
        names = {s.style_names for s in scenarios}
        if len(names) > 1:
            raise ValueError(f"build_pool: scenes disagree on style_names: {sorted(names)}")
        Y = len(names.pop())
        pool.style_pos = pad(lambda s: s.style_pos, (Y, N, T, 2), np.float32)  # (P, Y, N, T, 2)
        pool.style_heading = pad(lambda s: s.style_heading, (Y, N, T), np.float32)
        pool.style_vel = pad(lambda s: s.style_vel, (Y, N, T, 2), np.float32)
        pool.style_valid = pad(lambda s: s.style_valid, (Y, N, T), bool, False)
    return pool


def load_scenarios(source: str | Path | ProceduralSpec) -> list[Scenario]:
    """Scenes from a procedural spec, a crossing spec ('crossing:n=..,seed=..'), a cache directory (index.json), a
    JSON directory or one JSON file; several sources joined by ';' are concatenated, and a file or directory source
    may carry ego options after '?' (`scenarios.select`: which vehicles drive, one scene per ego, local views,
    repetition). A source that yields no scene is an error naming it."""
    scenes = _load_scenarios(source)
    if not scenes:
        raise ValueError(f"scenario source {str(source)!r}: no scenes (e.g. n=0, or ego options that select none)")
    return scenes


def _load_scenarios(source: str | Path | ProceduralSpec) -> list[Scenario]:
    if isinstance(source, ProceduralSpec):
        return source.scenes()
    if isinstance(source, str) and ";" in source:
        return [sc for part in source.split(";") if part.strip() for sc in _load_scenarios(part.strip())]
    if isinstance(source, str) and "?" in source and not source.startswith("procedural"):
        path, _, query = source.partition("?")
        return select(_load_scenarios(path), EgoSelection.parse(query, source))
    if isinstance(source, str) and source.split(":", 1)[0] == "procedural":
        return ProceduralSpec.parse(source).scenes()
    if isinstance(source, str) and source.split(":", 1)[0] == "crossing":  # the partner-adaptation family

        return crossing_scenes(source)
    path = Path(expand_shared(str(source)))
    if path.is_dir():
        if (path / INDEX).is_file():
            return load_cache(path)

        files = sorted(path.glob("*.json"))
        if not files:
            raise FileNotFoundError(f"{path}: no *.json scenes and no {INDEX} (not a scenario directory or cache)")
        return [load_scenario(f) for f in files]
    if path.is_file():
        return [load_scenario(path)]
    raise FileNotFoundError(f"scenario source not found: {source} (a directory, a .json file or 'procedural:...')")


def load_pool(source: str | Path | ProceduralSpec, device: torch.device | str = "cpu",
              max_agents: int | None = None, max_segments: int | None = None) -> ScenarioPool:
    """`load_scenarios(source)` padded into a pool on `device`."""
    return build_pool(load_scenarios(source), device, max_agents, max_segments)
