"""The task interface: what a discovery problem tells the prompt, where the search starts, and how a
returned construction is verified.

A construction is ONE float array handed back by a sandboxed program (Erdős: h of shape (n,); AC1/AC2:
f of shape (n,); circle packing: (n, 3) rows of (x, y, r)). `verify` recomputes every number from that
array; a score the program reports is only compared with the recomputed one (`metrics["reported_gap"]`),
never used. `normal_forms` says when two constructions are the same one (the provenance check, see
`ttlab.discover.provenance`); `references` lists the published constructions the task knows.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_ELEMENTS = 1_000_000
"""Largest construction any task accepts (elements); bigger arrays are rejected before any arithmetic."""
COPY_TOL = 1e-12
"""Two normalised constructions of the same shape whose largest absolute difference is at most this are the
same construction."""


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of verifying one returned construction."""

    valid: bool
    """True when the construction satisfies every constraint of the task."""
    score: float
    """The task's objective recomputed from the construction (nan when invalid)."""
    reward: float
    """Training signal, higher is better (0.0 when invalid)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Extra numbers (e.g. n, max violation, reported_gap)."""
    message: str = ""
    """Why it is invalid, or a one-line summary when valid."""
    construction: np.ndarray | None = None
    """The normalised construction that was scored (e.g. the rescaled h), None when invalid."""


def invalid(message: str, **metrics: float) -> VerifyResult:
    return VerifyResult(False, float("nan"), 0.0, dict(metrics), message, None)


def as_float_array(output: Any, name: str = "construction") -> tuple[np.ndarray | None, str]:
    """Coerce a returned object to a finite float64 array, or say why not (no exceptions escape)."""
    if output is None:
        return None, f"{name} is None"
    if isinstance(output, np.ndarray) and output.dtype == object:
        return None, f"{name} has dtype object (wrong types)"
    try:
        arr = np.asarray(output)
    except Exception as e:  # ragged lists, exotic objects
        return None, f"{name} is not array-like ({type(e).__name__}: {e})"[:300]
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        return None, f"{name} has dtype {arr.dtype} (need real numbers)"
    if arr.size > MAX_ELEMENTS:
        return None, f"{name} has {arr.size} elements (limit {MAX_ELEMENTS})"
    arr = arr.astype(np.float64, copy=True)
    if not np.all(np.isfinite(arr)):
        return None, f"{name} contains NaN or inf"
    return arr, ""


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def coarsest_steps(x: np.ndarray, tol: float = COPY_TOL) -> np.ndarray:
    """The same step function on the fewest equal pieces: when x (n,) is constant within `tol` on every block
    of d consecutive pieces, for the largest such divisor d of n, its (n/d,) block means; else a copy of x."""
    n = x.shape[0]
    for d in reversed(_divisors(n)):
        if d == 1:
            break
        b = x.reshape(n // d, d)
        if float(np.max(b.max(axis=1) - b.min(axis=1))) <= tol:
            return b.mean(axis=1)
    return np.array(x, dtype=np.float64)


class Task(ABC):
    """A discovery problem. Subclasses are cheap to construct and hold no mutable state."""

    name: str = ""
    """Registry name, e.g. `erdos`."""
    higher_is_better: bool = False
    """Direction of `score` (reward is always higher-is-better)."""
    best_known: float = float("nan")
    """Best published score (with `best_known_source`)."""
    best_known_source: str = ""

    @abstractmethod
    def problem_statement(self) -> str:
        """Markdown text for the prompt: the problem, the objective, and the program contract."""

    @abstractmethod
    def initial_states(self, rng: np.random.Generator, k: int) -> list[np.ndarray]:
        """`k` starting constructions (valid ones) for the search tree's roots."""

    @abstractmethod
    def verify(self, output: Any, reported_score: float | None = None) -> VerifyResult:
        """Recompute the score from `output`; never trust `reported_score` (only compare it)."""

    def normal_forms(self, construction: np.ndarray) -> list[np.ndarray]:
        """A valid construction as the verifier normalises it (first) and its images under the symmetries that
        leave the score unchanged. Two constructions are the same when the first form of one equals (within
        COPY_TOL) any form of the other. Default: the construction itself, no symmetry."""
        return [np.asarray(construction, dtype=np.float64)]

    def references(self) -> list[tuple[str, np.ndarray]]:
        """(name, construction) of every published construction the task knows (none by default)."""
        return []

    # ---- shared helpers ----
    def better(self, a: float, b: float) -> bool:
        """Is score `a` strictly better than score `b`?"""
        if math.isnan(a):
            return False
        if math.isnan(b):
            return True
        return a > b if self.higher_is_better else a < b

    def program_contract(self) -> str:
        """The contract every program must follow (shared by all tasks)."""
        return (
            "Write a complete Python program that defines\n\n"
            "    def solve(parent, budget_s, seed):\n"
            "        ...\n"
            "        return construction\n\n"
            "`parent` is the current construction as a numpy float64 array (or None), `budget_s` the wall-clock "
            "seconds you may spend, `seed` an int for your RNG. Return the new construction as a numpy array "
            "(or a dict {'construction': array}). numpy and scipy are available; there is no network and no "
            "GPU. The score is recomputed from your array by the verifier; any score you print or return is "
            "ignored."
        )

    def with_reported(self, res: VerifyResult, reported_score: float | None) -> VerifyResult:
        """Attach the gap between a program's claimed score and the recomputed one (information only)."""
        if reported_score is None or not res.valid:
            return res
        try:
            gap = float(reported_score) - res.score
        except (TypeError, ValueError):
            gap = float("nan")
        return VerifyResult(res.valid, res.score, res.reward, {**res.metrics, "reported_gap": gap},
                            res.message, res.construction)
