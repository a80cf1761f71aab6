"""Erdős minimum overlap: smoothed minimax by L-BFGS-B with temperature continuation.

C5(h) = max_m c_m(g), g = h (n/2) / sum(h) the rescaled h, is replaced by the soft maximum
tau * logsumexp(c(g) / tau) and minimised over the box 0 <= h <= 1 (L-BFGS-B bounds). The rescale is part
of the objective (exactly the verifier's), so the sum constraint needs no penalty; a quadratic penalty only
keeps the rescaled pieces <= 1. tau is lowered in stages, each stage warm-started from the last, so the soft
maximum approaches the true one; from a large tau the landscape is smooth enough that random rough starts
(`start: random`) land in good basins (graduated optimisation). Where the exact LP step (the `minimax`
program) stalls because hundreds of lags are active at once (its LP grows dense as n grows), the smoothed
problem costs two correlations per gradient, O(n^2) or O(n log n) by FFT, at any n, and keeps descending.

Hop mode (`hop_frac` > 0, parent starts): the parent block-averaged by `coarsen`, then monotone basin hopping
at that resolution for `hop_frac` of the budget (a random window of the best profile perturbed by Gaussian
noise, taken to its local optimum by a solve that stops on convergence, kept if it is lower), then doubled back
up to the parent's resolution, each level re-converged through the verifier's rescale. The coarse level is where
basins differ (the record's is visible from ~100 pieces); the fine levels only deepen the one found.
Random-start hop mode (`hop_frac` > 0, `start: random`): `ladder`, the same idea from nothing: Metropolis hops
at `n0` (~51 pieces, where one hop costs ~0.1 s), then doublings with monotone hops (see `ladder`).
`start: auto` (with `hop_frac` > 0) chooses per parent: the ladder when the parent's C5 is above `auto_above`
(a tree root, or any poor state: start over), hop mode otherwise (deepen a good one). One pinned setting then
serves a whole search: short ladders first, hop-refines of their results after.

Gradient of L = sum_m w_m c_m(g) (w = softmax(c / tau)), with k = m - (n - 1):
    dL/dg_j = (2/n) (sum_k w_k (1 - g)_{j-k} - sum_k w_k g_{j+k})
            = (2/n) (convolve(w, 1 - g)[j + n - 1] - correlate(g, w)[j + n - 1]),
    dL/dh   = (n/2) / sum(h) * (dL/dg - (dL/dg . g) / (n/2))       (through the rescale).
"""
import time
from fractions import Fraction

import numpy as np
from scipy.optimize import minimize
from scipy.signal import fftconvolve

FFT_N = 1000  # from here on the gradient's correlations go through the FFT (O(n log n); error ~1e-15)

SETTINGS = {"start": "parent", "start_choices": ["parent", "parent", "random"], "n0": 100, "n0_choices": [60, 80, 100, 100, 120], "tau0": 1e-06, "tau0_choices": [0.001, 0.0001, 1e-06, 1e-06, 1e-07], "tau_random": 0.01, "objective": "penalty", "tau_end": 1e-10, "factor": 0.3, "penalty": 1000.0, "upsample": 1, "upsample_choices": [1, 1, 1, 2], "max_n": 2400, "maxcor": 30, "coarsen": 1, "hop_frac": 0.0, "hop_sigma": 0.3, "hop_window": 0.15, "hop_ftol": 1e-11, "hop_T": 0.0, "hop_sym": 0.0, "levels": 2, "auto_above": 0.3812, "metro_frac": 0.0}


def corr(h):
    n = h.size
    return np.correlate(h, 1.0 - h, "full") * 2.0 / n


def normalise(h):
    """Clip to [0, 1] and rescale to sum n/2 (spreading any excess above 1 over the other pieces)."""
    n = h.size
    h = np.clip(h, 0.0, 1.0)
    h = h * (n / 2) / h.sum()
    while h.max() > 1.0:
        h = np.clip(h, 0.0, 1.0)
        free = h < 1.0
        h[free] += (n / 2 - h.sum()) / free.sum()
    return np.clip(h, 0.0, 1.0)


