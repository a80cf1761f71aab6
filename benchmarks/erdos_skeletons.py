"""Erdős coarse skeletons: does a construction's coarse version predict its polish, and are there lower ones?

Measurements of `ttlab.discover.skeletons` (in-process, one thread, every solve run to convergence so the
values do not depend on the load; a study of the optimiser, not a bound):

  --skeleton FILE@N_C (repeatable): the construction FILE (a result JSON, or ref:NAME of the published ones)
      block-averaged to N_C pieces (N_C must divide its n) and taken to its coarse local optimum, then doubled
      `--levels` times, each level converged: the value at every level next to the file's own C5.
  --search: a Metropolis hop chain at the coarse level from each --skeleton's coarse optimum (`--hops` local
      solves each, `--temperature`), the best `--top` distinct optima over all chains refined by `--levels`
      doublings; the lowest refinement is made exactly feasible, checked in rational arithmetic and written to
      `--save` (a start for `benchmarks/discover_polish.py --ref`).

    python benchmarks/erdos_skeletons.py --skeleton benchmarks/results/discover_polish/hop_s2.json@150 \
        --skeleton benchmarks/results/discover_search/auto_best.json@204 --levels 2
    python benchmarks/erdos_skeletons.py --search --skeleton ...@150 --hops 300 --top 6 --levels 2 --save runs/skel.json
    python benchmarks/erdos_skeletons.py --replot benchmarks/results/erdos_skeletons/search.json --png ...png

`--png`: C5 against the refinement level, one line per skeleton (coloured: the files' skeletons, grey: the
search's optima), with the record, our best polished value and the target 0.380860.

Prints one JSON line per measured row, and one JSON line last.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from ttlab.common.data import repo_relative, shared_data_file
from ttlab.discover import skeletons as sk
from ttlab.discover.basins import load
from ttlab.discover.tasks.erdos import RECORD

BEST = 0.3808685349
"""Our best exact C5 so far (`benchmarks/results/discover_polish/scaled_from_hop_s2.json`)."""
TARGET = 0.380860
"""The exact C5 the polish is asked to reach."""

ROOT = Path(__file__).resolve().parents[1]
REF = shared_data_file("erdos_reference.json", required=False)  # None when the shared data folder is absent


def parse_skeleton(spec: str) -> tuple[str, int]:
    """FILE@N_C -> (FILE, N_C)."""
    path, _, n_c = spec.rpartition("@")
    if not path or not n_c.isdigit():
        raise ValueError(f"--skeleton {spec!r}: expected FILE@N_C, e.g. hop_s2.json@150")
    return path, int(n_c)


def label(path: str) -> str:
    return path if path.startswith("ref:") else repo_relative(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skeleton", action="append", default=[], metavar="FILE@N_C")
    ap.add_argument("--levels", type=int, default=2, help="doublings after the coarse level")
    ap.add_argument("--search", action="store_true")
    ap.add_argument("--hops", type=int, default=300, help="--search: local solves per chain")
    ap.add_argument("--temperature", type=float, default=3e-6, help="--search: Metropolis temperature")
    ap.add_argument("--top", type=int, default=6, help="--search: distinct optima refined")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default="", help="--search: write the best refinement (exactly feasible) here")
    ap.add_argument("--ref", default=str(REF) if REF else None, help="published constructions (for ref:NAME)")
    ap.add_argument("--out", default="", help="also write the last JSON line here")
    ap.add_argument("--png", default="", help="plot C5 against the refinement level here")
    ap.add_argument("--replot", default="", metavar="JSON", help="only redraw --png from a saved result")
    a = ap.parse_args()
    if a.replot:
        if not a.png:
            ap.error("--replot needs --png")
        try:
            plot(json.loads(Path(a.replot).read_text()), Path(a.png))
        except (OSError, ValueError, KeyError) as e:
            ap.error(f"--replot {a.replot}: {e}")
        return
    if not a.skeleton:
        ap.error("give at least one --skeleton FILE@N_C")
    if a.levels < 0 or a.hops < 1 or a.top < 1 or a.temperature <= 0:
        ap.error("--levels must be >= 0, --hops and --top >= 1, --temperature > 0")
    try:
        specs = [parse_skeleton(s) for s in a.skeleton]
        sources = {label(p): (load(p, a.ref), n_c) for p, n_c in specs}
    except (ValueError, OSError) as e:
        ap.error(str(e))
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    load0, t0, c0 = os.getloadavg(), time.time(), time.thread_time()
    out: dict = {"benchmark": "erdos_skeletons", "record": RECORD, "commit": rev, "skeletons": []}
    coarse = {}
    try:
        for name, (h, n_c) in sources.items():
            row = {"file": name} | sk.ladder(h, n_c, a.levels)
            print(json.dumps(row), flush=True)
            out["skeletons"].append(row)
            coarse[name] = sk.coarse_optimum(sk.block_mean(h, n_c))[0]
    except ValueError as e:
        raise SystemExit(f"--skeleton: {e}") from None
    if a.search:
        cfg = sk.Chain(hops=a.hops, temperature=a.temperature)
        res = sk.search(coarse, cfg, a.seed, a.top, a.levels)
        best = min(res["top"], key=lambda r: r["levels"][-1]["c5"])
        top = [{k: v for k, v in r.items() if k != "h"} for r in res["top"]]
        for r in top:
            print(json.dumps(r), flush=True)
        check = sk.exact_check(best["h"])
        out["search"] = {"config": vars(cfg), "seed": a.seed, "chains": res["chains"], "top": top,
                         "best": {k: v for k, v in check.items() if k != "h"} | {"chain": best["chain"]}}
        if a.save:
            Path(a.save).parent.mkdir(parents=True, exist_ok=True)
            Path(a.save).write_text(json.dumps({"h": check["h"].tolist(), "c5": check["c5_exact"],
                                                "feasible": check["feasible"], "chain": best["chain"]}) + "\n")
            out["search"]["saved"] = repo_relative(a.save)
    out |= {"machine": {"nproc": os.cpu_count(), "load_start": [round(x, 2) for x in load0],
                        "load_end": [round(x, 2) for x in os.getloadavg()]},
            "wall_s": round(time.time() - t0, 1), "cpu_s": round(time.thread_time() - c0, 1)}
    if a.png:
        plot(out, Path(a.png))
    line = json.dumps(out)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(line + "\n")
    print(line)


def plot(res: dict, path: Path) -> None:
    """C5 against refinement level (0 = the coarse skeleton, k = k doublings), one polyline per skeleton."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    lines = [(r["file"], r["levels"], True) for r in res["skeletons"]]
    lines += [(r["chain"], r["levels"], False) for r in res.get("search", {}).get("top", [])]
    vals = [lv["c5"] for _, lvs, _ in lines for lv in lvs] + [TARGET, BEST]
    lo, hi = min(vals) - 1e-6, min(max(vals), 0.38090) + 1e-6
    levels = max(len(lvs) for _, lvs, _ in lines)
    fig, (ax,) = charts.panels(1, size=(9.0, 5.0), title="Erdos C5 of coarse skeletons refined by doublings "
                               "(colour: files, grey: hop-chain optima)")
    for name, v, col in [(f"record {RECORD}", RECORD, (200, 0, 0)), (f"our best {BEST}", BEST, (0, 120, 0)),
                         (f"target {TARGET}", TARGET, (120, 0, 160))]:
        if lo <= v <= hi:  # our best: the skeletons' lines end just above it, so its label goes under the line
            charts.reference(ax, v, name, charts.rgb(col), below=v == BEST)
    colors = [(0, 90, 200), (200, 120, 0), (0, 160, 160), (140, 0, 160), (120, 80, 0)]
    for i, (name, lvs, own) in enumerate(lines):
        label = Path(name).stem + f" (n_c {lvs[0]['n']})" if own else "hop-chain optima"
        charts.series(ax, range(len(lvs)), [lv["c5"] for lv in lvs],
                      charts.rgb(colors[i % len(colors)] if own else (160, 160, 160)), label=label, span=(lo, hi),
                      lw=2 if own else 1, zorder=3 if own else 2)
    ax.set_xticks(range(levels), [f"n_c x{2 ** k}" for k in range(levels)])
    ax.set(xlim=(0, max(1, levels - 1)), ylim=(lo, hi), xlabel="refinement level", ylabel="C5")
    ax.yaxis.set_major_formatter("{x:.7f}")
    charts.legend_outside(ax)
    charts.save(fig, path)


if __name__ == "__main__":
    main()
