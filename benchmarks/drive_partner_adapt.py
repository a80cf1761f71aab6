"""The partner-adaptation evidence: does an ego adapt to the other driver from trial to trial?

On the blind all-way-stop crossing (`presets.partner_adapt`: one ego, one partner drawn per episode from
{never_yield, yield} and kept for K trials), for each arm (core in transformer / lstm / mlp, each with and
without the privileged auxiliary loss that predicts the partner's type) and seed: PPO for the same agent-step
budget, logging the learner's per-trial scores of the training rollouts (the learning curve); then paired
trials (`partner_eval`: trial k paired with trial 0 of the same episode) on held-out scenes, against the training
partners and against held-out partners (`partners.HELD_OUT_PARTNERS`, never seen in training). The scripted
references (`partner_scripted`: an ego with memory, the best memoryless ones) are measured on the same scenes.

Score = goal reached without collision or offroad within the trial (the seed's); time to goal in ticks is
reported beside it. A positive trial-1 minus trial-0 delta alone does not show memory (a policy knows its position
in the episode and may simply play trial 0 worse); the JSON also gives each arm's trial-1 score minus the
memoryless ceiling (the best trial-1 score of the memoryless scripted egos on the same scenes), and, for the
memory cores, the training partners again with part of the memory wiped at each later trial
(`partner_eval.forgetful_ego`: what was seen, or the transformer's clock), which tells what carries the
adaptation. Writes the JSON (`--out`, with commit, machine, load and wall time) and the learning-curve PNG (`--png`),
and prints ONE JSON line last.

    python benchmarks/drive_partner_adapt.py                                   # 3 seeds x 3 cores x {aux off, on}
    python benchmarks/drive_partner_adapt.py --seeds 1 --cores transformer,mlp --aux off --minutes 4 \\
        --out /tmp/pilot.json --png /tmp/pilot.png                              # a pilot
    python benchmarks/drive_partner_adapt.py --set env.k_trials=4              # K = 4 (every k reported)
    python benchmarks/drive_partner_adapt.py --coplayer-population --aux off --cores transformer,mlp --seeds 2 \
        --save-egos runs/drive/partner_population                             # co-player checkpoints as partners

`--coplayer-population` adds frozen co-player checkpoints trained with different reward weights
(`partner_coplayers.COPLAYERS`: memoryless MLPs trained on the crossing first, cached under `--coplayer-root` by
config hash) to the training partners (`TRAIN_COPLAYERS`) and to the held-out partners (`HELD_OUT_COPLAYERS`,
never a training partner), and profiles every partner against two scripted egos (start tick, who crosses first,
collisions: `partner_coplayers.partner_profile`).
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

from ttlab.common.data import repo_relative
from ttlab.drive.partner_adapt import (
    arm_config,
    memoryless_ceiling,
    partner_label,
    partner_targets,
    run_arm,
    scripted_references,
    summarise,
)
from ttlab.drive.partner_coplayers import (
    COPLAYERS,
    HELD_OUT_COPLAYERS,
    PROFILE_EGOS,
    TRAIN_COPLAYERS,
    ensure_coplayer,
    partner_profile,
)
from ttlab.drive.partners import HELD_OUT_PARTNERS, TRAIN_PARTNERS
from ttlab.drive.presets import PARTNER_HELD_OUT

RESULTS = Path(__file__).resolve().parents[1] / "runs" / "bench" / "drive_partner_adapt"
COPLAYER_ROOT = Path(__file__).resolve().parents[1] / "runs" / "drive" / "coplayers"
SHADES = {"transformer": (31, 119, 180), "lstm": (44, 160, 44), "mlp": (230, 120, 20)}


def plot(runs: list[dict], path: Path, summary: dict | None = None) -> None:
    """Training-rollout score per trial (trial 0 dashed, trial 1 solid) and trial 1 - trial 0, per arm; with a
    population beyond the two scripted types, a third row: held-out scenes, trial 0 / trial 1 score per partner and
    arm (mean over seeds)."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    arms = [a for a in (summary or {}) if "train_partners_per_partner" in summary[a]]
    partners = [(w, n) for w in ("train_partners", "held_out_partners") for n in
                (summary[arms[0]].get(f"{w}_per_partner", {}) if arms else {})]
    rows3 = len(partners) > 4
    fig, axes = charts.panels(3 if rows3 else 2, cols=2, size=(5.0, 3.4), span_last=rows3)
    K = max((int(k.split("_")[1]) + 1 for r in runs for c in r["curve"] for k in c
             if k.startswith("trial_") and k.endswith("_score")), default=2)
    curves = []
    for r in runs:
        rgb = SHADES.get(r["core"], (0, 0, 0))
        if r["aux"]:
            rgb = tuple(min(255, c + 90) for c in rgb)
        # later trials paler
        curves.append(([c["agent_steps"] for c in r["curve"]],
                       [[c.get(f"trial_{k}_score", float("nan")) for c in r["curve"]] for k in range(K)],
                       [charts.rgb(rgb)] + [charts.rgb(tuple(min(255, c + 60 * (k - 1)) for c in rgb)) for k in range(1, K)]))
    charts.trial_curves(axes[0], axes[1], curves)
    later = "trial 1 solid" if K == 2 else f"trials 1..{K - 1} solid, later paler"
    axes[0].set_title(f"score, training rollouts: trial 0 dashed, {later}")
    axes[1].set_title("trial k - trial 0 score" if K > 2 else "trial 1 - trial 0 score")
    names = {"transformer": "transformer (KV cache across trials)", "lstm": "LSTM", "mlp": "MLP"}
    present = {(r["core"], r["aux"]) for r in runs}
    charts.key(fig, [(names[core] + (" + privileged aux loss" if aux else ""),
                      charts.rgb(tuple(min(255, c + 90 * aux) for c in SHADES[core])))
                     for core in names for aux in (False, True) if (core, aux) in present], title="one line per seed")
    if rows3:  # per partner: trial 0 (pale) and trial 1 (full) score of each arm, mean over seeds
        cells = []
        for where, name in partners:
            cells.append([])
            for arm in arms:
                rgb = SHADES.get(arm.removesuffix("_aux"), (0, 0, 0))
                row = summary[arm][f"{where}_per_partner"][name]
                for t, shade in ((0, tuple(min(255, c + 110) for c in rgb)), (1, rgb)):
                    vals = [v for v in row[f"trial_{t}_score"] if v == v]
                    cells[-1].append((sum(vals) / len(vals) if vals else None, charts.rgb(shade)))
        charts.grouped_bars(axes[2], [("*" if where == "held_out_partners" else "") + name[:18]
                                      for where, name in partners], cells)
        axes[2].set_ylim(0, 1)
        axes[2].set_title("held-out scenes, per partner (* = held-out partner): trial 0 score (pale), trial 1 (full), "
                          f"one pair per arm ({', '.join(arms)}), mean over seeds")
    charts.save(fig, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="partner_adapt", choices=("partner_adapt", "partner_adapt_debug"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds run are first-seed .. first-seed + seeds - 1 (0, 1, 2: evaluation; 7: the tuning seed)")
    ap.add_argument("--cores", default="transformer,lstm,mlp")
    ap.add_argument("--aux", default="both", choices=("off", "on", "both"),
                    help="privileged auxiliary loss (predict the partner's type): off, on, or both as separate arms")
    ap.add_argument("--steps", type=int, default=0, help="agent-steps per run (0: the preset's budget)")
    ap.add_argument("--minutes", type=float, default=0.0, help="wall minutes per run instead of a step budget")
    ap.add_argument("--eval-envs", type=int, default=64)
    ap.add_argument("--eval-episodes", type=int, default=4, help="episodes per held-out env and partner set")
    ap.add_argument("--threads", type=int, default=1, help="torch threads with --jobs 1")
    ap.add_argument("--jobs", type=int, default=0,
                    help="runs trained at once, one thread each; 0 = 2 when the 1-min load average is < 2.5, else 1")
    ap.add_argument("--set", nargs="*", default=[], help="preset overrides section.field=value (training and eval)")
    ap.add_argument("--coplayer-population", action="store_true",
                    help="add the co-player checkpoints (trained first, or loaded from --coplayer-root) to the training "
                         "and the held-out partners, and profile every partner")
    ap.add_argument("--coplayer-root", type=Path, default=COPLAYER_ROOT, help="co-player checkpoint cache")
    ap.add_argument("--coplayer-steps", type=int, default=0, help="co-player training steps (0: each spec's)")
    ap.add_argument("--profile-episodes", type=int, default=2, help="episodes per env of each partner profile")
    ap.add_argument("--save-egos", type=Path, default=None,
                    help="save every trained ego there as <core>[_aux]_seed<seed> (a `ttlab drive eval` checkpoint)")
    ap.add_argument("--out", type=Path, default=RESULTS / "drive_partner_adapt.json")
    ap.add_argument("--png", type=Path, default=RESULTS / "drive_partner_adapt.png")
    args = ap.parse_args()
    cores = args.cores.split(",")
    bad = [c for c in cores if c not in SHADES]
    if bad:
        print(f"drive_partner_adapt.py: --cores {args.cores}: unknown {bad} (transformer, lstm, mlp)")
        return 2
    bad = [kv for kv in args.set if "=" not in kv]
    if bad:
        print(f"drive_partner_adapt.py: --set {bad[0]!r}: expected section.field=value")
        return 2
    overrides = dict(kv.split("=", 1) for kv in args.set)
    try:
        base = arm_config(args.preset, "transformer", False, overrides)
    except ValueError as e:
        print(f"drive_partner_adapt.py: --set: {e}")
        return 2
    if args.coplayer_steps < 0 or args.profile_episodes < 1:
        print("drive_partner_adapt.py: --coplayer-steps must be >= 0 and --profile-episodes >= 1")
        return 2
    steps = args.steps or (None if args.minutes > 0 else base.total_agent_steps)
    try:  # the code that runs: read at the start
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = "unknown"
    torch.set_num_threads(args.threads)
    t_start, load0 = time.perf_counter(), os.getloadavg()
    if args.jobs <= 0:
        args.jobs = 2 if load0[0] < 2.5 else 1
    K = base.env.k_trials

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.0f}s] {msg}", flush=True)

    partners, held_out, coplayers, profile = None, HELD_OUT_PARTNERS, {}, {}
    if args.coplayer_population:  # co-players trained with different reward weights join the population
        stems = {}
        for name in (*TRAIN_COPLAYERS, *HELD_OUT_COPLAYERS):
            spec = COPLAYERS[name]
            if args.coplayer_steps:
                spec = dataclasses.replace(spec, steps=args.coplayer_steps)
            t0 = time.perf_counter()
            stems[name] = ensure_coplayer(spec, args.coplayer_root, args.preset, log)
            coplayers[name] = {"spec": dataclasses.asdict(spec), "checkpoint": repo_relative(stems[name]),
                               "wall_s": round(time.perf_counter() - t0, 1)}
        partners = (*TRAIN_PARTNERS, *(str(stems[n]) for n in TRAIN_COPLAYERS))
        held_out = (*HELD_OUT_PARTNERS, *(str(stems[n]) for n in HELD_OUT_COPLAYERS))
        base = arm_config(args.preset, "transformer", False, overrides, partners)
        for p in (*partners, *held_out):  # how each partner drives, against an ego that goes at once and one that waits
            profile[partner_label(p)] = {ego: partner_profile(base, p, ego, args.profile_episodes, args.eval_envs)
                                         for ego in PROFILE_EGOS}
            log(f"profile {partner_label(p)}: {profile[partner_label(p)]}")

    # scripted references on the held-out scenes: memory, and the best memoryless start times of the test grid
    scripted = scripted_references(base, args.eval_episodes, args.eval_envs, log, held_out)

    auxes = {"off": [False], "on": [True], "both": [False, True]}[args.aux]
    jobs = [(c, a, s) for c in cores for a in auxes for s in range(args.first_seed, args.first_seed + args.seeds)]
    save = str(args.save_egos) if args.save_egos is not None else None
    job_args = [(args.preset, c, a, s, steps, args.minutes, args.eval_envs, args.eval_episodes,
                 1 if args.jobs > 1 else args.threads, t_start, overrides, partners, held_out, save)
                for c, a, s in jobs]
    if args.jobs > 1:  # one process per run, one thread each
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            runs = pool.starmap(run_arm, job_args)
    else:
        runs = [run_arm(*a) for a in job_args]

    # what no memory can beat: the best trial-1 score of the memoryless scripted egos on the same scenes and partners
    ceiling = memoryless_ceiling(scripted)
    summary = summarise(runs, scripted, cores, auxes, K)
    targets = partner_targets(summary)
    result = {
        "benchmark": "drive_partner_adapt", "command": " ".join(["python benchmarks/drive_partner_adapt.py", *sys.argv[1:]]),
        "commit": commit, "nproc": os.cpu_count(), "jobs": args.jobs,
        "torch_threads": 1 if args.jobs > 1 else args.threads,
        "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.perf_counter() - t_start, 1),
        "config": {"preset": args.preset, "scenarios": base.scenarios, "held_out_scenes": PARTNER_HELD_OUT,
                   "partners": [partner_label(p) for p in base.partners],
                   "partner_weights": list(base.partner_weights) or [1.0] * len(base.partners),
                   "held_out_partners": [partner_label(p) for p in held_out], "K": K, "trial_length": base.env.trial_length,
                   "num_envs": base.env.num_envs, "steps_per_run": steps, "minutes_per_run": args.minutes or None,
                   "agent_steps_per_run": [r["agent_steps"] for r in runs],
                   "seeds": list(range(args.first_seed, args.first_seed + args.seeds)),
                   "eval_envs": args.eval_envs, "eval_episodes": args.eval_episodes},
        "overrides": overrides, "summary": summary, "targets": targets, "scripted_held_out": scripted,
        "memoryless_ceiling_trial_1": ceiling, "coplayers": coplayers, "partner_profile": profile,
        "saved_egos": repo_relative(args.save_egos) if args.save_egos is not None else None, "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, separators=(",", ":")) + "\n")
    plot(runs, args.png, summary)
    line = {"benchmark": "drive_partner_adapt", "wall_s": result["wall_s"], "commit": commit[:10], "K": K,
            "loadavg_start": result["loadavg_start"],
            **{f"{arm}_{k}": v for arm, s in summary.items() for k, v in s.items()
               if (k.endswith(("_mean", "_per_seed")) and "_delta_" in k) or k.endswith("memoryless_ceiling")},
            "scripted_memory_delta": scripted["memory"]["train_partners"].get("ada_delta_trial_1_minus_0"),
            "targets": targets}
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
