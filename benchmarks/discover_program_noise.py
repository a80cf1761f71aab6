"""Is a block program's score reproducible? The same programs run twice, quiet and loaded, per program clock.

    python benchmarks/discover_program_noise.py --programs 16 --random 8 --seed 0 \\
        --out benchmarks/results/discover_program_noise/noise.json --png benchmarks/results/discover_program_noise/noise.png

Takes `--programs` programs sampled from the blocks preset's shipped warm start (frozen, the preset's T, the
prompt of the first root of `--seed`, the tuning seed) and `--random` programs of the random-blocks grammar,
then runs every program twice from the same parent with the same seed, for each program clock
(`with_blocks(code, clock)`): once as the machine is, once with a busy process added (`while True: pass`, one
per `--burners`). Per clock: how far the two runs' verified C5 lie apart (median / max over programs valid in
both), how many are bitwise equal, the CPU, work and wall seconds the programs report, and how often a work
clock was stopped by its wall backstop. Writes the JSON (and a PNG of |dC5| per program) and prints ONE JSON
line last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ttlab.common.data import repo_relative
from ttlab.discover.blocks import CLOCKS, clock_wall_factor, program_meta, with_blocks
from ttlab.discover.random_blocks import random_program
from ttlab.discover.sandbox import Job, Limits, SandboxPool
from ttlab.discover.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]


def llm_programs(n: int, seed: int, threads: int) -> tuple[list[str], np.ndarray, str]:
    """`n` programs of the blocks preset's warm start for the first root of `seed`; (codes, parent, prompt)."""
    import torch  # heavy: only when LLM programs are asked for

    from ttlab.common.device import seed_everything
    from ttlab.discover.llm.policy import LLMPolicy
    from ttlab.discover.llm.presets import cpu_smollm2_blocks
    from ttlab.discover.llm.warmstart import warm_start
    from ttlab.discover.prompts import ANSWER_PREFIXES, PROMPT_FORMATS, PromptState, extract_code

    cfg = cpu_smollm2_blocks()
    cfg.seed = seed
    task = get_task(cfg.task)
    torch.set_num_threads(max(1, threads))
    seed_everything(seed)
    prefix = ANSWER_PREFIXES[cfg.prompt_format](task)
    pol = LLMPolicy(cfg.policy, torch.device("cpu"), seed=seed, answer_prefix=prefix)
    warm_start(pol, cfg.warm, log=lambda s: print(s, flush=True), prompt_format=cfg.prompt_format)
    root = task.verify(task.initial_states(np.random.default_rng(seed), cfg.init_states)[0])
    prompt = PROMPT_FORMATS[cfg.prompt_format](task, PromptState(code="", score=root.score))
    codes = []
    while len(codes) < n:
        for g in pol.generate([prompt] * min(cfg.policy.gen_batch_size, n - len(codes))):
            codes.append(extract_code(prefix + g.text))
    return codes, np.asarray(root.construction, dtype=np.float64), prompt


def run_all(codes: list[str | None], parent: np.ndarray, seeds: list[int], clock: str, budget_s: float,
            grace_s: float, burners: int) -> list[dict]:
    """Every program once (one sandbox worker), with `burners` busy processes alive while they run."""
    task = get_task("erdos")
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
    out = []
    try:
        with SandboxPool(1, Limits(wall_s=clock_wall_factor(clock) * budget_s + grace_s)) as pool:
            for code, s in zip(codes, seeds, strict=True):
                if code is None:
                    out.append({"status": "no_code", "c5": None})
                    continue
                sr = pool.submit(Job(with_blocks(code, clock), parent, budget_s, seed=s)).result()
                vr = task.verify(sr.output, sr.reported_score) if sr.ok else None
                meta = program_meta(sr.stdout)
                out.append({"status": sr.status, "c5": vr.score if vr is not None and vr.valid else None,
                            "wall_s": round(sr.wall_s, 3), **{k: meta[k] for k in ("cpu_s", "work_s", "wall_stops")
                                                             if k in meta}})
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return out


def _median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def summary(a: list[dict], b: list[dict]) -> dict:
    both = [(x["c5"], y["c5"]) for x, y in zip(a, b, strict=True) if x["c5"] is not None and y["c5"] is not None]
    d = np.array([abs(x - y) for x, y in both])
    cpu = [r["cpu_s"] for r in a + b if r.get("cpu_s") is not None]
    return {"valid_both": len(both), "valid_one": sum((x["c5"] is None) != (y["c5"] is None) for x, y in zip(a, b, strict=True)),
            "identical": int((d == 0).sum()), "median_abs_dc5": float(np.median(d)) if d.size else None,
            "max_abs_dc5": float(d.max()) if d.size else None,
            "best_quiet": min((x for x, _ in both), default=None), "best_loaded": min((y for _, y in both), default=None),
            "median_cpu_s_quiet": _median([r.get("cpu_s") for r in a]),
            "median_cpu_s_loaded": _median([r.get("cpu_s") for r in b]),
            "median_wall_s_quiet": _median([r.get("wall_s") for r in a]),
            "median_wall_s_loaded": _median([r.get("wall_s") for r in b]),
            "cpu_s_range": [min(cpu), max(cpu)] if cpu else None,
            "programs_with_wall_stops": sum(1 for r in a + b if r.get("wall_stops", 0) > 0)}


