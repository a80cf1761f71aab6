"""Proposers: given states from the tree, produce programs to run in the sandbox.

One interface, `Proposer.propose(states, n) -> list[Proposal]` (n proposals per state, grouped by
state id for the advantage estimator). The LLM proposer lives in `ttlab.discover.llm`; here is the offline
`LibraryProposer`: real optimiser programs per task (`ttlab/discover/library/<task>_*.py`) whose
`SETTINGS` dict is mutated per proposal, so the whole loop PUCT -> propose -> sandbox -> verify -> tree
runs without a model.
"""

from __future__ import annotations

import ast
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import ttlab.discover.blocks  # noqa: F401  registers `erdos_blocks` so library programs also run in-process
from ttlab.discover.puct import Node

LIBRARY = Path(__file__).with_name("library")
_SETTINGS_LINE = re.compile(r"^SETTINGS = (\{.*\})\s*$", re.M)


@dataclass
class Proposal:
    """One program to run from one state."""

    state_id: str
    code: str
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form: program name and settings here; prompt, tokens, logprobs for the LLM proposer."""


class Proposer(ABC):
    @abstractmethod
    def propose(self, states: list[Node], n: int) -> list[Proposal]:
        """`n` proposals for each state, in state order."""

    def close(self) -> None:  # noqa: B027  optional hook
        """Release resources (models, servers)."""


def library_programs(task: str) -> dict[str, str]:
    """name -> source of every library program for `task`: its own (`library/<task>_<name>.py`) and its family's
    shared ones (`library/<family>_<name>.py`, e.g. `ac_local.py` for ac1 and ac2)."""
    out = {p.stem[len(task) + 1:]: p.read_text() for p in sorted(LIBRARY.glob(f"{task}_*.py"))}
    family = {"ac1": "ac", "ac2": "ac", "circle26": "circle", "circle32": "circle"}.get(task)
    if family:  # shared programs, specialised by the task name in SETTINGS when they have one
        for p in sorted(LIBRARY.glob(f"{family}_*.py")):
            src = p.read_text()
            if '"task": ' in src:
                src = src.replace('"task": "ac1"', f'"task": "{task}"')
            out[p.stem[len(family) + 1:]] = src
    if not out:
        raise ValueError(f"no library programs for task {task!r} in {LIBRARY}")
    return out


def read_settings(src: str) -> dict[str, Any]:
    m = _SETTINGS_LINE.search(src)
    if not m:
        raise ValueError("library program has no one-line `SETTINGS = {...}`")
    return ast.literal_eval(m.group(1))


def mutate(settings: dict[str, Any], rng: np.random.Generator, scale: float = 0.5) -> dict[str, Any]:
    """Log-normal jitter of positive numbers (ints stay ints >= 1); other values kept; keys ending in
    `_choices` are lists to pick the matching key's value from."""
    out: dict[str, Any] = {}
    for k, v in settings.items():
        if k.endswith("_choices"):
            continue
        choices = settings.get(k + "_choices")
        if choices:  # one choice: a setting only a pin changes (no draw, so the stream stays as it was)
            out[k] = choices[0] if len(choices) == 1 else choices[int(rng.integers(len(choices)))]
        elif isinstance(v, bool):
            out[k] = bool(rng.integers(2)) if k.startswith("flip_") else v
        elif isinstance(v, str):
            out[k] = v
        elif isinstance(v, int) and v > 0:
            out[k] = max(1, int(round(v * float(np.exp(scale * rng.standard_normal())))))
        elif isinstance(v, float) and v > 0:
            out[k] = float(v * np.exp(scale * rng.standard_normal()))
        else:
            out[k] = v
    return out


def render(src: str, settings: dict[str, Any]) -> str:
    return _SETTINGS_LINE.sub(lambda _: "SETTINGS = " + repr(settings), src, count=1)


class LibraryProposer(Proposer):
    """Picks a library program per proposal (uniformly, or by `weights`) and mutates its settings; `pinned`
    settings ({program: {key: value}}) override the mutated ones."""

    def __init__(self, task: str, seed: int = 0, weights: dict[str, float] | None = None,
                 pinned: dict[str, dict] | None = None) -> None:
        self.pinned = pinned or {}
        self.programs = library_programs(task)
        self.names = list(self.programs)
        w = np.array([(weights or {}).get(n, 1.0) for n in self.names], dtype=np.float64)
        self.p = w / w.sum()
        self.rng = np.random.default_rng(seed)

    def propose(self, states: list[Node], n: int) -> list[Proposal]:
        out = []
        for s in states:
            for _ in range(n):
                name = self.names[int(self.rng.choice(len(self.names), p=self.p))]
                src = self.programs[name]
                settings = mutate(read_settings(src), self.rng) | self.pinned.get(name, {})
                out.append(Proposal(s.id, render(src, settings), {"program": name, "settings": settings}))
        return out
