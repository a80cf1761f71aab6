"""Circle packing: jitter the centres, then the best radii for fixed centres by linear programming.

For fixed centres, max sum r s.t. r_i + r_j <= |c_i - c_j|, r_i <= distance to each side, is an LP
(scipy.optimize.linprog / HiGHS). Centre moves are kept when the LP optimum improves; radii are shrunk by a
relative 1e-9 at the end so the exact (rational) non-overlap check passes.
"""
import time

import numpy as np
from scipy.optimize import linprog

SETTINGS = {"sigma": 0.02, "move_frac": 0.3, "anneal": 0.995}


def best_radii(xy):
    n = xy.shape[0]
    i, j = np.triu_indices(n, 1)
    d = np.sqrt(((xy[i] - xy[j]) ** 2).sum(1))
    A = np.zeros((i.size, n))
    A[np.arange(i.size), i] = 1.0
    A[np.arange(i.size), j] = 1.0
    ub = np.minimum.reduce([xy[:, 0], 1 - xy[:, 0], xy[:, 1], 1 - xy[:, 1]])
    if ub.min() <= 0:
        return None
    res = linprog(-np.ones(n), A_ub=A, b_ub=d, bounds=list(zip(np.zeros(n), ub, strict=True)), method="highs")
    return res.x if res.status == 0 else None


def solve(parent, budget_s, seed):
    rng = np.random.default_rng(seed)
    s = SETTINGS
    xy = np.asarray(parent, dtype=np.float64)[:, :2].copy()
    n = xy.shape[0]
    r = best_radii(xy)
    cur = r.sum() if r is not None else -1.0
    sigma, t0, tries = s["sigma"], time.time(), 0
    while time.time() - t0 < 0.8 * budget_s:
        tries += 1
        cand = xy.copy()
        mask = rng.random(n) < s["move_frac"]
        cand[mask] += sigma * rng.standard_normal((mask.sum(), 2))
        cand = np.clip(cand, 1e-6, 1 - 1e-6)
        rc = best_radii(cand)
        if rc is not None and rc.sum() > cur:
            xy, r, cur = cand, rc, rc.sum()
        sigma = max(1e-4, sigma * s["anneal"])
    r = np.maximum(r, 0.0) * (1 - 1e-9) - 1e-12
    print(f"circle_lp: n={n} tries={tries} sum_r={cur:.9f}")
    return np.column_stack([xy, np.maximum(r, 0.0)])
