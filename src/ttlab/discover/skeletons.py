"""Erdős coarse skeletons: what a construction's coarse version says about how low its polish goes, and a
search over coarse skeletons. The measurements of `benchmarks/erdos_skeletons.py`.

A skeleton is a construction block-averaged to a coarse resolution (100-200 pieces, where basins differ) and
taken to its coarse local optimum. Hop mode polishes by hopping among skeletons and refining the best; the
question here is whether the skeleton's value predicts the value after refinement, and whether other skeletons
than the record's are lower.

  ladder   a construction's skeleton at its coarse n, refined by doublings, each level converged: the value at
           every level (the short polish at n_c and 2 n_c against the long one at the file's own n).
  search   Metropolis hop chains at the coarse level from given skeletons: every distinct local optimum the
           chains visit, the top few refined to 2 n_c and 4 n_c (does the coarse ranking survive refinement?).

Every solve is `erdos_blocks.converge` (L-BFGS-B at fixed temperatures, each to convergence), so a value does
not depend on the load; the search is bounded by hop counts, not time. In-process: this studies the optimiser and
claims no bound (`ttlab discover polish` is the sandboxed path; the best refinement is checked exactly).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ttlab.discover.blocks import erdos_blocks as eb
from ttlab.discover.tasks.erdos import exact_c5

DISTINCT_L1 = 1e-3
"""Two coarse optima closer than this in mean |h1 - h2| (both rescaled to sum n/2) are the same skeleton."""


def block_mean(h: np.ndarray, n_c: int) -> np.ndarray:
    """h averaged over blocks of n / n_c pieces (the same function at the coarse resolution; n_c must divide n:
    averaging across piece boundaries that do not line up smears the sharp steps and lands in another optimum)."""
    if n_c <= 0 or h.size % n_c:
        raise ValueError(f"coarse n {n_c} does not divide the construction's n = {h.size}")
    return h.reshape(n_c, -1).mean(axis=1)  # (n_c,)


def coarse_optimum(h: np.ndarray, work_s: float = 60.0) -> tuple[np.ndarray, float]:
    """A coarse profile's local optimum: the hop solve (penalty objective, tau 1e-3 .. 1e-8), then the fine
    temperatures through the verifier's rescale. Returns (h, C5)."""
    h, _ = eb.converge(eb.normalise(h), eb.Clock(work_s, unit="work"), eb.HOP_TAUS, "penalty", 1e-11)
    return eb.converge(h, eb.Clock(work_s, unit="work"), eb.FINE_TAUS, "scaled", 1e-15)


def refine_levels(h: np.ndarray, levels: int, work_s: float = 300.0) -> tuple[list[dict], np.ndarray]:
    """h doubled `levels` times, each level converged (fine temperatures, rescaled objective): one row per level
    ({"n", "c5"}, the first for h itself) and the last level's profile."""
    rows = [{"n": int(h.size), "c5": float(eb.c5(h))}]
    for _ in range(levels):
        h, c = eb.converge(eb.upsample(h, 2), eb.Clock(work_s, unit="work"), eb.FINE_TAUS, "scaled", 1e-15)
        rows.append({"n": int(h.size), "c5": float(c)})
    return rows, h


def ladder(h: np.ndarray, n_c: int, levels: int) -> dict:
    """The skeleton of h at n_c and its refinements by `levels` doublings, next to h's own C5 at its own n."""
    skel, c = coarse_optimum(block_mean(eb.normalise(h), n_c))
    return {"n": int(h.size), "c5": float(eb.c5(h)), "n_c": n_c, "skeleton_c5": float(c),
            "levels": refine_levels(skel, levels)[0]}


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """Mean |a - b| of two profiles of the same n, both rescaled to sum n/2."""
    return float(np.abs(a * (a.size / 2 / a.sum()) - b * (b.size / 2 / b.sum())).mean())


