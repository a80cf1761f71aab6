"""A search's best-score curve read as the figures read it: when a bound was first reached, the best by a time.

A curve is the search's list of points `{"t": wall s, "cpu_s": program CPU s, "best_score": ...}` in time order
(`run_search`'s `curve`); scores are lower-is-better.
"""

from __future__ import annotations

import math


def first_below(curve: list[dict], bound: float, key: str = "t") -> float | None:
    """The `key` clock (wall `t` or `cpu_s`) of the first point whose best score is at most `bound`, else None."""
    return next((round(p[key], 1) for p in curve if p["best_score"] <= bound), None)


def best_by(curve: list[dict], t: float) -> float | None:
    """The best score reached within t wall seconds (None before the first step ends)."""
    seen = [p["best_score"] for p in curve if p["t"] <= t and math.isfinite(p["best_score"])]
    return min(seen) if seen else None