def exactly_feasible(h):
    """Add the exact shortfall n max(h)/2 - sum(h) (a rounding residue, ~1e-11 with pieces at 1) to the piece
    nearest 0.5, so that the verifier's exact check of max(rescaled h) <= 1 holds, not only its float one."""
    fr = [Fraction(float(x)) for x in h]
    need = h.size * max(fr) / 2 - sum(fr)
    if need <= 0:
        return h
    h = h.copy()
    j = int(np.argmin(np.abs(h - 0.5)))
    target = Fraction(float(h[j])) + need
    x = float(target)
    h[j] = x if Fraction(x) >= target else np.nextafter(x, 1.0)
    return h


def soft_max_and_grad(h, tau, penalty):
    """(tau logsumexp(c(h) / tau) + penalty (sum h - n/2)^2 / n, its gradient) on h as given (no rescale)."""
    n = h.size
    fft = n >= FFT_N
    c = fftconvolve(h, (1.0 - h)[::-1]) * 2.0 / n if fft else corr(h)
    top = c.max()
    e = np.exp((c - top) / tau)
    s = e.sum()
    w = e / s
    val = top + tau * np.log(s)
    if fft:
        g = fftconvolve(w, 1.0 - h)[n - 1:2 * n - 1] - fftconvolve(h, w[::-1])[n - 1:2 * n - 1]
    else:
        g = np.convolve(w, 1.0 - h)[n - 1:2 * n - 1] - np.correlate(h, w, "full")[n - 1:2 * n - 1]
    g = g * 2.0 / n
    excess = h.sum() - n / 2
    return val + penalty * excess * excess / n, g + 2.0 * penalty * excess / n


def scaled_objective(h, tau, penalty):
    """The soft maximum of c(g), g = h (n/2) / sum(h), plus penalty * sum(max(g - 1, 0)^2); gradient in h.

    The soft maximum is invariant to the scale of h; the last term, penalty (sum h - n/2)^2 / n, pins the
    scale (it moves no optimum) so that L-BFGS does not wander along a flat direction."""
    n = h.size
    a = n / 2
    total = h.sum()
    g = h * (a / total)
    val, dg = soft_max_and_grad(g, tau, 0.0)
    over = np.maximum(g - 1.0, 0.0)
    val = val + penalty * float(over @ over)
    dg = dg + 2.0 * penalty * over
    excess = total - a
    return val + penalty * excess * excess / n, (a / total) * (dg - (dg @ g) / a) + 2.0 * penalty * excess / n


class _Timeout(Exception):
    pass


def smooth(h, tau, penalty, deadline, maxcor, ftol=1e-16, objective=None):
    """One continuation stage from h; returns the last iterate (also when the deadline cuts it short).

    objective "penalty": the soft max of c(h) with (sum h - n/2)^2 penalised (descends fastest from far);
    "scaled": through the verifier's rescale (reaches lower once near an optimum)."""
    last = [h]
    fn = scaled_objective if (objective or SETTINGS.get("objective")) == "scaled" else soft_max_and_grad

    def f(x):
        if time.time() > deadline:
            raise _Timeout
        last[0] = x
        return fn(x, tau, penalty)

    try:
        res = minimize(f, h, jac=True, method="L-BFGS-B", bounds=[(0.0, 1.0)] * h.size,
                       options={"maxiter": 100000, "maxcor": int(maxcor), "ftol": ftol, "gtol": 1e-14})
        return res.x
    except _Timeout:
        return last[0]


def random_start(n, rng):
    """Zero margins at both ends (the published constructions are 0 on about a tenth of [0, 2] at each end),
    a random rough profile in between."""
    h = np.zeros(n)
    z = int(round(n * rng.uniform(0.06, 0.16)))
    m = n - 2 * z
    h[z:z + m] = np.clip(rng.uniform(0.2, 1.0, m) + 0.3 * np.sin(np.linspace(0, np.pi, m)), 0, 1)
    return h


