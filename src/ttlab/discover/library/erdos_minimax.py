"""Erdős minimum overlap: exact minimax steps by sequential LP with a cutting plane, plus multiresolution.

C5(h) = max_m c_m(h), c = np.correlate(h, 1 - h, "full") * 2/n. Around h each lag is linear in the step d up
to an O(|d|^2) term: c_m(h + d) = c_m(h) + J_m d - (2/n) (d * d)_m. One step solves the LP

    min t  s.t.  c_m + J_m d <= t  (m in the active set),  sum d = 0,  max(-delta, -h) <= d <= min(delta, 1 - h)

with HiGHS, then checks every lag at the solution and adds the ones the linear model violates, until none
is (so the step is the exact minimiser of the linear model over all 2n - 1 lags, not of a guessed subset).
A step is kept only when the true C5 drops; the trust region delta grows after a kept step and shrinks
otherwise. Around that core: random restarts at a small n, and refinement by upsampling (each piece split
in two, which leaves C5 unchanged) with a little noise, then polishing at the finer resolution.

The LP step and the trust-region loop are `erdos_blocks.lp_step` / `lp_polish`; time is CPU seconds of this
process with the wall clock as the backstop (`wall_factor`, as in `erdos_lse`).
"""
import erdos_blocks as eb
import numpy as np

SETTINGS = {"start": "parent", "start_choices": ["parent", "parent", "parent", "random"], "n0": 50, "n0_choices": [30, 40, 50, 60, 80], "refine": 1, "refine_choices": [0, 1, 1], "noise": 0.002, "delta": 0.02, "margin": 1e-6, "max_n": 600, "stage_s": 40.0, "restart_frac": 0.3, "wall_factor": None}

corr, lin_all, jac_rows, normalise, random_start = eb.corr, eb.lin_all, eb.jac_rows, eb.normalise, eb.random_start


def lp_step(h, c, delta, margin, deadline, max_rounds=30):
    """The minimiser d of the linear model over all lags within the trust region (None if the LP fails)."""
    return eb.lp_step(h, c, delta, margin, eb.as_clock(deadline), max_rounds)


def polish(h, clock, delta, margin):
    """Trust-region SLP from h until the clock runs out or the trust region collapses; returns (h, C5, steps)."""
    return eb.lp_polish(h, clock, delta, margin)


def solve(parent, budget_s, seed):
    s = SETTINGS
    rng = np.random.default_rng(seed)
    total = eb.Clock(budget_s, float(s.get("wall_factor") or 1.0))
    end = total.until(0.9)
    if parent is None or s["start"] == "random":  # multistart at n0, keep the best, then refine it
        best = None
        while best is None or not total.until(s["restart_frac"]).done():
            h, cur, _ = polish(random_start(int(s["n0"]), rng), end.sub(s["stage_s"]), s["delta"], s["margin"])
            if best is None or cur < best[1]:
                best = (h, cur)
        h = best[0]
        refine = True
    else:
        h = np.asarray(parent, dtype=np.float64)
        refine = bool(s["refine"])
    log = []
    while True:
        h, cur, steps = polish(h, end.sub(s["stage_s"]), s["delta"], s["margin"])
        log.append(f"n={h.size} C5={cur:.10f} steps={steps}")
        if not refine or end.left() < 1.0 or 2 * h.size > s["max_n"]:
            break
        h = np.repeat(h, 2)
        h = h + s["noise"] * rng.standard_normal(h.size) * (h > 0) * (h < 1)
    print("minimax: " + "; ".join(log))
    eb.report(total)
    return h
