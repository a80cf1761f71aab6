"""Which vehicles of a logged scene drive: ego splits, one scene per ego, local views, repetition.

A real scene (a WOMD or CARLA export) is one map with many logged vehicles. To train on some of its vehicles and
evaluate on the others, and to evaluate one ego at a time as the human-replay protocol does, a scene source may
carry options after a `?`:

    town02.json?egos=even                   vehicles 0, 2, 4, ... may be controlled; the others replay their logs
    town02.json?egos=odd&split=each         one scene per odd vehicle, that vehicle the only one controlled
    town02.json?egos=even&split=each&view=8&repeat=16
                                            ... each cropped to the ego and its 7 nearest others, listed 16 times

egos: all | even | odd | i+j+k (indices into the file's objects); a vehicle outside the set is marked
`expert` (it replays its log, as PufferDrive's `mark_as_expert`). split: whole (default) | each. view: with
split=each, keep the ego and its view-1 nearest others by closest logged approach (0 = everyone). repeat: list
the resulting scenes this many times (a weight when the source is mixed with others: "a;b" concatenates).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ttlab.drive.scenarios.types import Scenario

SPLITS = ("whole", "each")


@dataclass(frozen=True)
class EgoSelection:
    """Options of a scene source after its `?` (see the module docstring)."""

    egos: str = "all"
    split: str = "whole"
    view: int = 0
    repeat: int = 1

    @classmethod
    def parse(cls, query: str, source: str) -> EgoSelection:
        """'egos=odd&split=each&view=8&repeat=4' -> EgoSelection; a bad key or value names the source."""
        out = cls()
        for item in filter(None, query.split("&")):
            key, eq, val = item.partition("=")
            if not eq or key not in {f.name for f in dataclasses.fields(cls)}:
                raise ValueError(f"scene source {source!r}: bad option {item!r}; options: egos, split, view, repeat")
            if key in ("view", "repeat"):
                try:
                    n = int(val)
                except ValueError:
                    raise ValueError(f"scene source {source!r}: {key}={val!r} is not an integer") from None
                if n < (1 if key == "repeat" else 0) or (key == "view" and n == 1):
                    raise ValueError(f"scene source {source!r}: {key}={n} (repeat >= 1; view 0 or >= 2)")
                out = dataclasses.replace(out, **{key: n})
            elif key == "split":
                if val not in SPLITS:
                    raise ValueError(f"scene source {source!r}: split={val!r}, expected one of {SPLITS}")
                out = dataclasses.replace(out, split=val)
            else:
                egos_ok = val in ("all", "even", "odd") or all(p.isdigit() for p in val.split("+"))
                if not egos_ok:
                    raise ValueError(f"scene source {source!r}: egos={val!r}, expected all, even, odd or i+j+k")
                out = dataclasses.replace(out, egos=val)
        if out.view and out.split != "each":
            raise ValueError(f"scene source {source!r}: view= needs split=each (a view is centred on one ego)")
        return out


def ego_set(egos: str, n: int) -> np.ndarray:
    """(n,) bool: the objects `egos` names (all | even | odd | i+j+k)."""
    idx = np.arange(n)
    if egos == "all":
        return np.ones(n, bool)
    if egos == "even":
        return idx % 2 == 0
    if egos == "odd":
        return idx % 2 == 1
    want = {int(p) for p in egos.split("+")}
    return np.isin(idx, sorted(want))


def closest_approach(sc: Scenario, i: int) -> np.ndarray:
    """(N,) the smallest distance between object i's logged position and each object's at the same step (inf
    where they are never valid together; 0 for i itself)."""
    both = sc.valid[i][None] & sc.valid  # (N, T)
    d = np.linalg.norm(sc.pos - sc.pos[i][None], axis=-1)  # (N, T)
    return np.where(both, d, np.inf).min(1)


def subset(sc: Scenario, keep: np.ndarray, controllable: np.ndarray, name: str) -> Scenario:
    """The scene restricted to objects `keep` (index array, order kept), with `expert` set where not controllable."""
    out = dataclasses.replace(sc, name=name, metadata={**sc.metadata, "source_scene": sc.name})
    for f in ("pos", "heading", "vel", "valid", "length", "width", "agent_type", "goal", "route", "goal_candidates"):
        v = getattr(sc, f)
        if v is not None:
            setattr(out, f, v[keep])
    for f in ("style_pos", "style_heading", "style_vel", "style_valid"):
        v = getattr(sc, f)
        if v is not None:
            setattr(out, f, v[:, keep])
    out.expert = (sc.expert | ~controllable)[keep]
    return out


def select(scenes: list[Scenario], sel: EgoSelection) -> list[Scenario]:
    """Apply an ego selection to every scene (see the module docstring)."""
    out: list[Scenario] = []
    for sc in scenes:
        n = sc.num_agents
        chosen = ego_set(sel.egos, n)
        if sel.split == "whole":
            out.append(subset(sc, np.arange(n), chosen, f"{sc.name}?egos={sel.egos}"))
            continue
        for i in np.flatnonzero(chosen & ~sc.expert):
            only = np.arange(n) == i
            keep = np.arange(n)
            if sel.view and n > sel.view:
                keep = np.sort(np.argsort(closest_approach(sc, i), kind="stable")[: sel.view])
            out.append(subset(sc, keep, only, f"{sc.name}?ego={i}" + (f"&view={sel.view}" if sel.view else "")))
    return out * sel.repeat
