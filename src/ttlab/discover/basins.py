"""Why random starts stop short of the Erdős record: basins, not resolution. The basin study's measurements.

Each function runs the library's smoothed minimax (`library/erdos_lse.py`) in-process: this studies the
optimiser and claims no bound (`ttlab discover search` / `polish` are the sandboxed paths, and `ladder`
checks its result in exact arithmetic). `benchmarks/erdos_basins.py` wires them to flags and prints.

  multistart  random rough starts at one resolution n through the tau continuation: where they land.
  refine      a construction upsampled x2 and re-optimised, round after round: how far resolution alone goes.
  coarsen     a construction block-averaged by each factor and taken to the coarse local optimum: the
              coarsest resolution at which its basin is already there.
  ladder      the program's random-start hop mode (`erdos_lse.ladder`), checked exactly.
  chains      the ladder's first stage alone (`erdos_lse.n0_chain`: random starts, then Metropolis hops at n0),
              many times: the level each chain ends at, and how often it is the lower basin's.
  symmetry    a construction against its mirror image h(2 - x).
  reference   a published construction and its basin's local optimum at n and 2n.

`erdos_lse.SETTINGS` is changed only inside `lse_settings`, which puts it back as it found it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ttlab.discover.library import erdos_lse as lse
from ttlab.discover.tasks.erdos import RECORD, exact_c5

LADDER_DEFAULTS = {"n0": 51, "hop_frac": 0.25, "hop_T": 5e-6, "hop_sym": 0.15, "hop_window": 0.3, "levels": 2,
                   "max_n": 1632}
"""`ladder`'s settings before the caller's overrides (the ladder of the search's `erdos_ladder` preset)."""


@contextmanager
def lse_settings(overrides: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """`erdos_lse.SETTINGS` updated with `overrides` inside the block (yields a copy), restored after it."""
    before = dict(lse.SETTINGS)
    lse.SETTINGS.update(overrides)
    try:
        yield dict(lse.SETTINGS)
    finally:
        lse.SETTINGS.clear()
        lse.SETTINGS.update(before)


def published(path: str | Path, name: str) -> tuple[str, np.ndarray]:
    """(full name, pieces) of the published construction whose name starts with `name`."""
    cons = json.loads(Path(path).read_text())["constructions"]
    hits = [c for c in cons if c["name"].startswith(name)]
    if not hits:
        raise ValueError(f"{name}: not a construction in {path} (names: {', '.join(c['name'] for c in cons)})")
    return hits[0]["name"], np.asarray(hits[0]["h"], dtype=np.float64)


def load(path: str, ref: str | Path) -> np.ndarray:
    """A construction from a search `best.json`, a polish result, a bare list of piece heights, or `ref:NAME`
    (a published construction of the `ref` file by a prefix of its name, e.g. `ref:haugland`)."""
    if path.startswith("ref:"):
        return published(ref, path[4:])[1]
    d = json.loads(Path(path).read_text())
    h = d.get("construction", d.get("h")) if isinstance(d, dict) else d
    if h is None:
        raise ValueError(f"{path}: no 'construction' (or 'h') list in this file")
    return np.asarray(h, dtype=np.float64)


def multistart(n: int, seconds: float, tau: float, seed: int) -> dict:
    """Random rough starts at n pieces, each through the tau continuation from `tau`, for `seconds`: the
    distribution of the local optima they reach."""
    rng = np.random.default_rng(seed)
    t0, found = time.time(), []
    while time.time() - t0 < seconds:
        _, c = lse.continuation(lse.random_start(n, rng), tau, time.time() + 20.0)
        found.append(float(c))
    found.sort()
    return {"n": n, "tau_random": tau, "seconds": seconds, "starts": len(found), "best": found[0],
            "top5": found[:5], "median": float(np.median(found))}


def refine(h: np.ndarray, rounds: int, round_s: float, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """`rounds` doublings of the resolution, each re-optimised (scaled objective, tau from 1e-7) for `round_s`."""
    with lse_settings({"objective": "scaled"}):  # through the verifier's rescale, as the polish stages use
        h = lse.normalise(h)
        rows = [{"n": h.size, "c5": float(lse.corr(h).max()), "s": 0.0}]
        if on_row:
            on_row(rows[-1])
        for _ in range(rounds):
            t = time.time()
            h, c = lse.continuation(np.repeat(h, 2), 1e-7, time.time() + round_s)
            rows.append({"n": h.size, "c5": float(c), "s": round(time.time() - t, 1)})
            if on_row:
                on_row(rows[-1])
    return rows


def coarsen(h: np.ndarray, factors: list[int], seconds: float, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """At which resolution a construction's basin appears: block-average it by each factor f (n must divide),
    then take the coarse profile to its local optimum (continuation from tau 1e-3, `seconds` each)."""
    rows = []
    for f in factors:
        if h.size % f:
            raise ValueError(f"--factors {f}: does not divide n = {h.size}")
        c = h.reshape(-1, f).mean(axis=1)
        _, opt = lse.continuation(c, 1e-3, time.time() + seconds)
        rows.append({"factor": f, "n": c.size, "c5_block_mean": float(lse.corr(lse.normalise(c)).max()),
                     "c5_local_optimum": float(opt)})
        if on_row:
            on_row(rows[-1])
    return rows


def ladder(seconds: float, settings: dict[str, Any], seed: int, save: str | Path | None = None) -> dict:
    """The random-start hop mode (`LADDER_DEFAULTS` updated with `settings`) for `seconds`, made exactly feasible
    and checked in exact arithmetic; the construction is written to `save` when given."""
    with lse_settings(LADDER_DEFAULTS | settings) as used:
        t = time.time()
        h = lse.ladder(seconds, np.random.default_rng(seed))
        wall = time.time() - t
    h = lse.exactly_feasible(h)
    c5, feasible = exact_c5(h)[:2]
    if save:
        Path(save).parent.mkdir(parents=True, exist_ok=True)
        Path(save).write_text(json.dumps({"h": h.tolist(), "c5": float(c5), "seed": seed}) + "\n")
    keys = ("n0", "hop_frac", "hop_T", "hop_sym", "hop_window", "hop_sigma", "levels", "max_n", "tau_random")
    return {"seconds": seconds, "seed": seed, "settings": {k: used[k] for k in keys}, "n": h.size,
            "c5_exact": float(c5), "feasible": bool(feasible), "below_record": bool(feasible and c5 < RECORD),
            "wall_s": round(wall, 1), "file": str(save) if save else ""}


LOWER_N0 = 0.38093
"""At n0 = 51 the ladders' first stage ends on a few discrete levels; the lowest, 0.3809216, is the basin whose
ladders end below the record (every one so far), the next, 0.3809511, rarely does. A chain is `lower` below this."""


def chains(count: int, seconds: float, settings: dict[str, Any], seed: int, starts_frac: float = 0.125,
           on_row: Callable[[dict], None] | None = None) -> dict:
    """`count` independent chains of the ladder's first stage, each `seconds` CPU seconds (random starts for
    `starts_frac` of it, the ladder's own share: 5% of 40%; Metropolis hops for the rest), with `LADDER_DEFAULTS`
    updated by `settings`: the level each ends at, the CPU seconds at which it last improved, and the share of
    chains that reach the lower basin (C5 at n0 below `LOWER_N0`)."""
    rows = []
    with lse_settings(LADDER_DEFAULTS | {"wall_factor": 6.0} | settings) as used:  # CPU seconds, whatever the load
        for k in range(count):
            rng = np.random.default_rng([seed, k])
            c = lse.clock(seconds)
            h, c5, hops = lse.n0_chain(c.until(starts_frac), c, c, rng)
            rows.append({"chain": k, "n": int(h.size), "c5": round(float(c5), 10), "hops": int(hops),
                         "cpu_s": round(c.used(), 1), "lower": bool(c5 < LOWER_N0)})
            if on_row:
                on_row(rows[-1])
    levels: dict[str, int] = {}
    for r in rows:
        levels[f"{r['c5']:.7f}"] = levels.get(f"{r['c5']:.7f}", 0) + 1
    lower = sum(r["lower"] for r in rows)
    return {"count": count, "seconds": seconds, "starts_frac": starts_frac, "seed": seed,
            "settings": {k: used[k] for k in ("n0", "hop_T", "hop_sym", "hop_window", "hop_sigma", "tau_random")},
            "lower": lower, "lower_rate": round(lower / max(1, count), 3),
            "levels": dict(sorted(levels.items())), "rows": rows}


def symmetry(h: np.ndarray) -> dict:
    """C5 of the construction and of its mirror average, and how far it is from mirror symmetric."""
    h = lse.normalise(h)
    m = lse.normalise((h + h[::-1]) / 2)
    return {"n": h.size, "c5": float(lse.corr(h).max()), "c5_symmetrised": float(lse.corr(m).max()),
            "max_abs_h_minus_mirror": float(np.abs(h - h[::-1]).max())}


def reference(path: str | Path, name: str, seconds: float = 20.0) -> dict:
    """A published construction by (a prefix of) its name, and its basin's local optimum at n and 2n."""
    full, h = published(path, name)
    h = lse.normalise(h)
    out = {"name": full, "n": h.size, "c5": float(lse.corr(h).max())}
    for up in (1, 2):
        _, c = lse.continuation(np.repeat(h, up), 1e-3, time.time() + seconds)
        out[f"basin_n{h.size * up}"] = float(c)
    return out
