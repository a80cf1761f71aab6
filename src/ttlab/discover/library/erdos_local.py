"""Erdős minimum overlap: stochastic local search with mass-preserving moves.

Moves: shift mass between two random pieces, or add a small smooth bump and its negative elsewhere;
a move is kept only when C5 does not increase (first-improvement with sideways steps).
"""
import time

import numpy as np

SETTINGS = {"step": 0.02, "width": 3, "p_pair": 0.6, "sideways": 0.1, "upsample": 1, "upsample_choices": [1, 1, 1, 2], "max_n": 800}


def c5(h):
    n = h.size
    return np.max(np.correlate(h, 1.0 - h, "full")) * 2.0 / n


def solve(parent, budget_s, seed):
    rng = np.random.default_rng(seed)
    s = SETTINGS
    h = np.asarray(parent, dtype=np.float64) if parent is not None else rng.uniform(0, 1, 200)
    if s["upsample"] > 1 and h.size * s["upsample"] <= s["max_n"]:
        h = np.repeat(h, s["upsample"])
    n = h.size
    h = np.clip(h * (n / 2) / h.sum(), 0, 1)
    h = h * (n / 2) / h.sum()
    cur = c5(h)
    best, best_h = cur, h.copy()
    t0, tries, kept = time.time(), 0, 0
    step = s["step"]
    while time.time() - t0 < 0.85 * budget_s:
        tries += 1
        cand = h.copy()
        i, j = rng.integers(n, size=2)
        amt = step * rng.standard_normal()
        if rng.random() < s["p_pair"]:
            cand[i] += amt
            cand[j] -= amt
        else:
            w = max(1, int(s["width"]))
            lo1, lo2 = max(0, i - w), max(0, j - w)
            seg = min(i + w + 1, n) - lo1
            seg = min(seg, min(j + w + 1, n) - lo2)
            bump = amt * np.hanning(seg + 2)[1:-1]
            cand[lo1:lo1 + seg] += bump
            cand[lo2:lo2 + seg] -= bump
        if cand.min() < 0.0 or cand.max() > 1.0:
            continue
        val = c5(cand)
        if val < cur or (val == cur and rng.random() < s["sideways"]):
            h, cur = cand, val
            kept += 1
            if cur < best:
                best, best_h = cur, h.copy()
        if tries % 2000 == 0:
            step *= 0.8 if kept < 20 else 1.1
            kept = 0
    print(f"local: n={n} tries={tries} C5={best:.9f}")
    return best_h
