"""Why random starts stop short of the Erdős record: basins, not resolution (issue 18, item 1).

Three measurements with the library's smoothed minimax (`library/erdos_lse.py`, run in-process here: this
script studies the optimiser, it claims no bound; `discover search` / `polish` are the sandboxed paths):

  --multistart: random rough starts at one resolution n, each taken through the tau continuation from
      `tau_random`; the distribution of the local optima they reach (how often a start lands in a good basin).
  --refine FILE: a construction upsampled x2 and re-optimised (scaled objective) `--rounds` times: how far a
      basin goes with resolution alone.
  --symmetry FILE: the construction against its mirror image h(2 - x): the published constructions look
      symmetric at coarse scale; this says whether the fine structure is.
  --coarsen FILE: the construction block-averaged by each of `--factors` and taken to the coarse local
      optimum: the coarsest resolution at which its basin is already there (and better than another's).
  --ladder SECONDS: the library program's random-start hop mode (`erdos_lse.ladder`: random starts at n0,
      Metropolis hops there, doublings with hops, refinement), in-process with `--settings`; prints each level,
      checks the result in exact arithmetic and writes it to `--save` (a lead for the search, not a bound).
  --reference NAME: a published construction (`--ref` file) and the local optimum of its basin at its own n
      and at 2n (the value a random start must land near to be in that basin).

    python benchmarks/erdos_basins.py --multistart --n 50 --seconds 60
    python benchmarks/erdos_basins.py --refine runs/.../best.json --rounds 3 --round-s 100
    python benchmarks/erdos_basins.py --refine ref:haugland --rounds 4 --round-s 40
    python benchmarks/erdos_basins.py --symmetry benchmarks/results/erdos_polish_lse3.json
    python benchmarks/erdos_basins.py --reference haugland
    python benchmarks/erdos_basins.py --coarsen ref:ttt --factors 12,6,4 --round-s 30
    python benchmarks/erdos_basins.py --ladder 1800 --seed 0 --settings '{"n0": 51, "hop_T": 5e-6, "hop_sym": 0.15}'

Prints one JSON line last.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from ttlab.common.data import SharedDataMissing, shared_data_file
from ttlab.discover.library import erdos_lse as lse

RECORD = 0.380876  # TTT-Discover's published C5
REF_FILE = "erdos_reference.json"  # in the shared data folder (ttlab.common.data) unless --ref names a file


def load(path: str, ref: str | None = None) -> np.ndarray:
    """A construction from a search `best.json`, a polish result, a bare list of piece heights, or `ref:NAME`
    (a published construction of the `--ref` file by a prefix of its name, e.g. `ref:haugland`)."""
    if path.startswith("ref:"):
        return published(ref, path[4:])[1]
    d = json.loads(Path(path).read_text())
    h = d.get("construction", d.get("h")) if isinstance(d, dict) else d
    if h is None:
        raise SystemExit(f"{path}: no 'construction' (or 'h') list in this file")
    return np.asarray(h, dtype=np.float64)


def multistart(n: int, seconds: float, tau: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    t0, found = time.time(), []
    while time.time() - t0 < seconds:
        _, c = lse.continuation(lse.random_start(n, rng), tau, time.time() + 20.0)
        found.append(float(c))
    found.sort()
    return {"n": n, "tau_random": tau, "seconds": seconds, "starts": len(found), "best": found[0],
            "top5": found[:5], "median": float(np.median(found))}


def refine(h: np.ndarray, rounds: int, round_s: float) -> list[dict]:
    before = dict(lse.SETTINGS)
    lse.SETTINGS["objective"] = "scaled"  # through the verifier's rescale, as the polish stages use
    try:
        h = lse.normalise(h)
        rows = [{"n": h.size, "c5": float(lse.corr(h).max()), "s": 0.0}]
        print(json.dumps(rows[-1]), flush=True)
        for _ in range(rounds):
            t = time.time()
            h, c = lse.continuation(np.repeat(h, 2), 1e-7, time.time() + round_s)
            rows.append({"n": h.size, "c5": float(c), "s": round(time.time() - t, 1)})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        lse.SETTINGS.clear()
        lse.SETTINGS.update(before)
    return rows


def coarsen(h: np.ndarray, factors: list[int], seconds: float) -> list[dict]:
    """At which resolution a construction's basin appears: block-average it by each factor f (n must divide),
    then take the coarse profile to its local optimum (continuation from tau 1e-3, `seconds` each)."""
    rows = []
    for f in factors:
        if h.size % f:
            raise SystemExit(f"--factors {f}: does not divide n = {h.size}")
        c = h.reshape(-1, f).mean(axis=1)
        _, opt = lse.continuation(c, 1e-3, time.time() + seconds)
        rows.append({"factor": f, "n": c.size, "c5_block_mean": float(lse.corr(lse.normalise(c)).max()),
                     "c5_local_optimum": float(opt)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def ladder(seconds: float, settings: str, seed: int, save: str) -> dict:
    before = dict(lse.SETTINGS)
    lse.SETTINGS.update({"n0": 51, "hop_frac": 0.25, "hop_T": 5e-6, "hop_sym": 0.15, "hop_window": 0.3,
                         "levels": 2, "max_n": 1632} | (json.loads(settings) if settings else {}))
    used = dict(lse.SETTINGS)
    try:
        t = time.time()
        h = lse.ladder(seconds, np.random.default_rng(seed))
        wall = time.time() - t
    finally:
        lse.SETTINGS.clear()
        lse.SETTINGS.update(before)
    from ttlab.discover.tasks.erdos import exact_c5

    h = lse.exactly_feasible(h)
    c5, feasible = exact_c5(h)[:2]
    if save:
        Path(save).parent.mkdir(parents=True, exist_ok=True)
        Path(save).write_text(json.dumps({"h": h.tolist(), "c5": float(c5), "seed": seed}) + "\n")
    keys = ("n0", "hop_frac", "hop_T", "hop_sym", "hop_window", "hop_sigma", "levels", "max_n", "tau_random")
    return {"seconds": seconds, "seed": seed, "settings": {k: used[k] for k in keys}, "n": h.size,
            "c5_exact": float(c5), "feasible": bool(feasible), "below_record": bool(feasible and c5 < RECORD),
            "wall_s": round(wall, 1), "file": save}


def symmetry(h: np.ndarray) -> dict:
    h = lse.normalise(h)
    m = lse.normalise((h + h[::-1]) / 2)
    return {"n": h.size, "c5": float(lse.corr(h).max()), "c5_symmetrised": float(lse.corr(m).max()),
            "max_abs_h_minus_mirror": float(np.abs(h - h[::-1]).max())}


def published(path: str | None, name: str) -> tuple[str, np.ndarray]:
    """(full name, pieces) of the published construction whose name starts with `name` (in `path`, or by
    default in the shared data folder's erdos_reference.json)."""
    if not path:
        try:
            path = str(shared_data_file(REF_FILE))
        except SharedDataMissing as e:
            raise SystemExit(f"--ref not given and {e}") from None
    cons = json.loads(Path(path).read_text())["constructions"]
    hits = [c for c in cons if c["name"].startswith(name)]
    if not hits:
        raise SystemExit(f"{name}: not a construction in {path} (names: {', '.join(c['name'] for c in cons)})")
    return hits[0]["name"], np.asarray(hits[0]["h"], dtype=np.float64)


def reference(path: str | None, name: str, seconds: float = 20.0) -> dict:
    """A published construction by (a prefix of) its name, and its basin's local optimum at n and 2n."""
    full, h = published(path, name)
    h = lse.normalise(h)
    out = {"name": full, "n": h.size, "c5": float(lse.corr(h).max())}
    for up in (1, 2):
        _, c = lse.continuation(np.repeat(h, up), 1e-3, time.time() + seconds)
        out[f"basin_n{h.size * up}"] = float(c)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--multistart", action="store_true")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--tau", type=float, default=0.01, help="first temperature of each random start")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--refine", metavar="FILE")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round-s", type=float, default=100.0)
    ap.add_argument("--symmetry", metavar="FILE")
    ap.add_argument("--coarsen", metavar="FILE", help="block-average FILE (or ref:NAME) by --factors, re-optimise")
    ap.add_argument("--factors", default="12,6,4", help="comma-separated block sizes for --coarsen")
    ap.add_argument("--reference", metavar="NAME")
    ap.add_argument("--ref", default=None,
                    help="the published constructions (default: erdos_reference.json in the shared data folder)")
    ap.add_argument("--ladder", type=float, metavar="SECONDS", default=0.0)
    ap.add_argument("--settings", default="", help="JSON overrides of erdos_lse.SETTINGS for --ladder")
    ap.add_argument("--save", default="", help="--ladder: write the construction here")
    args = ap.parse_args()
    if not (args.multistart or args.refine or args.symmetry or args.reference or args.coarsen or args.ladder):
        ap.error("give at least one of --multistart, --refine FILE, --symmetry FILE, --reference NAME, --coarsen FILE, "
                 "--ladder SECONDS")
    out: dict = {"benchmark": "erdos_basins", "record": RECORD, "load_start": [round(x, 2) for x in os.getloadavg()]}
    if args.symmetry:
        out["symmetry"] = symmetry(load(args.symmetry, args.ref)) | {"file": args.symmetry}
    if args.reference:
        out["reference"] = reference(args.ref, args.reference)
    if args.refine:
        out["refine"] = {"file": args.refine, "rows": refine(load(args.refine, args.ref), args.rounds, args.round_s)}
    if args.coarsen:
        out["coarsen"] = {"file": args.coarsen, "seconds": args.round_s,
                          "rows": coarsen(load(args.coarsen, args.ref), [int(f) for f in args.factors.split(",")],
                                          args.round_s)}
    if args.ladder:
        out["ladder"] = ladder(args.ladder, args.settings, args.seed, args.save)
    if args.multistart:
        out["multistart"] = multistart(args.n, args.seconds, args.tau, args.seed)
    out["load_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