def continuation(h, tau0, deadline):
    """Stages tau0, tau0 * factor, ... down to tau_end, each warm-started from the last; best true C5 seen."""
    s = SETTINGS
    stages = max(1, int(np.ceil(np.log(tau0 / float(s["tau_end"])) / np.log(1.0 / float(s["factor"])))) + 1)
    h = normalise(h)
    best, best_c = h, corr(h).max()
    tau = tau0
    for k in range(stages):
        left = deadline - time.time()
        if left <= 0.05:
            break
        h = smooth(h, tau, float(s["penalty"]), time.time() + left / (stages - k), s["maxcor"])
        cand = normalise(h)
        c = corr(cand).max()
        if c < best_c:
            best, best_c = cand, c
        tau *= float(s["factor"])
    return best, best_c


HOP_TAUS = (1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6, 1e-7, 1e-8)  # a converged solve from a perturbed profile
FINE_TAUS = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10)  # re-converging a doubled profile (already near its optimum)


def converge(h, taus, objective, ftol, deadline):
    """Stages at fixed temperatures, each L-BFGS-B run to convergence (`ftol`) or the deadline, whichever is
    first: unlike `continuation`, the result does not depend on the CPU it gets. Returns (h, true C5)."""
    for tau in taus:
        if time.time() >= deadline:
            break
        h = smooth(h, tau, float(SETTINGS["penalty"]), deadline, SETTINGS["maxcor"], ftol, objective)
    h = normalise(h)
    return h, corr(h).max()


def hop(h, deadline, rng, max_hops=None, temperature=0.0, sym=0.0):
    """Basin hopping from h until the deadline (or `max_hops`); returns (best h, its C5, hops tried).

    Each hop perturbs a random window of the current profile (Gaussian, `hop_sigma`), with probability `sym`
    also replaces it by its mirror average (h + h reversed) / 2 (the published constructions are nearly
    symmetric at coarse scale), and takes it to its local optimum. temperature 0: monotone (the current profile
    is the best); > 0: Metropolis, an uphill hop of d is taken with probability exp(-d / temperature)."""
    s = SETTINGS
    n = h.size
    best = cur = converge(normalise(h), HOP_TAUS, "penalty", float(s["hop_ftol"]), deadline)
    hops = 0
    while time.time() < deadline and (max_hops is None or hops < max_hops):
        x = cur[0].copy()
        w = max(2, int(float(s["hop_window"]) * n * rng.uniform(0.3, 1.0)))
        a = int(rng.integers(0, n - w + 1))
        x[a:a + w] = np.clip(x[a:a + w] + float(s["hop_sigma"]) * rng.standard_normal(w), 0.0, 1.0)
        if sym > 0 and rng.uniform() < sym:
            x = (x + x[::-1]) / 2
        cand = converge(x, HOP_TAUS, "penalty", float(s["hop_ftol"]), deadline)
        hops += 1
        if cand[1] < cur[1] or (temperature > 0 and rng.uniform() < np.exp(-(cand[1] - cur[1]) / temperature)):
            cur = cand
        if cand[1] < best[1]:
            best = cand
    return best[0], best[1], hops


def coarse_hop_refine(parent, budget_s, rng):
    """Hop mode: coarsen the parent, hop at the coarse level, refine back to the parent's n (times `upsample`
    within `max_n`; see the module docstring)."""
    s = SETTINGS
    t0 = time.time()
    h = normalise(np.asarray(parent, dtype=np.float64))
    f, n = int(s["coarsen"]), h.size
    if int(s["upsample"]) > 1 and h.size * int(s["upsample"]) <= int(s["max_n"]):
        n = h.size * int(s["upsample"])
    if f > 1 and h.size % f == 0 and h.size // f >= 8:
        h = h.reshape(-1, f).mean(axis=1)
    h, c, hops = hop(h, t0 + float(s["hop_frac"]) * budget_s, rng)
    print(f"lse hop: n={h.size} C5={c:.12f} after {hops} hops")
    while h.size * 2 <= n:  # back up to the parent's resolution, the remaining time shared between levels
        levels = int(np.floor(np.log2(n / h.size)))
        left = t0 + 0.9 * budget_s - time.time()
        h, c = converge(np.repeat(h, 2), FINE_TAUS, "scaled", 1e-15, time.time() + max(0.0, left) / levels)
        print(f"lse hop: refined to n={h.size} C5={c:.12f}")
    return h


