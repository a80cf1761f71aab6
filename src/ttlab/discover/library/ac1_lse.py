"""AC1 (minimise C1 = 2n max(f * f) / (sum f)^2, f >= 0): smoothed minimax by L-BFGS-B, tau continuation.

The same machinery as `erdos_lse`: max_k c_k (c = f * f, the discrete autoconvolution) is replaced by the soft
maximum tau_c logsumexp(c / tau_c) and minimised over f >= 0 with tau lowered in stages, each warm-started
from the last. The objective is scale-free, so a penalty (sum f - n)^2 / n pins the scale (it moves no
optimum). tau is given in units of C1 (tau_c = tau (sum f)^2 / (2n), fixed within a stage).

Gradient: dc_k/df_j = 2 f_{k-j}, so d(soft max)/df_j = 2 sum_m w_{j+m} f_m = 2 correlate(w, f, 'valid')_j with
w = softmax(c / tau_c); then through the ratio 2n M / S^2.
"""
import time

import numpy as np
from scipy.optimize import minimize
from scipy.signal import fftconvolve

SETTINGS = {"start": "parent", "start_choices": ["parent", "parent", "random"], "n0": 200, "n0_choices": [100, 200, 300, 600], "tau0": 0.001, "tau0_choices": [0.01, 0.001, 0.0001, 1e-05], "tau_end": 1e-09, "factor": 0.3, "penalty": 10.0, "upsample": 1, "upsample_choices": [1, 1, 1, 2], "max_n": 4000, "maxcor": 30}


def c1(f):
    n = f.size
    return 2.0 * n * float(np.max(np.convolve(f, f))) / float(f.sum()) ** 2


def objective(f, tau_c, penalty):
    """(2n M / S^2 + penalty (S - n)^2 / n, gradient), M = tau_c logsumexp(c / tau_c), S = sum f."""
    n = f.size
    c = fftconvolve(f, f) if n >= 1000 else np.convolve(f, f)
    top = c.max()
    e = np.exp((c - top) / tau_c)
    s = e.sum()
    w = e / s
    m = top + tau_c * np.log(s)
    dm = 2.0 * (fftconvolve(w, f[::-1], "valid") if n >= 1000 else np.correlate(w, f, "valid"))  # (n,)
    S = f.sum()
    val = 2.0 * n * m / S ** 2
    grad = 2.0 * n * dm / S ** 2 - 4.0 * n * m / S ** 3
    ex = S - n
    return val + penalty * ex * ex / n, grad + 2.0 * penalty * ex / n


class _Timeout(Exception):
    pass


def stage(f, tau, penalty, deadline, maxcor):
    last = [f]
    tau_c = tau * float(f.sum()) ** 2 / (2.0 * f.size)

    def fn(x):
        if time.time() > deadline:
            raise _Timeout
        last[0] = x
        return objective(x, tau_c, penalty)

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
        f = rng.random(int(s["n0"])) ** 2 + 0.05
    if int(s["upsample"]) > 1 and f.size * int(s["upsample"]) <= int(s["max_n"]):
        f = np.repeat(f, int(s["upsample"]))
    f = f * (f.size / f.sum())
    best, best_v = f.copy(), c1(f)
    tau = float(s["tau0"])
    while tau >= float(s["tau_end"]) and time.time() < deadline:
        f = stage(f, tau, float(s["penalty"]), deadline, s["maxcor"])
        f = np.maximum(f, 0.0)
        v = c1(f)
        if v < best_v:
            best, best_v = f.copy(), v
        tau *= float(s["factor"])
    print(f"ac1_lse: n={best.size} C1={best_v:.9f} ({time.time() - t0:.1f}s)")
    return best
