"""AC2 (maximise C2 = ||f*f||_2^2 / (||f*f||_1 ||f*f||_inf), f >= 0): smoothed ratio by L-BFGS-B, tau continuation.

The same machinery as `ac1_lse`: with g = f * f (the knot values of the piecewise-linear autoconvolution,
zero-padded G = [0, g, 0]), the exact pieces are
    L2 = sum_t (G_t^2 + G_t G_{t+1} + G_{t+1}^2) / 3,   L1 = sum g,   Linf = max g,
and max g is replaced by the soft maximum M = tau_g logsumexp(g / tau_g) >= max g, so the smoothed ratio
L2 / (L1 M) is a lower bound of C2. -log of it is minimised over f >= 0 with tau lowered in stages (tau in
units of max g, fixed within a stage); a penalty (sum f - n)^2 / n pins the scale, which C2 ignores.

Gradient of log V, V = L2 / (L1 M), with respect to g_m (interior knot t = m + 1):
    a_m = (4 G_t + G_{t-1} + G_{t+1}) / (3 L2) - 1 / L1 - w_m / M,   w = softmax(g / tau_g),
and dg_k / df_j = 2 f_{k-j}, so d log V / df_j = 2 correlate(a, f, 'valid')_j.
"""
import time

import numpy as np
from scipy.optimize import minimize
from scipy.signal import fftconvolve

SETTINGS = {"start": "parent", "start_choices": ["parent", "parent", "random"], "n0": 200, "n0_choices": [50, 100, 200, 400], "tau0": 0.01, "tau0_choices": [0.03, 0.01, 0.001, 0.0001], "tau_end": 1e-07, "factor": 0.3, "penalty": 10.0, "upsample": 1, "upsample_choices": [1, 1, 1, 2], "max_n": 6400, "maxcor": 30}


def conv(a, b):
    return fftconvolve(a, b) if a.size >= 1000 else np.convolve(a, b)


def c2(f):
    g = np.concatenate([[0.0], conv(f, f), [0.0]])
    l2 = np.sum(g[:-1] ** 2 + g[:-1] * g[1:] + g[1:] ** 2) / 3.0
    return float(l2 / (np.sum(g[:-1] + g[1:]) / 2.0 * g.max()))


def objective(f, tau_g, penalty):
    """(-log(L2 / (L1 M)) + penalty (S - n)^2 / n, gradient in f)."""
    n = f.size
    g = conv(f, f)
    G = np.concatenate([[0.0], g, [0.0]])
    l2 = np.sum(G[:-1] ** 2 + G[:-1] * G[1:] + G[1:] ** 2) / 3.0
    l1 = g.sum()
    top = g.max()
    e = np.exp((g - top) / tau_g)
    s = e.sum()
    m = top + tau_g * np.log(s)
    a = (4.0 * G[1:-1] + G[:-2] + G[2:]) / (3.0 * l2) - 1.0 / l1 - (e / s) / m
    da = 2.0 * (fftconvolve(a, f[::-1], "valid") if n >= 1000 else np.correlate(a, f, "valid"))
    ex = f.sum() - n
    return -np.log(l2 / (l1 * m)) + penalty * ex * ex / n, -da + 2.0 * penalty * ex / n


class _Timeout(Exception):
    pass


def stage(f, tau, penalty, deadline, maxcor):
    last = [f]
    tau_g = tau * float(conv(f, f).max())

    def fn(x):
        if time.time() > deadline:
            raise _Timeout
        last[0] = x
        return objective(x, tau_g, penalty)

    try:
        res = minimize(fn, f, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * f.size,
                       options={"maxiter": 100000, "maxcor": int(maxcor), "ftol": 1e-16, "gtol": 1e-14})
        return res.x
    except _Timeout:
        return last[0]


def solve(parent, budget_s, seed):
    rng = np.random.default_rng(seed)
    s = SETTINGS
    t0 = time.time()
    deadline = t0 + 0.85 * budget_s
    f = np.maximum(np.asarray(parent, dtype=np.float64), 0.0)
    if s["start"] == "random" or f.sum() <= 0:
        f = rng.random(int(s["n0"])) + 0.05
    if int(s["upsample"]) > 1 and f.size * int(s["upsample"]) <= int(s["max_n"]):
        f = np.repeat(f, int(s["upsample"]))
    f = f * (f.size / f.sum())
    best, best_v = f.copy(), c2(f)
    tau = float(s["tau0"])
    stages = max(1, int(np.ceil(np.log(tau / float(s["tau_end"])) / np.log(1.0 / float(s["factor"])))) + 1)
    for k in range(stages):  # each stage gets an equal share of the time left (L-BFGS would use it all)
        left = deadline - time.time()
        if left <= 0.05:
            break
        f = np.maximum(stage(f, tau, float(s["penalty"]), time.time() + left / (stages - k), s["maxcor"]), 0.0)
        v = c2(f)
        if v > best_v:
            best, best_v = f.copy(), v
        tau *= float(s["factor"])
    print(f"ac2_lse: n={best.size} C2={best_v:.9f} ({time.time() - t0:.1f}s)")
    return best
