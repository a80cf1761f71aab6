"""Co-player checkpoints as partners: do drivers trained with different reward weights differ as partners?

Trains (or loads from the cache under `--root`) the co-players of `partner_coplayers.COPLAYERS`: memoryless MLPs
trained on the blind crossing (`presets.partner_adapt`) as the ego against the scripted training partners, each
with its own reward weights. Then, on the held-out scenes, for every partner (the scripted types and the
co-players):

- how it drives (`partner_coplayers.partner_profile`) against a scripted ego that goes at once and one that waits
  1.2 s: the trial tick it starts, the share of trials it crosses the conflict point first, collisions, its goals;
- what the best ego behaviour against it is: the trial-0 / trial-1 score of the scripted egos (going at once,
  waiting 1.2 s, and the memory ego of `partner_scripted`) against it alone.

The co-players are what `benchmarks/drive_partner_adapt.py --coplayer-population` adds to the population (it reuses
this cache). Writes the JSON (`--out`, with commit, machine, load and wall time) and a PNG (`--png`), and prints
ONE JSON line last.

    python benchmarks/drive_coplayers.py --jobs 2
    python benchmarks/drive_coplayers.py --preset partner_adapt_debug --steps 320 --envs 4 --episodes 1 \\
        --root /tmp/cop --out /tmp/cop.json --png /tmp/cop.png                  # a smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from ttlab.common.checkpoint import load_checkpoint
from ttlab.common.data import repo_relative
from ttlab.drive.partner_adapt import evaluate_partner, partner_label, short_metrics
from ttlab.drive.partner_coplayers import (
    COPLAYERS,
    HELD_OUT_COPLAYERS,
    PROFILE_EGOS,
    TRAIN_COPLAYERS,
    coplayer_config,
    ensure_coplayer,
    partner_profile,
)
from ttlab.drive.partner_scripted import MemoryEgo, TimedEgo
from ttlab.drive.partners import HELD_OUT_PARTNERS, TRAIN_PARTNERS
from ttlab.drive.presets import TRAIN_PRESETS

RESULTS = Path(__file__).resolve().parents[1] / "runs" / "bench" / "drive_partner_adapt"
ROOT = Path(__file__).resolve().parents[1] / "runs" / "drive" / "coplayers"
EGOS = {"go_at_once": lambda e: TimedEgo(e, 0, 6), "wait_1.2s": lambda e: TimedEgo(e, 12, 6),
        "memory": lambda e: MemoryEgo(e, 12)}


def _train(spec, root: str, preset: str, t_start: float) -> tuple[str, str, float]:
    """One co-player, trained on one thread unless cached: (name, stem, wall s)."""
    torch.set_num_threads(1)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.0f}s] {spec.name}: {msg}", flush=True)

    stem = ensure_coplayer(spec, root, preset, log)
    return spec.name, str(stem), round(time.perf_counter() - t0, 1)


def plot(result: dict, path: Path) -> None:
    """Per partner: the tick it reaches the conflict point and its partner-first rate against each profile ego;
    scripted ego scores."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    names = list(result["partners"])
    colours = {"go_at_once": "tab:blue", "wait_1.2s": "tab:orange", "memory": "tab:green"}
    prof, egos = result["profile"], result["scripted_egos"]
    fig, axes = charts.panels(4, cols=2, size=(5.5, 3.0), title="co-players on held-out scenes")
    for ax, title, value, keys, vmax in (
            (axes[0], "tick the partner reaches the conflict point", lambda n, k: prof[n][k]["cross_tick_mean"],
             PROFILE_EGOS, 50),
            (axes[1], "partner crosses first (rate)", lambda n, k: prof[n][k]["partner_first_rate"], PROFILE_EGOS, 1),
            (axes[2], "scripted ego trial-0 score", lambda n, k: egos[n][k]["trial_0_score"], EGOS, 1),
            (axes[3], "scripted ego trial-1 score", lambda n, k: egos[n][k]["trial_1_score"], EGOS, 1)):
        charts.grouped_bars(ax, [n[:16] for n in names], [[(min(value(n, k), vmax), colours[k]) for k in keys]
                                                          for n in names])
        ax.set_ylim(0, vmax)
        ax.set_title(title)
    charts.key(fig, [("ego going at once", colours["go_at_once"]), ("ego waiting 1.2 s", colours["wait_1.2s"]),
                     ("memory ego", colours["memory"])])
    charts.save(fig, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="partner_adapt", choices=("partner_adapt", "partner_adapt_debug"))
    ap.add_argument("--root", type=Path, default=ROOT, help="co-player checkpoint cache")
    ap.add_argument("--steps", type=int, default=0, help="co-player training steps (0: each spec's)")
    ap.add_argument("--names", default=",".join(COPLAYERS),
                    help=f"co-players to train and profile ({', '.join(COPLAYERS)})")
    ap.add_argument("--envs", type=int, default=64, help="held-out envs per measurement")
    ap.add_argument("--episodes", type=int, default=2, help="episodes per env per measurement")
    ap.add_argument("--jobs", type=int, default=1, help="co-players trained at once, one thread each")
    ap.add_argument("--out", type=Path, default=RESULTS / "coplayers.json")
    ap.add_argument("--png", type=Path, default=RESULTS / "coplayers.png")
    args = ap.parse_args()
    names = [n for n in args.names.split(",") if n]
    bad = [n for n in names if n not in COPLAYERS]
    if bad or not names:
        print(f"drive_coplayers.py: --names {args.names}: unknown {bad} ({', '.join(COPLAYERS)})")
        return 2
    if args.steps < 0 or args.envs < 1 or args.episodes < 1 or args.jobs < 1:
        print("drive_coplayers.py: --steps must be >= 0, --envs, --episodes and --jobs >= 1")
        return 2
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = "unknown"
    t_start, load0 = time.perf_counter(), os.getloadavg()
    torch.set_num_threads(1)

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.0f}s] {msg}", flush=True)

    specs = [dataclasses.replace(COPLAYERS[n], steps=args.steps) if args.steps else COPLAYERS[n] for n in names]
    job_args = [(s, str(args.root), args.preset, t_start) for s in specs]
    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            trained = pool.starmap(_train, job_args)
    else:
        trained = [_train(*a) for a in job_args]
    stems = {n: s for n, s, _ in trained}
    t_train = time.perf_counter() - t_start
    base = TRAIN_PRESETS[args.preset]()
    partners = [*TRAIN_PARTNERS, *HELD_OUT_PARTNERS, *(stems[n] for n in names)]
    profile, egos = {}, {}
    for p in partners:
        lab = partner_label(p)
        profile[lab] = {e: partner_profile(base, p, e, args.episodes, args.envs) for e in PROFILE_EGOS}
        egos[lab] = {e: short_metrics(evaluate_partner(base, fn, [p], 0, args.episodes, args.envs), base.env.k_trials)
                     for e, fn in EGOS.items()}
        for e in egos[lab].values():
            e.pop("per_partner", None)
        log(f"{lab}: " + " | ".join(f"vs {e}: start {v['start_tick_mean']} at the conflict point "
                                    f"{v['cross_tick_mean']} first {v['partner_first_rate']} coll "
                                    f"{v['collision_rate']}" for e, v in profile[lab].items())
            + " || " + " ".join(f"{e} {v['trial_0_score']:.2f}/{v['trial_1_score']:.2f}" for e, v in egos[lab].items()))
    coplayers = {}
    for (n, stem, wall), spec in zip(trained, specs, strict=True):
        ck = load_checkpoint(stem, "cpu")
        coplayers[partner_label(stem)] = {
            "name": n, "spec": dataclasses.asdict(spec), "checkpoint": repo_relative(stem), "wall_s": wall,
            "train_wall_s": ck.get("train_wall_s"), "updates": ck.get("update"),
            "train_score_last10": ck.get("train_score_last10"),
            "role": "train" if n in TRAIN_COPLAYERS else "held_out" if n in HELD_OUT_COPLAYERS else "candidate",
            "reward_weights": {k: getattr(coplayer_config(spec, args.preset).env, k) for k in
                               ("reward_goal", "reward_collision", "reward_progress", "reward_conflict")}}
    result = {
        "benchmark": "drive_coplayers", "command": " ".join(["python benchmarks/drive_coplayers.py", *sys.argv[1:]]),
        "commit": commit, "nproc": os.cpu_count(), "jobs": args.jobs,
        "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.perf_counter() - t_start, 1), "train_wall_s": round(t_train, 1),
        "config": {"preset": args.preset, "scenes": "held-out (presets.PARTNER_HELD_OUT)", "envs": args.envs,
                   "episodes": args.episodes, "profile_egos": {k: {"go": g, "lon": a} for k, (g, a) in PROFILE_EGOS.items()}},
        "partners": [partner_label(p) for p in partners], "coplayers": coplayers, "profile": profile,
        "scripted_egos": egos,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, separators=(",", ":")) + "\n")
    plot(result, args.png)
    line = {"benchmark": "drive_coplayers", "wall_s": result["wall_s"], "commit": commit[:10],
            **{f"{lab}_cross_tick_vs_{e}": profile[lab][e]["cross_tick_mean"] for lab in profile for e in PROFILE_EGOS},
            **{f"{lab}_first_vs_{e}": profile[lab][e]["partner_first_rate"] for lab in profile for e in PROFILE_EGOS},
            **{f"{lab}_best_memoryless": max(("go_at_once", "wait_1.2s"), key=lambda e: egos[lab][e]["trial_1_score"])
               for lab in egos}}
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
