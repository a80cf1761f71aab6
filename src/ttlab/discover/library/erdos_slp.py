"""Erdős minimum overlap: sequential linear programming (scipy.optimize.linprog / HiGHS).

Around h, each near-active lag's correlation is linearised; the LP minimises the max of them within a
trust region |d| <= delta, keeping sum h = n/2 and 0 <= h <= 1. A step is kept only when the true C5
drops; otherwise the trust region shrinks.
"""
import time

import numpy as np
from scipy.optimize import linprog

SETTINGS = {"delta": 0.02, "margin": 0.004, "shrink": 0.5, "grow": 1.5, "upsample": 1, "upsample_choices": [1, 1, 1, 2], "max_n": 800}


def corr(h):
    n = h.size
    return np.correlate(h, 1.0 - h, "full") * 2.0 / n


def jacobian_rows(h, lags):
    """d c_m / d h_j for the given lag indices m (rows)."""
    n = h.size
    u = 1.0 - h
    j = np.arange(n)[None, :]
    m = np.asarray(lags)[:, None]
    i1 = j - m + n - 1
    i2 = j + m - n + 1
    a = np.where((i1 >= 0) & (i1 < n), u[np.clip(i1, 0, n - 1)], 0.0)
    b = np.where((i2 >= 0) & (i2 < n), h[np.clip(i2, 0, n - 1)], 0.0)
    return (a - b) * 2.0 / n


def solve(parent, budget_s, seed):
    s = SETTINGS
    h = np.asarray(parent, dtype=np.float64) if parent is not None else np.full(200, 0.5)
    if s["upsample"] > 1 and h.size * s["upsample"] <= s["max_n"]:
        h = np.repeat(h, s["upsample"])
    n = h.size
    h = np.clip(h * (n / 2) / h.sum(), 0, 1)
    h = h * (n / 2) / h.sum()
    delta = s["delta"]
    t0 = time.time()
    cur = corr(h).max()
    steps = 0
    while time.time() - t0 < 0.8 * budget_s and delta > 1e-7:
        c = corr(h)
        lags = np.nonzero(c >= c.max() - s["margin"])[0]
        J = jacobian_rows(h, lags)
        # variables [d (n), t]; minimise t; c_m + J_m d - t <= 0
        A = np.hstack([J, -np.ones((lags.size, 1))])
        b = -c[lags]
        Aeq = np.hstack([np.ones((1, n)), np.zeros((1, 1))])
        bounds = [(max(-delta, -x), min(delta, 1.0 - x)) for x in h] + [(None, None)]
        cost = np.zeros(n + 1)
        cost[-1] = 1.0
        res = linprog(cost, A_ub=A, b_ub=b, A_eq=Aeq, b_eq=[0.0], bounds=bounds, method="highs")
        if res.status != 0:
            delta *= s["shrink"]
            continue
        cand = np.clip(h + res.x[:n], 0.0, 1.0)
        cand = cand * (n / 2) / cand.sum()
        if cand.max() > 1.0:
            delta *= s["shrink"]
            continue
        val = corr(cand).max()
        steps += 1
        if val < cur:
            h, cur = cand, val
            delta = min(0.2, delta * s["grow"])
        else:
            delta *= s["shrink"]
    print(f"slp: n={n} lp_steps={steps} C5={cur:.9f} delta={delta:.2e}")
    return h
