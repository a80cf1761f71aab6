"""Does a library program compute the same amount on a loaded core? Wall-clock against CPU-time budgets.

    python benchmarks/discover_cpu_clock.py [--budget-s 40] [--seed 0]

Runs the Erdős ladder (`library/erdos_lse.py`, `start: random` with hops, the search's `start: auto` ladder
settings) in the sandbox, pinned to one core, four times: alone and with a busy process pinned to the same
core (about half the core each), each with a wall-clock budget (`wall_factor` 1) and with a CPU-time budget
(`wall_factor` 4). Records the CPU and wall seconds the program reports, the hops it made at each size (from
its output) and the verified C5. Writes JSON (--out); one JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ttlab.discover.blocks import program_meta, with_blocks
from ttlab.discover.proposers import library_programs, read_settings, render
from ttlab.discover.sandbox import Limits, run_program
from ttlab.discover.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
LADDER = {"start": "random", "hop_frac": 0.6, "metro_frac": 0.4, "hop_T": 5e-6, "hop_sym": 0.15, "hop_window": 0.3,
          "hop_sigma": 0.3, "hop_ftol": 1e-11, "n0": 51, "levels": 2, "max_n": 816, "coarsen": 4, "upsample": 1}
HOPS = re.compile(r"n=(\d+) C5=([0-9.]+) after (\d+) hops")


def run(budget_s: float, wall_factor: float, seed: int, cpu: int, loaded: bool) -> dict:
    src = library_programs("erdos")["lse"]
    code = with_blocks(render(src, {**read_settings(src), **LADDER, "wall_factor": wall_factor}))
    burner = None
    if loaded:
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                  preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        time.sleep(0.5)
    try:
        t0 = time.time()
        res = run_program(code, parent=None, budget_s=budget_s, seed=seed,
                          limits=Limits(wall_s=wall_factor * budget_s + 60.0))
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    v = get_task("erdos").verify(res.output) if res.ok else None
    meta = program_meta(res.stdout)
    return {"loaded": loaded, "wall_factor": wall_factor, "status": res.status, "wall_s": round(time.time() - t0, 1),
            "cpu_s": meta.get("cpu_s"), "program_wall_s": meta.get("wall_s"),
            "hops": [{"n": int(n), "c5": float(c), "hops": int(k)} for n, c, k in HOPS.findall(res.stdout)],
            "c5": v.score if v is not None and v.valid else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-s", type=float, default=40.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "discover_cpu_clock" / "cpu_clock.json"))
    a = ap.parse_args()
    if a.budget_s <= 0:
        raise SystemExit("discover_cpu_clock: --budget-s must be > 0")
    cpu = sorted(os.sched_getaffinity(0))[-1]
    os.sched_setaffinity(0, {cpu})  # the sandbox runner (and the program) inherit this core
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    t0, load0 = time.time(), os.getloadavg()
    rows = []
    for wf in (1.0, 4.0):
        for loaded in (False, True):
            rows.append(run(a.budget_s, wf, a.seed, cpu, loaded))
            print(json.dumps(rows[-1]), flush=True)
    res = {"benchmark": "discover_cpu_clock", "commit": rev, "wall_s": round(time.time() - t0, 1),
           "machine": {"nproc": os.cpu_count(), "core": cpu, "load_start": [round(x, 2) for x in load0],
                       "load_end": [round(x, 2) for x in os.getloadavg()]},
           "config": {"budget_s": a.budget_s, "seed": a.seed, "settings": LADDER}, "runs": rows}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res) + "\n")
    first = {f"wf{r['wall_factor']:g}_{'loaded' if r['loaded'] else 'alone'}":
             (r["cpu_s"], r["hops"][0]["hops"] if r["hops"] else None) for r in rows}
    print(json.dumps({"benchmark": "discover_cpu_clock", "commit": rev, "cpu_s_and_hops_at_n51": first,
                      "c5": [r["c5"] for r in rows], "wall_s": res["wall_s"]}))


if __name__ == "__main__":
    main()
