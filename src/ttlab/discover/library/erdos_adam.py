"""Erdős minimum overlap: projected Adam on a smooth-max (log-sum-exp) surrogate of C5.

h stays in {0 <= h <= 1, sum h = n/2} by Euclidean projection (bisection on a shift); the temperature of
the smooth max is annealed so the surrogate approaches the true max over lags.
"""
import time

import numpy as np

SETTINGS = {"lr": 0.002, "tau0": 0.002, "tau1": 0.00002, "upsample": 1, "upsample_choices": [1, 1, 1, 2], "noise": 0.002, "max_n": 800}


def project(y, mass):
    lo, hi = y.min() - 1.0, y.max()
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if np.clip(y - mid, 0.0, 1.0).sum() > mass:
            lo = mid
        else:
            hi = mid
    return np.clip(y - 0.5 * (lo + hi), 0.0, 1.0)


def c5(h):
    n = h.size
    return np.max(np.correlate(h, 1.0 - h, "full")) * 2.0 / n


def grad_smooth_max(h, tau):
    n = h.size
    c = np.correlate(h, 1.0 - h, "full") * 2.0 / n  # (2n-1,)
    z = (c - c.max()) / tau
    w = np.exp(z)
    w /= w.sum()
    u = 1.0 - h
    g1 = np.convolve(w, u)[n - 1:2 * n - 1]
    g2 = np.correlate(w, h, "full")[n - 1:2 * n - 1][::-1]
    return (g1 - g2) * 2.0 / n


def solve(parent, budget_s, seed):
    rng = np.random.default_rng(seed)
    s = SETTINGS
    h = np.asarray(parent, dtype=np.float64) if parent is not None else rng.uniform(0, 1, 200)
    if s["upsample"] > 1 and h.size * s["upsample"] <= s["max_n"]:
        h = np.repeat(h, s["upsample"])
    n = h.size
    h = project(np.clip(h * (n / 2) / h.sum(), 0, 1) + s["noise"] * rng.standard_normal(n), n / 2)
    best, best_h = c5(h), h.copy()
    m, v = np.zeros(n), np.zeros(n)
    t0, it = time.time(), 0
    deadline = t0 + 0.85 * budget_s
    while time.time() < deadline:
        frac = min(1.0, (time.time() - t0) / (0.85 * budget_s))
        tau = s["tau0"] * (s["tau1"] / s["tau0"]) ** frac
        g = grad_smooth_max(h, tau)
        it += 1
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        step = s["lr"] * (1 - frac) + 1e-5
        h = project(h - step * (m / (1 - 0.9 ** it)) / (np.sqrt(v / (1 - 0.999 ** it)) + 1e-12), n / 2)
        val = c5(h)
        if val < best:
            best, best_h = val, h.copy()
    print(f"adam: n={n} iters={it} C5={best:.9f}")
    return best_h
