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
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from ttlab.drive.adapt import apply_overrides
from ttlab.drive.partner_adapt import evaluate_partner, train_partner
from ttlab.drive.partner_eval import forgetful_ego
from ttlab.drive.partner_scripted import MemoryEgo, TimedEgo
from ttlab.drive.partners import HELD_OUT_PARTNERS
from ttlab.drive.presets import PARTNER_HELD_OUT, TRAIN_PRESETS

RESULTS = Path(__file__).resolve().parents[1] / "runs" / "bench" / "drive_partner_adapt"
SHADES = {"transformer": (31, 119, 180), "lstm": (44, 160, 44), "mlp": (230, 120, 20)}


def _config(preset: str, core: str, aux: bool, overrides: dict):
    cfg = TRAIN_PRESETS[preset]()
    cfg.policy.core = core
    cfg.policy.task_classes = len(cfg.partners) if aux else 0
    cfg.ppo.aux_task_coef = 1.0 if aux else 0.0
    return apply_overrides(cfg, overrides)


def _short(m: dict, K: int) -> dict:
    keep = [f"trial_{k}_{n}" for k in range(K) for n in ("score", "collision_rate", "time_to_goal")]
    keep += [f"ada_delta_trial_{k}_minus_0{s}" for k in range(1, K) for s in ("", "_score_stderr")]
    out = {k: round(m[k], 4) for k in keep if k in m}
    out["ego_trials"] = m.get("ego_trials")
    out["per_partner"] = {n: {k: round(v[k], 4) for k in keep if k in v} for n, v in m.get("per_partner", {}).items()}
    return out


def run_one(preset: str, core: str, aux: bool, seed: int, steps: int | None, minutes: float | None, eval_envs: int,
            eval_episodes: int, threads: int, t_start: float, overrides: dict) -> dict:
    """Train one arm and seed, then evaluate it on held-out scenes with the training and the held-out partners."""
    torch.set_num_threads(threads)

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.0f}s] {msg}", flush=True)

    cfg = _config(preset, core, aux, overrides)
    log(f"train {core} aux={aux} seed {seed}")
    policy, curve, facts = train_partner(cfg, seed, steps=steps, seconds=None if steps else 60 * minutes, log=log)
    t0 = time.perf_counter()
    K = cfg.env.k_trials
    ev = {"train_partners": _short(evaluate_partner(cfg, policy, cfg.partners, 100 + seed, eval_episodes, eval_envs), K),
          "held_out_partners": _short(evaluate_partner(cfg, policy, HELD_OUT_PARTNERS, 100 + seed, eval_episodes,
                                                       eval_envs), K)}
    # what carries the memory: trial 1 again with what the ego saw in trial 0 wiped (transformer: the clock kept;
    # LSTM: everything), and (transformer) with what it saw kept but the clock told trial 0 ran its full length
    for wipe in ("content", "clock") if core == "transformer" else ("content",) if core == "lstm" else ():
        ev[f"train_partners_wipe_{wipe}"] = _short(evaluate_partner(cfg, forgetful_ego(policy, wipe), cfg.partners,
                                                                    100 + seed, eval_episodes, eval_envs), K)
    facts["eval_wall_s"] = round(time.perf_counter() - t0, 1)
    log(f"eval {core} aux={aux} seed {seed}: Δ held-out scenes {ev['train_partners'].get('ada_delta_trial_1_minus_0')}"
        f", held-out partners {ev['held_out_partners'].get('ada_delta_trial_1_minus_0')}")
    return {"core": core, "aux": aux, "seed": seed, **facts, "eval": ev, "curve": curve}


