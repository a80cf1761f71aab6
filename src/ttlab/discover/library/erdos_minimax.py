"""Erdős minimum overlap: exact minimax steps by sequential LP with a cutting plane, plus multiresolution.

C5(h) = max_m c_m(h), c = np.correlate(h, 1 - h, "full") * 2/n. Around h each lag is linear in the step d up
to an O(|d|^2) term: c_m(h + d) = c_m(h) + J_m d - (2/n) (d * d)_m. One step solves the LP

    min t  s.t.  c_m + J_m d <= t  (m in the active set),  sum d = 0,  max(-delta, -h) <= d <= min(delta, 1 - h)

with HiGHS, then checks every lag at the solution and adds the ones the linear model violates, until none
is (so the step is the exact minimiser of the linear model over all 2n - 1 lags, not of a guessed subset).
A step is kept only when the true C5 drops; the trust region delta grows after a kept step and shrinks
otherwise. Around that core: random restarts at a small n, and refinement by upsampling (each piece split
in two, which leaves C5 unchanged) with a little noise, then polishing at the finer resolution.
"""
import time

import numpy as np
from scipy.optimize import linprog

SETTINGS = {"start": "parent", "start_choices": ["parent", "parent", "parent", "random"], "n0": 50, "n0_choices": [30, 40, 50, 60, 80], "refine": 1, "refine_choices": [0, 1, 1], "noise": 0.002, "delta": 0.02, "margin": 1e-6, "max_n": 600, "stage_s": 40.0, "restart_frac": 0.3}


def corr(h):
    """c_m for every lag m (2n - 1 values)."""
    n = h.size
    return np.correlate(h, 1.0 - h, "full") * 2.0 / n


def lin_all(h, d):
    """J d for every lag: the linear part of c(h + d) - c(h)."""
    n = h.size
    return (np.correlate(d, 1.0 - h, "full") - np.correlate(h, d, "full")) * 2.0 / n


def jac_rows(h, lags):
    """d c_m / d h_j for the given lags (rows)."""
    n = h.size
    u = 1.0 - h
    j = np.arange(n)[None, :]
    m = np.asarray(lags)[:, None]
    i1 = j - m + n - 1
    i2 = j + m - n + 1
    a = np.where((i1 >= 0) & (i1 < n), u[np.clip(i1, 0, n - 1)], 0.0)
    b = np.where((i2 >= 0) & (i2 < n), h[np.clip(i2, 0, n - 1)], 0.0)
    return (a - b) * 2.0 / n


def normalise(h):
    """Clip to [0, 1] and put the mass at n/2 (scaling down can only help the upper bound)."""
    n = h.size
    h = np.clip(h, 0.0, 1.0)
    h = h * (n / 2) / h.sum()
    while h.max() > 1.0:  # too much mass near the top: clip and spread the excess over the rest
        h = np.clip(h, 0.0, 1.0)
        free = h < 1.0
        h[free] += (n / 2 - h.sum()) / free.sum()
    return np.clip(h, 0.0, 1.0)


def lp_step(h, c, delta, margin, deadline, max_rounds=30):
    """The minimiser d of the linear model over all lags within the trust region (None if the LP fails)."""
    n = h.size
    active = set(np.nonzero(c >= c.max() - margin)[0].tolist())
    lo, hi = np.maximum(-delta, -h), np.minimum(delta, 1.0 - h)
    bounds = np.stack([np.append(lo, -np.inf), np.append(hi, np.inf)], axis=1)
    cost = np.zeros(n + 1)
    cost[-1] = 1.0
    a_eq = np.ones((1, n + 1))
    a_eq[0, -1] = 0.0
    for _ in range(max_rounds):
        left = deadline - time.time()
        if left < 0.5:
            return None
        lags = np.array(sorted(active))
        a_ub = np.hstack([jac_rows(h, lags), -np.ones((lags.size, 1))])
        res = linprog(cost, A_ub=a_ub, b_ub=-c[lags], A_eq=a_eq, b_eq=[0.0], bounds=bounds, method="highs",
                      options={"time_limit": left})
        if res.status != 0:
            return None
        d, t = res.x[:n], res.x[-1]
        model = c + lin_all(h, d)
        new = [m for m in np.nonzero(model > t + 1e-13)[0].tolist() if m not in active]
        if not new:
            return d
        active.update(new)
    return d


def polish(h, budget_s, delta, margin):
    """Trust-region SLP from h until budget_s or the trust region collapses; returns (h, C5, steps)."""
    t0 = time.time()
    h = normalise(h)
    cur = corr(h).max()
    steps = 0
    while time.time() - t0 < budget_s and delta > 1e-9:
        c = corr(h)
        d = lp_step(h, c, delta, margin, t0 + budget_s)
        if d is None and time.time() - t0 >= budget_s - 0.5:
            break
        if d is None:
            delta *= 0.5
            continue
        cand = normalise(h + d)
        val = corr(cand).max()
        steps += 1
        if val < cur:
            h, cur = cand, val
            delta = min(0.1, delta * 1.5)
        else:
            delta *= 0.5
    return h, cur, steps


def random_start(n, rng):
    """Zero margins at both ends (the published constructions are 0 on about a tenth of [0, 2] at each end),
    a random rough profile in between."""
    h = np.zeros(n)
    z = int(round(n * rng.uniform(0.06, 0.16)))
    m = n - 2 * z
    h[z:z + m] = np.clip(rng.uniform(0.2, 1.0, m) + 0.3 * np.sin(np.linspace(0, np.pi, m)), 0, 1)
    return h


def solve(parent, budget_s, seed):
    s = SETTINGS
    rng = np.random.default_rng(seed)
    t0 = time.time()
    left = lambda: budget_s * 0.9 - (time.time() - t0)
    if parent is None or s["start"] == "random":  # multistart at n0, keep the best, then refine it
        best = None
        while best is None or time.time() - t0 < s["restart_frac"] * budget_s:
            h, cur, _ = polish(random_start(int(s["n0"]), rng), min(left(), s["stage_s"]), s["delta"], s["margin"])
            if best is None or cur < best[1]:
                best = (h, cur)
        h = best[0]
        refine = True
    else:
        h = np.asarray(parent, dtype=np.float64)
        refine = bool(s["refine"])
    log = []
    while True:
        h, cur, steps = polish(h, min(left(), s["stage_s"]), s["delta"], s["margin"])
        log.append(f"n={h.size} C5={cur:.10f} steps={steps}")
        if not refine or left() < 1.0 or 2 * h.size > s["max_n"]:
            break
        h = np.repeat(h, 2)
        h = h + s["noise"] * rng.standard_normal(h.size) * (h > 0) * (h < 1)
    print("minimax: " + "; ".join(log))
    return h
