"""Do the choices a block program makes matter for the reward? Fixed compositions and random ones, same budget.

    python benchmarks/discover_blocks.py [--budget-s 60] [--seeds 2] [--random 8]

Every program imports `erdos_blocks`, runs in the sandbox (one at a time, CPU-time budget `--budget-s` with a
wall backstop of `--wall-factor` x that) from the same parent, and is scored by the verifier. Arms:

- from a tree root (a random initial state, C5 ~0.5; what a search starts from), one choice changed at a
  time against `ladder` (the library's random-start recipe: multistart at 51 pieces, Metropolis hops, two
  doublings with monotone hops, refinement to 816): no hops, monotone instead of Metropolis hops, a start at
  204 pieces instead of 51, refinement only to 204 pieces;
- from a good parent (the best `ladder` result of this run): coarse hops then refinement back (hop mode),
  continuation at full size, exact LP steps;
- `--random` programs of the random-blocks proposer from the root (the no-model baseline's distribution).

Prints per arm the C5 of each seed, its mean and best, and the program CPU seconds; writes JSON (--out) and a
strip plot (--png); one JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np

from ttlab.discover.blocks import program_meta, with_blocks
from ttlab.discover.random_blocks import random_program
from ttlab.discover.sandbox import Job, Limits, SandboxPool
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.erdos import RECORD

ROOT = Path(__file__).resolve().parents[1]
HEAD = ("import numpy as np\nimport erdos_blocks as eb\n\n\ndef solve(parent, budget_s, seed):\n"
        "    rng = np.random.default_rng(seed)\n    clock = eb.Clock(budget_s, wall_factor={wf})\n"
        "    h = eb.normalise(np.asarray(parent, dtype=float))\n")
END = "    eb.report(clock)\n    return eb.finish(h)\n"
LADDER = ("    h, c = eb.multistart({n0}, clock.until(0.05), rng, tau=0.01)\n"
          "    h, c, hops = eb.hop(h, clock.until(0.4), rng, temperature={T}, sym=0.15, sigma=0.3, window=0.3)\n"
          "    h, c, hops = eb.hop(eb.upsample(h, 2), clock.until(0.6), rng, sigma=0.3, window=0.3)\n"
          "    h, c, hops = eb.hop(eb.upsample(h, 2), clock.until(0.75), rng, sigma=0.3, window=0.3)\n"
          "    h, c = eb.refine(h, clock.until(0.9), {max_n})\n")
ROOT_ARMS = {
    "ladder": LADDER.format(n0=51, T=5e-6, max_n=816),
    "no_hops": ("    h, c = eb.multistart(51, clock.until(0.75), rng, tau=0.01)\n"
                "    h, c = eb.refine(h, clock.until(0.9), 816)\n"),
    "monotone_hops": LADDER.format(n0=51, T=0.0, max_n=816),
    "start_at_204": LADDER.format(n0=204, T=5e-6, max_n=816),
    "refine_to_204": LADDER.format(n0=51, T=5e-6, max_n=204),
}
PARENT_ARMS = {
    "hop_refine": ("    n = h.size\n    h, c, hops = eb.hop(eb.coarsen(h, 4), clock.until(0.6), rng, sigma=0.3, window=0.3)\n"
                   "    h, c = eb.refine(h, clock.until(0.9), n, to_max=True)\n"),
    "continuation": "    h, c = eb.continuation(h, clock.until(0.9), tau0=1e-6)\n",
    "lp_polish": "    h, c, steps = eb.lp_polish(h, clock.until(0.9))\n",
}


def run_arm(pool, task, code: str, parent: np.ndarray, budget_s: float, seeds: list[int], limits: Limits) -> list[dict]:
    futs = [pool.submit(Job(with_blocks(code), parent, budget_s, seed=s), limits) for s in seeds]
    out = []
    for s, f in zip(seeds, futs, strict=True):
        r = f.result()
        v = task.verify(r.output) if r.ok else None
        meta = program_meta(r.stdout)
        out.append({"seed": s, "status": r.status, "c5": v.score if v is not None and v.valid else None,
                    "n": int(r.output.size) if r.ok else None, "cpu_s": meta.get("cpu_s"), "wall_s": round(r.wall_s, 1),
                    "construction": r.output.tolist() if v is not None and v.valid else None})
        print(json.dumps({k: v for k, v in out[-1].items() if k != "construction"}), flush=True)
    return out


def summary(rows: list[dict]) -> dict:
    cs = [r["c5"] for r in rows if r["c5"] is not None]
    return {"c5": [r["c5"] for r in rows], "mean": float(np.mean(cs)) if cs else None, "best": min(cs) if cs else None,
            "valid": len(cs), "cpu_s": [r["cpu_s"] for r in rows]}


def plot(res: dict, path: Path) -> None:
    """Each arm's C5 values as dots on one row, the record as a red line (values past the axis drawn at its edge)."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    arms = list(res["arms"])
    vals = [c for a in arms for c in res["arms"][a]["c5"] if c is not None]
    lo, hi = min(vals + [RECORD]) - 2e-5, min(max(vals), 0.3835) + 2e-5
    fig, (ax,) = charts.panels(1, size=(9.0, 0.9 + 0.35 * len(arms)), title=f"Erdos C5 of block programs, "
                               f"{res['config']['budget_s']:g} CPU seconds each (lower is better)")
    for i, a in enumerate(arms):
        cs = [min(c, hi) for c in res["arms"][a]["c5"] if c is not None]
        ax.plot(cs, [i] * len(cs), "o", ms=5, color=charts.rgb((0, 90, 200)), clip_on=False)
    ax.axvline(RECORD, color=charts.rgb((200, 0, 0)), lw=1)
    ax.annotate(f"record {RECORD}", (RECORD, 0), xycoords=("data", "axes fraction"), xytext=(3, 3),
                textcoords="offset points", fontsize=8, color=charts.rgb((200, 0, 0)))
    ax.set_yticks(range(len(arms)), [f"{a} ({res['arms'][a]['parent']})" for a in arms])
    ax.set_ylim(len(arms) - 0.5, -0.5)
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_formatter("{x:.5f}")
    ax.set_xlabel("C5")
    ax.grid(axis="y", visible=False)
    charts.save(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-s", type=float, default=60.0, help="CPU seconds per program")
    ap.add_argument("--wall-factor", type=float, default=4.0)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--random", type=int, default=8, help="random-blocks programs from the root")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "discover_blocks" / "blocks.json"))
    ap.add_argument("--png", default=str(ROOT / "benchmarks" / "results" / "discover_blocks" / "blocks.png"))
    a = ap.parse_args()
    if a.budget_s <= 0 or a.seeds < 1 or a.random < 0 or a.wall_factor < 1:
        raise SystemExit("discover_blocks: --budget-s > 0, --seeds >= 1, --random >= 0, --wall-factor >= 1")
    task = get_task("erdos")
    t0, load0 = time.time(), os.getloadavg()
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    root = task.initial_states(np.random.default_rng(0), 1)[0]
    seeds = list(range(a.seeds))
    limits = Limits(wall_s=a.wall_factor * a.budget_s + 30.0)
    head = HEAD.format(wf=a.wall_factor)
    arms: dict[str, dict] = {}
    with SandboxPool(1, limits) as pool:
        for name, body in ROOT_ARMS.items():
            print(f"arm {name} (root)", flush=True)
            rows = run_arm(pool, task, head + body + END, root, a.budget_s, seeds, limits)
            arms[name] = {"parent": "root", **summary(rows), "rows": rows}
        good = min((r for r in arms["ladder"]["rows"] if r["c5"] is not None), key=lambda r: r["c5"])
        parent = np.asarray(good["construction"], dtype=np.float64)
        for name, body in PARENT_ARMS.items():
            print(f"arm {name} (good parent {good['c5']:.9f})", flush=True)
            rows = run_arm(pool, task, head + body + END, parent, a.budget_s, seeds, limits)
            arms[name] = {"parent": f"ladder best {good['c5']:.7f}", **summary(rows), "rows": rows}
        rng = np.random.default_rng(1)
        rand_rows, choices = [], []
        for i in range(a.random):
            code, ch = random_program(rng, a.wall_factor)
            rand_rows += run_arm(pool, task, code, root, a.budget_s, [i], limits)
            choices.append(ch)
        if a.random:
            arms["random_blocks"] = {"parent": "root", **summary(rand_rows), "rows": rand_rows, "choices": choices}
    for arm in arms.values():
        for r in arm["rows"]:
            r.pop("construction", None)
    res = {"benchmark": "discover_blocks", "commit": rev, "wall_s": round(time.time() - t0, 1),
           "machine": {"nproc": os.cpu_count(), "load_start": [round(x, 2) for x in load0],
                       "load_end": [round(x, 2) for x in os.getloadavg()]},
           "config": {"budget_s": a.budget_s, "wall_factor": a.wall_factor, "seeds": a.seeds, "random": a.random,
                      "root_c5": task.verify(root).score},
           "arms": arms}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res) + "\n")
    plot(res, Path(a.png))
    print(json.dumps({"benchmark": "discover_blocks", "commit": rev, "wall_s": res["wall_s"],
                      "means": {k: v["mean"] for k, v in arms.items()}, "best": {k: v["best"] for k, v in arms.items()}}))


if __name__ == "__main__":
    main()
