"""Autocorrelation inequalities (AC1 and AC2): stochastic local search on the step heights.

The objective is chosen by `SETTINGS["task"]` (set by the proposer's file name); moves perturb a random
block of steps multiplicatively and are kept when the objective improves.
"""
import time

import numpy as np

SETTINGS = {"step": 0.1, "width": 4, "task": "ac1"}


def value(f, task):
    g = np.convolve(f, f)
    if task == "ac1":
        n = f.size
        w = 1.0 / (2 * n)
        return -np.max(g) * w / (np.sum(f) * w) ** 2
    g = np.concatenate([[0.0], g, [0.0]])
    l2 = np.sum(g[:-1] ** 2 + g[:-1] * g[1:] + g[1:] ** 2) / 3.0
    return l2 / (np.sum(g[:-1] + g[1:]) / 2.0 * g.max())


def solve(parent, budget_s, seed):
    rng = np.random.default_rng(seed)
    s = SETTINGS
    f = np.maximum(np.asarray(parent, dtype=np.float64), 0.0)
    n = f.size
    cur = value(f, s["task"])
    t0, tries = time.time(), 0
    while time.time() - t0 < 0.85 * budget_s:
        tries += 1
        i = int(rng.integers(n))
        w = max(1, int(s["width"]))
        cand = f.copy()
        cand[i:i + w] *= np.exp(s["step"] * rng.standard_normal(min(w, n - i)))
        v = value(cand, s["task"])
        if v > cur:
            f, cur = cand, v
    print(f"ac_local[{s['task']}]: n={n} tries={tries} value={abs(cur):.9f}")
    return f