@dataclass
class Chain:
    """One Metropolis hop chain's settings (the moves are `erdos_blocks.hop`'s)."""

    hops: int = 300
    """local solves from perturbed profiles"""
    temperature: float = 3e-6
    """an uphill hop of d is taken with probability exp(-d / temperature)"""
    sigma: float = 0.3
    """Gaussian noise on the perturbed window"""
    window: float = 0.3
    """the window covers a fraction 0.3-1 of this of the pieces"""
    sym: float = 0.15
    """probability that a hop also mirror-averages the profile"""


def keep_distinct(found: list[tuple[float, np.ndarray]], c: float, h: np.ndarray, top: int) -> None:
    """Insert (c, h) into `found` (sorted by c, at most `top`) unless a kept optimum of the same n is within
    DISTINCT_L1 of it (then the lower of the two stays)."""
    for i, (c0, h0) in enumerate(found):
        if h0.size == h.size and distance(h0, h) < DISTINCT_L1:
            if c < c0:
                found[i] = (c, h)
                found.sort(key=lambda x: x[0])
            return
    found.append((c, h))
    found.sort(key=lambda x: x[0])
    del found[top:]


def chain(h: np.ndarray, cfg: Chain, rng: np.random.Generator, top: int) -> dict:
    """A Metropolis hop chain from the coarse profile h; the best `top` distinct local optima it visited."""
    t0 = time.thread_time()
    cur = eb.converge(eb.normalise(h), eb.Clock(60.0, unit="work"), eb.HOP_TAUS, "penalty", 1e-11)
    start = float(cur[1])
    found: list[tuple[float, np.ndarray]] = []
    keep_distinct(found, float(cur[1]), cur[0], top)
    accepted = 0
    for _ in range(cfg.hops):
        x = cur[0].copy()
        n = x.size
        w = max(2, int(cfg.window * n * rng.uniform(0.3, 1.0)))
        a = int(rng.integers(0, n - w + 1))
        x[a:a + w] = np.clip(x[a:a + w] + cfg.sigma * rng.standard_normal(w), 0.0, 1.0)
        if rng.uniform() < cfg.sym:
            x = eb.symmetrise(x)
        cand = eb.converge(x, eb.Clock(60.0, unit="work"), eb.HOP_TAUS, "penalty", 1e-11)
        keep_distinct(found, float(cand[1]), cand[0], top)
        if cand[1] < cur[1] or rng.uniform() < np.exp(-(cand[1] - cur[1]) / cfg.temperature):
            cur, accepted = cand, accepted + 1
    return {"start_c5": start, "accepted": accepted, "cpu_s": round(time.thread_time() - t0, 1), "found": found}


def search(sources: dict[str, np.ndarray], cfg: Chain, seed: int, top: int, levels: int) -> dict:
    """A chain from each source skeleton (name -> coarse profile); the best `top` distinct optima over all chains,
    each polished at the fine temperatures and refined by `levels` doublings ("h": the last level's profile). Ranks at the coarse level and at
    the last level say whether a coarse skeleton's value predicts its refined value."""
    rng = np.random.default_rng(seed)
    chains, pool = {}, []
    for name, h in sources.items():
        r = chain(h, cfg, rng, top)
        chains[name] = {k: v for k, v in r.items() if k != "found"} | {"best_c5": r["found"][0][0],
                                                                        "distinct": len(r["found"])}
        pool += [(c, hh, name) for c, hh in r["found"]]
    pool.sort(key=lambda x: x[0])
    rows = []
    for c, hh, name in pool[:top]:
        skel, _ = eb.converge(hh, eb.Clock(60.0, unit="work"), eb.FINE_TAUS, "scaled", 1e-15)
        levels_rows, fine = refine_levels(skel, levels)
        rows.append({"chain": name, "hop_c5": float(c), "levels": levels_rows, "h": fine})
    return {"chains": chains, "top": rows}


def exact_check(h: np.ndarray) -> dict:
    """The construction made exactly feasible and scored in rational arithmetic."""
    h = eb.exactly_feasible(eb.normalise(h))
    c5, feasible = exact_c5(h)[:2]
    return {"n": int(h.size), "c5_exact": float(c5), "feasible": bool(feasible), "h": h}
