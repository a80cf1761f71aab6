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

The math and the moves are the blocks of `erdos_blocks` (objective, L-BFGS-B stages, hops, refinement); this
program composes them and reads every number from SETTINGS. Time is CPU seconds of this process
(`erdos_blocks.Clock`): `wall_factor` None is a plain wall-clock budget, a number f lets the program run
until budget_s CPU seconds or f * budget_s wall seconds, whichever comes first (the search then gives it
an f times longer wall limit). The last line of its output reports the CPU and wall seconds it got.
"""
import erdos_blocks as eb
import numpy as np

FFT_N = eb.FFT_N  # from here on the gradient's correlations go through the FFT (O(n log n); error ~1e-15)
HOP_TAUS = eb.HOP_TAUS  # a converged solve from a perturbed profile
FINE_TAUS = eb.FINE_TAUS  # re-converging a doubled profile (already near its optimum)

SETTINGS = {"start": "parent", "start_choices": ["parent", "parent", "random"], "n0": 100, "n0_choices": [60, 80, 100, 100, 120], "tau0": 1e-06, "tau0_choices": [0.001, 0.0001, 1e-06, 1e-06, 1e-07], "tau_random": 0.01, "objective": "penalty", "tau_end": 1e-10, "factor": 0.3, "penalty": 1000.0, "upsample": 1, "upsample_choices": [1, 1, 1, 2], "max_n": 2400, "maxcor": 30, "coarsen": 1, "hop_frac": 0.0, "hop_sigma": 0.3, "hop_window": 0.15, "hop_ftol": 1e-11, "hop_T": 0.0, "hop_sym": 0.0, "levels": 2, "auto_above": 0.3812, "metro_frac": 0.0, "wall_factor": None, "chains": 1, "chains_choices": [1]}

corr, normalise, exactly_feasible, random_start = eb.corr, eb.normalise, eb.exactly_feasible, eb.random_start


def soft_max_and_grad(h, tau, penalty):
    return eb.soft_max_and_grad(h, tau, penalty, FFT_N)


def scaled_objective(h, tau, penalty):
    return eb.scaled_objective(h, tau, penalty, FFT_N)


def _solver():
    """The keyword settings every local solve shares."""
    return {"penalty": float(SETTINGS["penalty"]), "maxcor": SETTINGS["maxcor"], "fft_n": FFT_N}


def clock(budget_s):
    return eb.Clock(budget_s, float(SETTINGS.get("wall_factor") or 1.0))


def smooth(h, tau, penalty, deadline, maxcor, ftol=1e-16, objective=None):
    """One continuation stage (a Clock, or a wall-clock deadline)."""
    return eb.smooth(h, tau, eb.as_clock(deadline), penalty, maxcor, ftol, objective or SETTINGS.get("objective"),
                     FFT_N)


def continuation(h, tau0, deadline):
    """Stages tau0, tau0 * factor, ... down to tau_end, each warm-started from the last; best true C5 seen."""
    s = SETTINGS
    return eb.continuation(h, eb.as_clock(deadline), tau0, float(s["tau_end"]), float(s["factor"]),
                           objective=s.get("objective"), **_solver())


def converge(h, taus, objective, ftol, deadline):
    """Stages at fixed temperatures, each to convergence or the deadline. Returns (h, true C5)."""
    return eb.converge(h, eb.as_clock(deadline), taus, objective, ftol, **_solver())


def hop(h, deadline, rng, max_hops=None, temperature=0.0, sym=0.0):
    """Basin hopping from h (`eb.hop` with this program's window, sigma and tolerance); (best h, C5, hops)."""
    s = SETTINGS
    return eb.hop(h, eb.as_clock(deadline), rng, max_hops, temperature, sym, float(s["hop_sigma"]),
                  float(s["hop_window"]), float(s["hop_ftol"]), **_solver())


def coarse_hop_refine(parent, budget_s, rng):
    """Hop mode: coarsen the parent, hop at the coarse level, refine back to the parent's n (times `upsample`
    within `max_n`; see the module docstring)."""
    s = SETTINGS
    c = clock(budget_s)
    h = normalise(np.asarray(parent, dtype=np.float64))
    n = h.size
    if int(s["upsample"]) > 1 and h.size * int(s["upsample"]) <= int(s["max_n"]):
        n = h.size * int(s["upsample"])
    h = eb.coarsen(h, int(s["coarsen"]))
    h, c5, hops = hop(h, c.until(float(s["hop_frac"])), rng)
    print(f"lse hop: n={h.size} C5={c5:.12f} after {hops} hops")
    # back up to the parent's resolution, the remaining time shared between levels
    h, _ = eb.refine(h, c.until(0.9), n, to_max=True, log=lambda m: print("lse hop: " + m), **_solver())
    return h


def n0_chain(starts_end, hops_end, end, rng):
    """One chain at n0: the best of random starts (continuation from `tau_random`) until `starts_end`, then
    Metropolis hops (`hop_T`, `hop_sym`) from it until `hops_end`; (h, C5, hops)."""
    s = SETTINGS
    best = None
    while best is None or not starts_end.done():
        h, c5 = continuation(random_start(int(s["n0"]), rng), float(s["tau_random"]), end.sub(20.0))
        if best is None or c5 < best[1]:
            best = (h, c5)
    return hop(best[0], hops_end, rng, temperature=float(s["hop_T"]), sym=float(s["hop_sym"]))


def ladder(budget_s, rng):
    """Random-start hop mode: the best of a few random starts at n0 (continuation from `tau_random`),
    Metropolis hopping there (`hop_T`, `hop_sym`) for `metro_frac` (0: `hop_frac`) of the budget, then `levels`
    doublings, each followed by monotone hopping, and the rest of the time doublings without hops up to `max_n`.
    `chains` > 1 splits the time at n0 into that many independent chains (starts, then hops) and ladders the
    lowest: the basin a ladder ends in is already set at n0, so short chains screen more basins."""
    s = SETTINGS
    c = clock(budget_s)
    end = c.until(0.9)
    metro = float(s["metro_frac"]) or float(s["hop_frac"])  # 0: the same share as hop mode's
    chains = max(1, int(s["chains"]))
    h, c5 = None, float("inf")
    for k in range(chains):  # chain k: random starts for 5% / chains of the budget, then hops to its share's end
        hk, ck, hops = n0_chain(c.until((k * metro + 0.05) / chains), c.until((k + 1) * metro / chains), end, rng)
        chain = f" chain {k + 1}/{chains}" if chains > 1 else ""
        print(f"lse ladder:{chain} n={hk.size} C5={ck:.12f} after {hops} hops (T={s['hop_T']})")
        if h is None or ck < c5:  # the first chain stands even if its C5 is not finite
            h, c5 = hk, ck
    levels = int(s["levels"])
    for k in range(levels):  # each level's hops get an equal share of half the time left
        if h.size * 2 > int(s["max_n"]):
            break
        h, c5, hops = hop(eb.upsample(h, 2), c.sub(0.5 * end.left() / (levels - k)), rng)
        print(f"lse ladder: n={h.size} C5={c5:.12f} after {hops} hops")
    h, _ = eb.refine(h, end, int(s["max_n"]), log=lambda m: print("lse ladder: " + m), **_solver())
    return h


def solve(parent, budget_s, seed):
    s = SETTINGS
    rng = np.random.default_rng(seed)
    total = clock(budget_s)
    deadline = total.until(0.9)
    if s["start"] == "auto" and float(s["hop_frac"]) > 0:  # ladder from a poor parent, hop-refine a good one
        poor = parent is None or corr(normalise(np.asarray(parent, dtype=np.float64))).max() > float(s["auto_above"])
        h = ladder(budget_s, rng) if poor else coarse_hop_refine(parent, budget_s, rng)
    elif s["start"] == "random" and float(s["hop_frac"]) > 0:
        h = ladder(budget_s, rng)
    elif s["start"] == "random":  # multistart from rough random profiles (tau from tau_random), keep the best
        best = None
        while best is None or not total.until(0.7).done():
            h, c5 = continuation(random_start(int(s["n0"]), rng), float(s["tau_random"]), deadline.sub(0.5 * budget_s))
            if best is None or c5 < best[1]:
                best = (h, c5)
        h, c5 = best
    elif float(s["hop_frac"]) > 0:
        h = coarse_hop_refine(parent, budget_s, rng)
    else:
        h = normalise(np.asarray(parent, dtype=np.float64))
        if int(s["upsample"]) > 1 and h.size * int(s["upsample"]) <= int(s["max_n"]):
            h = np.repeat(h, int(s["upsample"]))
        h, c5 = continuation(h, float(s["tau0"]), deadline)
    h = exactly_feasible(h)
    print(f"lse: n={h.size} C5={corr(h).max():.12f}")
    eb.report(total)
    return h