def ladder(budget_s, rng):
    """Random-start hop mode: the best of a few random starts at n0 (continuation from `tau_random`),
    Metropolis hopping there (`hop_T`, `hop_sym`) for `metro_frac` (0: `hop_frac`) of the budget, then `levels`
    doublings, each followed by monotone hopping, and the rest of the time doublings without hops up to `max_n`."""
    s = SETTINGS
    t0 = time.time()
    end = t0 + 0.9 * budget_s
    best = None
    while best is None or time.time() < t0 + 0.05 * budget_s:
        h, c = continuation(random_start(int(s["n0"]), rng), float(s["tau_random"]), min(end, time.time() + 20.0))
        if best is None or c < best[1]:
            best = (h, c)
    metro = float(s["metro_frac"]) or float(s["hop_frac"])  # 0: the same share as hop mode's
    h, c, hops = hop(best[0], t0 + metro * budget_s, rng, temperature=float(s["hop_T"]),
                     sym=float(s["hop_sym"]))
    print(f"lse ladder: n={h.size} C5={c:.12f} after {hops} hops (T={s['hop_T']})")
    levels = int(s["levels"])
    for k in range(levels):  # each level's hops get an equal share of half the time left
        if h.size * 2 > int(s["max_n"]):
            break
        share = 0.5 * (end - time.time()) / (levels - k)
        h, c, hops = hop(np.repeat(h, 2), time.time() + share, rng)
        print(f"lse ladder: n={h.size} C5={c:.12f} after {hops} hops")
    while h.size * 2 <= int(s["max_n"]) and time.time() < end:
        left = int(np.floor(np.log2(int(s["max_n"]) / h.size)))
        h, c = converge(np.repeat(h, 2), FINE_TAUS, "scaled", 1e-15, time.time() + (end - time.time()) / left)
        print(f"lse ladder: refined to n={h.size} C5={c:.12f}")
    return h


def solve(parent, budget_s, seed):
    s = SETTINGS
    rng = np.random.default_rng(seed)
    t0 = time.time()
    deadline = t0 + 0.9 * budget_s
    if s["start"] == "auto" and float(s["hop_frac"]) > 0:  # ladder from a poor parent, hop-refine a good one
        poor = parent is None or corr(normalise(np.asarray(parent, dtype=np.float64))).max() > float(s["auto_above"])
        h = ladder(budget_s, rng) if poor else coarse_hop_refine(parent, budget_s, rng)
    elif s["start"] == "random" and float(s["hop_frac"]) > 0:
        h = ladder(budget_s, rng)
    elif s["start"] == "random":  # multistart from rough random profiles (tau from tau_random), keep the best
        best = None
        while best is None or time.time() < deadline - 0.2 * budget_s:
            h, c = continuation(random_start(int(s["n0"]), rng), float(s["tau_random"]),
                                min(deadline, time.time() + 0.5 * budget_s))
            if best is None or c < best[1]:
                best = (h, c)
        h, c = best
    elif float(s["hop_frac"]) > 0:
        h = coarse_hop_refine(parent, budget_s, rng)
    else:
        h = normalise(np.asarray(parent, dtype=np.float64))
        if int(s["upsample"]) > 1 and h.size * int(s["upsample"]) <= int(s["max_n"]):
            h = np.repeat(h, int(s["upsample"]))
        h, c = continuation(h, float(s["tau0"]), deadline)
    h = exactly_feasible(h)
    print(f"lse: n={h.size} C5={corr(h).max():.12f}")
    return h
