"""Circle packing: centres and radii optimised jointly by SLSQP, with basin hopping around the best packing.

maximise sum r over z = (x, y, r) subject to, exactly as the verifier checks them,
    (x_i - x_j)^2 + (y_i - y_j)^2 - (r_i + r_j)^2 >= 0       (every pair, n (n - 1) / 2 of them)
    x_i - r_i >= 0, 1 - x_i - r_i >= 0, the same for y        (inside the unit square)
with analytic Jacobians (scipy SLSQP). Each hop perturbs the best packing found so far (move a few centres,
or move the smallest circle to a random spot) and re-solves; a hop is kept when the sum improves. At the end
the radii are made exactly feasible: each is cut to its walls, then every overlapping pair is scaled down to
its distance, with a relative margin of 1e-12, since SLSQP's constraints hold only to its tolerance.
"""
import time

import numpy as np
from scipy.optimize import minimize

SETTINGS = {"start": "parent", "start_choices": ["parent", "parent", "random"], "sigma": 0.05, "move_frac": 0.2, "relocate": 0.3, "maxiter": 300}


def _pairs(n):
    return np.triu_indices(n, 1)


def solve_slsqp(x, y, r, maxiter):
    """One SLSQP run from (x, y, r); returns the optimised (x, y, r) (infeasible by at most its tolerance)."""
    n = x.size
    i, j = _pairs(n)
    m = i.size
    rows = np.arange(m)

    def pair_fun(z):
        x, y, r = z[:n], z[n:2 * n], z[2 * n:]
        return (x[i] - x[j]) ** 2 + (y[i] - y[j]) ** 2 - (r[i] + r[j]) ** 2

    def pair_jac(z):
        x, y, r = z[:n], z[n:2 * n], z[2 * n:]
        J = np.zeros((m, 3 * n))
        dx, dy, sr = 2 * (x[i] - x[j]), 2 * (y[i] - y[j]), -2 * (r[i] + r[j])
        J[rows, i], J[rows, j] = dx, -dx
        J[rows, n + i], J[rows, n + j] = dy, -dy
        J[rows, 2 * n + i], J[rows, 2 * n + j] = sr, sr
        return J

    eye = np.eye(n)
    wall_jac = np.block([[eye, 0 * eye, -eye], [-eye, 0 * eye, -eye], [0 * eye, eye, -eye], [0 * eye, -eye, -eye]])

    def wall_fun(z):
        x, y, r = z[:n], z[n:2 * n], z[2 * n:]
        return np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r])

    res = minimize(lambda z: -z[2 * n:].sum(), np.concatenate([x, y, r]),
                   jac=lambda z: np.concatenate([np.zeros(2 * n), -np.ones(n)]), method="SLSQP",
                   bounds=[(0.0, 1.0)] * (2 * n) + [(0.0, 0.5)] * n,
                   constraints=[{"type": "ineq", "fun": pair_fun, "jac": pair_jac},
                                {"type": "ineq", "fun": wall_fun, "jac": lambda z: wall_jac}],
                   options={"maxiter": int(maxiter), "ftol": 1e-12})
    z = res.x
    return z[:n], z[n:2 * n], z[2 * n:]


def feasible_radii(x, y, r):
    """Radii cut to their walls and every overlapping pair scaled to its distance (relative margin 1e-12)."""
    keep = 1 - 1e-12
    r = np.clip(r, 0.0, None)
    r = np.minimum.reduce([r, x * keep, (1 - x) * keep, y * keep, (1 - y) * keep])
    r = np.clip(r, 0.0, None)
    i, j = _pairs(x.size)
    d = np.sqrt((x[i] - x[j]) ** 2 + (y[i] - y[j]) ** 2)
    for _ in range(100):
        s = r[i] + r[j]
        bad = s > d * keep
        if not bad.any():
            break
        f = np.where(bad, d * keep / np.maximum(s, 1e-300), 1.0)
        scale = np.ones(x.size)
        np.minimum.at(scale, i, f)
        np.minimum.at(scale, j, f)
        r = r * scale * (1 - 1e-15)
    return r


def random_packing(n, rng):
    return rng.uniform(0.1, 0.9, n), rng.uniform(0.1, 0.9, n), np.full(n, 0.01)


def hop(x, y, r, rng):
    """A perturbation of the packing: relocate the smallest circle, or jitter a random subset of centres."""
    s = SETTINGS
    x, y, r = x.copy(), y.copy(), r.copy()
    if rng.random() < float(s["relocate"]):
        k = int(np.argmin(r))
        x[k], y[k], r[k] = rng.uniform(0.05, 0.95), rng.uniform(0.05, 0.95), 0.0
    else:
        mask = rng.random(x.size) < float(s["move_frac"])
        x[mask] += float(s["sigma"]) * rng.standard_normal(mask.sum())
        y[mask] += float(s["sigma"]) * rng.standard_normal(mask.sum())
        r[mask] *= 0.5
    return np.clip(x, 0.01, 0.99), np.clip(y, 0.01, 0.99), r


def solve(parent, budget_s, seed):
    s = SETTINGS
    rng = np.random.default_rng(seed)
    t0 = time.time()
    p = np.asarray(parent, dtype=np.float64)
    n = p.shape[0]
    if s["start"] == "random":
        x, y, r = random_packing(n, rng)
    else:
        x, y, r = p[:, 0].copy(), p[:, 1].copy(), p[:, 2].copy() if p.shape[1] > 2 else np.zeros(n)
    x, y, r = solve_slsqp(x, y, r, s["maxiter"])
    r = feasible_radii(x, y, r)
    best = (x, y, r)
    hops = 0
    while time.time() - t0 < 0.8 * budget_s:
        hops += 1
        cx, cy, cr = solve_slsqp(*hop(*best, rng), s["maxiter"])
        cr = feasible_radii(cx, cy, cr)
        if cr.sum() > best[2].sum():
            best = (cx, cy, cr)
    x, y, r = best
    print(f"circle_slsqp: n={n} hops={hops} sum_r={r.sum():.9f}")
    return np.column_stack([x, y, r])