def plot(res: dict, path: Path) -> None:
    """|C5 quiet - C5 loaded| per program and clock on a log axis (equal runs drawn at the floor)."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    lo, hi = 1e-12, 1e-3  # an exact repeat is drawn at 1e-12
    colors = {"time": (214, 39, 40), "work": (31, 119, 180)}
    fig, (ax,) = charts.panels(1, size=(7.0, 3.6), title="same program + seed, run quiet then with a busy core: "
                               "|dC5| (bottom row: identical)")
    for k, clock in enumerate(res["clocks"]):
        runs = res["runs"][clock]
        pts = [(i + 1 + 0.2 * (k - 0.5), min(hi, max(abs(a["c5"] - b["c5"]), lo)))
               for i, (a, b) in enumerate(zip(runs["quiet"], runs["loaded"], strict=True))
               if a["c5"] is not None and b["c5"] is not None]
        ax.plot([x for x, _ in pts], [y for _, y in pts], "o", ms=4, color=charts.rgb(colors.get(clock, (0, 0, 0))),
                label=f"clock: {clock}", clip_on=False)
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ax.set_xlim(0.5, len(res["codes"]) + 0.5)
    ax.set_xlabel(f"program (1-{res['programs_llm']}: LLM warm start; then random blocks)")
    ax.set_ylabel("|C5 quiet - C5 loaded|")
    charts.legend_outside(ax)
    charts.save(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=16, help="programs from the LLM warm start")
    ap.add_argument("--random", type=int, default=8, help="programs from the random-blocks grammar")
    ap.add_argument("--seed", type=int, default=0, help="the tuning seed (root and sampler)")
    ap.add_argument("--budget-s", type=float, default=2.0)
    ap.add_argument("--grace-s", type=float, default=5.0)
    ap.add_argument("--burners", type=int, default=1)
    ap.add_argument("--clocks", default=",".join(CLOCKS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--png")
    args = ap.parse_args()
    clocks = [c for c in args.clocks.split(",") if c]
    bad = [c for c in clocks if c not in CLOCKS]
    if bad or not clocks:
        raise SystemExit(f"--clocks {args.clocks}: each one of {', '.join(CLOCKS)}")
    if args.programs < 0 or args.random < 0 or args.programs + args.random == 0:
        raise SystemExit("--programs / --random: at least one program, none negative")
    t0, load0 = time.time(), os.getloadavg()
    codes, parent, prompt = ([], None, "")
    if args.programs:
        codes, parent, prompt = llm_programs(args.programs, args.seed, args.threads)
    if parent is None:
        task = get_task("erdos")
        parent = task.verify(task.initial_states(np.random.default_rng(args.seed), 2)[0]).construction
    rng = np.random.default_rng(args.seed + 7)
    codes += [random_program(rng)[0] for _ in range(args.random)]
    seeds = [1000 + i for i in range(len(codes))]
    runs, summ = {}, {}
    for clock in clocks:
        quiet = run_all(codes, parent, seeds, clock, args.budget_s, args.grace_s, 0)
        loaded = run_all(codes, parent, seeds, clock, args.budget_s, args.grace_s, args.burners)
        runs[clock] = {"quiet": quiet, "loaded": loaded}
        n = args.programs
        summ[clock] = {"all": summary(quiet, loaded), "llm": summary(quiet[:n], loaded[:n]),
                       "random_blocks": summary(quiet[n:], loaded[n:])}
        print(f"[{clock}] {summ[clock]['all']}", flush=True)
    git = ["git", "-C", str(ROOT)]
    res = {"benchmark": "discover_program_noise", "seed": args.seed, "programs_llm": args.programs,
           "programs_random": args.random, "budget_s": args.budget_s, "burners": args.burners, "clocks": clocks,
           "summary": summ, "runs": runs, "codes": codes, "prompt_chars": len(prompt),
           "commit": subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "dirty": bool(subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True, text=True).stdout),
           "nproc": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(),
           "wall_s": round(time.time() - t0, 1)}
    if args.png:
        res["png"] = repo_relative(args.png)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    if args.png:
        Path(args.png).parent.mkdir(parents=True, exist_ok=True)
        plot(res, Path(args.png))
    print(json.dumps({k: res[k] for k in ("benchmark", "seed", "clocks", "summary", "wall_s", "loadavg_start",
                                          "loadavg_end", "commit")}))


if __name__ == "__main__":
    main()