def plot(runs: list[dict], path: Path) -> None:
    """Training-rollout score per trial (trial 0 dashed, trial 1 solid) and trial 1 - trial 0, per arm (PIL)."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (1000, 400), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    xmax = max((c["agent_steps"] for r in runs for c in r["curve"]), default=1)

    def panel(box, series, title, lo, hi):
        x0, y0, x1, y1 = box
        draw.rectangle(box, outline=(0, 0, 0))
        draw.text((x0, y0 - 16), title, fill=(0, 0, 0))

        def px(x, y):
            return x0 + (x1 - x0) * x / max(xmax, 1e-9), y1 - (y1 - y0) * (min(max(y, lo), hi) - lo) / (hi - lo)

        for v in (lo, (lo + hi) / 2, hi):
            draw.text((x0 - 40, px(0, v)[1] - 6), f"{v:+.2f}", fill=(0, 0, 0))
            draw.line([px(0, v), px(xmax, v)], fill=(225, 225, 225))
        if lo < 0 < hi:
            draw.line([px(0, 0), px(xmax, 0)], fill=(150, 150, 150))
        draw.text((x1 - 150, y1 + 4), f"agent-steps (max {xmax / 1e6:.1f}M)", fill=(0, 0, 0))
        for xs, ys, rgb, dashed in series:
            pts = [px(x, y) for x, y in zip(xs, ys, strict=True) if y == y]
            for i, (a, b) in enumerate(zip(pts, pts[1:], strict=False)):
                if not dashed or i % 2 == 0:
                    draw.line([a, b], fill=rgb, width=2 if not dashed else 1)

    s, d = [], []
    K = max((int(k.split("_")[1]) + 1 for r in runs for c in r["curve"] for k in c
             if k.startswith("trial_") and k.endswith("_score")), default=2)
    for r in runs:
        rgb = SHADES.get(r["core"], (0, 0, 0))
        if r["aux"]:
            rgb = tuple(min(255, c + 90) for c in rgb)
        xs = [c["agent_steps"] for c in r["curve"]]
        s0 = [c.get("trial_0_score", float("nan")) for c in r["curve"]]
        s.append((xs, s0, rgb, True))
        for k in range(1, K):  # later trials paler
            sk = [c.get(f"trial_{k}_score", float("nan")) for c in r["curve"]]
            shade = tuple(min(255, c + 60 * (k - 1)) for c in rgb)
            s.append((xs, sk, shade, False))
            d.append((xs, [b - a for a, b in zip(s0, sk, strict=True)], shade, False))
    later = "trial 1 solid" if K == 2 else f"trials 1..{K - 1} solid, later paler"
    panel((50, 40, 480, 340), s, f"score, training rollouts: trial 0 dashed, {later}", 0.0, 1.0)
    panel((560, 40, 990, 340), d, "trial k - trial 0 score" if K > 2 else "trial 1 - trial 0 score", -0.5, 1.0)
    draw.text((50, 370), "blue transformer (KV cache across trials), green LSTM, orange MLP; pale = with the privileged "
              "aux loss; one line per seed", fill=(0, 0, 0))
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)


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
    ap.add_argument("--out", type=Path, default=RESULTS / "drive_partner_adapt.json")
    ap.add_argument("--png", type=Path, default=RESULTS / "drive_partner_adapt.png")
    args = ap.parse_args()
    cores = args.cores.split(",")
    bad = [c for c in cores if c not in SHADES]
    if bad:
        print(f"drive_partner_adapt.py: --cores {args.cores}: unknown {bad} (transformer, lstm, mlp)")
        return 2
    overrides = dict(kv.split("=", 1) for kv in args.set)
    try:
        base = _config(args.preset, "transformer", False, overrides)
    except ValueError as e:
        print(f"drive_partner_adapt.py: --set: {e}")
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

    # scripted references on the held-out scenes: memory, and the best memoryless start times of the test grid
    scripted = {}
    for name, ego in (("memory", lambda e: MemoryEgo(e, 12)), ("go_at_once", lambda e: TimedEgo(e, 0, 6)),
                      ("wait_1.2s", lambda e: TimedEgo(e, 12, 6))):
        scripted[name] = {p: _short(evaluate_partner(base, ego, partners, 0, args.eval_episodes, args.eval_envs), K)
                          for p, partners in (("train_partners", base.partners), ("held_out_partners", HELD_OUT_PARTNERS))}
        log(f"scripted {name}: Δ {scripted[name]['train_partners'].get('ada_delta_trial_1_minus_0')} "
            f"t1 {scripted[name]['train_partners'].get('trial_1_score')}")

    auxes = {"off": [False], "on": [True], "both": [False, True]}[args.aux]
    jobs = [(c, a, s) for c in cores for a in auxes for s in range(args.first_seed, args.first_seed + args.seeds)]
    job_args = [(args.preset, c, a, s, steps, args.minutes, args.eval_envs, args.eval_episodes,
                 1 if args.jobs > 1 else args.threads, t_start, overrides) for c, a, s in jobs]
    if args.jobs > 1:  # one process per run, one thread each
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            runs = pool.starmap(run_one, job_args)
    else:
        runs = [run_one(*a) for a in job_args]

    # what no memory can beat: the best trial-1 score of the memoryless scripted egos on the same scenes and partners
    ceiling = {where: max(scripted[n][where]["trial_1_score"] for n in scripted if n != "memory")
               for where in ("train_partners", "held_out_partners")}
    summary = {}
    for c in cores:
        for a in auxes:
            arm = [r for r in runs if r["core"] == c and r["aux"] == a]
            row = {}
            for where in ("train_partners", "held_out_partners"):
                for k in range(1, K):
                    d = [r["eval"][where][f"ada_delta_trial_{k}_minus_0"] for r in arm]
                    row[f"{where}_delta_{k}_mean"] = round(sum(d) / len(d), 4)
                    row[f"{where}_delta_{k}_per_seed"] = d
                for k in range(K):
                    row[f"{where}_trial_{k}_score"] = [r["eval"][where][f"trial_{k}_score"] for r in arm]
                # a delta can come from playing trial 0 worse (a policy knows its position in the episode); only a
                # trial-1 score above the memoryless ceiling shows the partner was remembered
                for k in range(1, K):  # a memoryless ego plays every trial alike: one ceiling for every k
                    row[f"{where}_trial_{k}_minus_memoryless_ceiling"] = [round(x - ceiling[where], 4)
                                                                          for x in row[f"{where}_trial_{k}_score"]]
            for wipe in ("content", "clock"):
                if all(f"train_partners_wipe_{wipe}" in r["eval"] for r in arm):
                    for k in range(1, K):
                        row[f"wipe_{wipe}_trial_{k}_score"] = [r["eval"][f"train_partners_wipe_{wipe}"][f"trial_{k}_score"]
                                                               for r in arm]
            summary[f"{c}{'_aux' if a else ''}"] = row
    targets = {}
    tr, ml = summary.get("transformer"), summary.get("mlp")
    if tr:
        targets["transformer_no_aux_mean_delta_ge_0.15"] = tr["train_partners_delta_1_mean"] >= 0.15
        targets["transformer_no_aux_every_seed_ge_0.10"] = all(x >= 0.10 for x in tr["train_partners_delta_1_per_seed"])
        # memory shown, not a clock: trial 1 above what no memory can reach, on every seed
        targets["transformer_no_aux_trial_1_above_memoryless_ceiling_every_seed"] = all(
            x > 0 for x in tr["train_partners_trial_1_minus_memoryless_ceiling"])
    if ml:
        targets["mlp_abs_delta_le_0.03"] = abs(ml["train_partners_delta_1_mean"]) <= 0.03
    result = {
        "benchmark": "drive_partner_adapt", "command": " ".join(["python benchmarks/drive_partner_adapt.py", *sys.argv[1:]]),
        "commit": commit, "nproc": os.cpu_count(), "jobs": args.jobs,
        "torch_threads": 1 if args.jobs > 1 else args.threads,
        "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.perf_counter() - t_start, 1),
        "config": {"preset": args.preset, "scenarios": base.scenarios, "held_out_scenes": PARTNER_HELD_OUT,
                   "partners": list(base.partners), "partner_weights": list(base.partner_weights),
                   "held_out_partners": list(HELD_OUT_PARTNERS), "K": K, "trial_length": base.env.trial_length,
                   "num_envs": base.env.num_envs, "steps_per_run": steps, "minutes_per_run": args.minutes or None,
                   "agent_steps_per_run": [r["agent_steps"] for r in runs],
                   "seeds": list(range(args.first_seed, args.first_seed + args.seeds)),
                   "eval_envs": args.eval_envs, "eval_episodes": args.eval_episodes},
        "overrides": overrides, "summary": summary, "targets": targets, "scripted_held_out": scripted,
        "memoryless_ceiling_trial_1": ceiling, "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, separators=(",", ":")) + "\n")
    plot(runs, args.png)
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
