"""Circle packing in the unit square: n disjoint circles, maximise the sum of radii (n = 26, 32).

A construction is an (n, 3) array of rows (x, y, r). Validity is decided in EXACT rational arithmetic on
the returned floats (no tolerance): r >= 0, r <= x <= 1 - r, r <= y <= 1 - r, and for every pair
(x_i - x_j)^2 + (y_i - y_j)^2 >= (r_i + r_j)^2. Programs should leave a tiny slack (e.g. r *= 1 - 1e-12).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ttlab.discover.tasks.base import Task, VerifyResult, as_float_array, invalid

BEST_KNOWN = {26: 2.635, 32: 2.937}
"""AlphaEvolve (2025) values (later work reports small improvements: 26 -> ~2.6359, 32 -> ~2.939)."""


def exact_violation(c: np.ndarray) -> str:
    """'' when the packing is exactly valid, else the first violated constraint."""
    fr = [[Fraction(float(v)) for v in row] for row in c]
    for i, (x, y, r) in enumerate(fr):
        if r < 0:
            return f"circle {i}: negative radius"
        if x - r < 0 or x + r > 1 or y - r < 0 or y + r > 1:
            return f"circle {i} leaves the unit square (exact)"
    for i in range(len(fr)):
        xi, yi, ri = fr[i]
        for j in range(i + 1, len(fr)):
            xj, yj, rj = fr[j]
            if (xi - xj) ** 2 + (yi - yj) ** 2 < (ri + rj) ** 2:
                return f"circles {i} and {j} overlap (exact)"
    return ""


class CirclePackingTask(Task):
    higher_is_better = True

    def __init__(self, n: int = 26) -> None:
        if n not in BEST_KNOWN:
            raise ValueError(f"circle packing: n must be one of {sorted(BEST_KNOWN)}, got {n}")
        self.n = n
        self.name = f"circle{n}"
        self.best_known = BEST_KNOWN[n]
        self.best_known_source = "AlphaEvolve (2025)"

    def problem_statement(self) -> str:
        return (f"# Circle packing\n\nPlace {self.n} disjoint circles inside the unit square maximising the sum of "
                f"their radii. Return an ({self.n}, 3) array of rows (x, y, r). Validity is checked in exact "
                f"arithmetic with no tolerance. Best known: {self.best_known} (AlphaEvolve).\n\n"
                + self.program_contract())

    def initial_states(self, rng: np.random.Generator, k: int) -> list[np.ndarray]:
        out = []
        side = int(np.ceil(np.sqrt(self.n)))
        for _ in range(k):
            cells = rng.permutation(side * side)[: self.n]
            x = (cells % side + 0.5) / side
            y = (cells // side + 0.5) / side
            r = np.full(self.n, 0.5 / side * (1 - 1e-9))
            out.append(np.stack([x, y, r], axis=1))
        return out

    def normal_forms(self, construction: np.ndarray) -> list[np.ndarray]:
        """The circles in a canonical order (by x, then y, rounded to 1e-9 so float noise cannot reorder them),
        under each of the 8 symmetries of the square (the identity first): order and symmetry change neither
        validity nor the sum of radii."""
        c = np.asarray(construction, dtype=np.float64)
        x, y, r = c[:, 0], c[:, 1], c[:, 2]
        out = []
        for u, v in ((x, y), (1 - x, y), (x, 1 - y), (1 - x, 1 - y), (y, x), (1 - y, x), (y, 1 - x), (1 - y, 1 - x)):
            order = np.lexsort((np.round(v, 9), np.round(u, 9)))
            out.append(np.stack([u[order], v[order], r[order]], axis=1))
        return out

    def verify(self, output: Any, reported_score: float | None = None) -> VerifyResult:
        c, why = as_float_array(output, "circles")
        if c is None:
            return invalid(why)
        if c.shape != (self.n, 3):
            return invalid(f"circles must have shape ({self.n}, 3), got {c.shape}")
        bad = exact_violation(c)
        if bad:
            return invalid(bad)
        s = float(c[:, 2].sum())
        res = VerifyResult(True, s, s, {"n": float(self.n)}, f"sum of radii = {s:.9f} (n={self.n})", c)
        return self.with_reported(res, reported_score)
