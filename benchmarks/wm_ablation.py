"""The guide's ablations at CPU scale: prediction target and action injection on generated PushT, equal step
budgets, scored with the copy-last protocol (`ttlab wm eval` + held-out rollouts). Resumable arm by arm. Prints ONE JSON line last.

Every arm is the `pusht_cpu` configuration (PushT 64x64 at DINO-WM's spacing, 1 clean context frame + 3
predicted, a 128-wide 4-block NanoWM with 8x8 patches, bf16 autocast on one thread) with the official null
action for frame 0, trained for the same number of optimizer steps and batch, then scored on the same held-out
windows and rollouts (`score_run`). One axis varies per arm:

  target arms (`pred_*`): the guide's objectives, each in its native schedule -- v and x: cosine + zero-terminal
      SNR; eps: linear, no ZTSNR; flow: no ZTSNR, no SNR weighting -- logit-normal training levels, additive
      injection, sampled with `--target-steps` DDIM / Euler steps (the guide's setting, not the residual recipe);
  injection arms (`inj_*`): the CPU reference recipe of `pusht_cpu` (residual x target from pure noise, 1-step
      sampler), which learns within minutes, with each of the five injections.

Each finished arm is written to the results JSON at once (commit, load, wall time) and skipped on a rerun; an
arm cut short resumes from its last checkpoint. Select arms with `--arms pred_v,inj_film`.

    nice -n 19 python benchmarks/wm_ablation.py [--arms ...] [--steps 200] [--batch 32]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import torch

from ttlab.worldmodel.evaluate import EvalConfig, evaluate
from ttlab.worldmodel.rollouts import heldout_rollouts

ROOT = Path(__file__).resolve().parent.parent


def git_rev() -> str:
    """HEAD, with -dirty when tracked files differ from it."""
    run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    return run("rev-parse", "HEAD") + ("-dirty" if run("status", "--porcelain", "--untracked-files=no") else "")


def score_run(run_dir: Path, windows: int = 256, horizon: int = 24) -> tuple[dict, dict]:
    """The copy-last protocol on a trained run: `windows` fixed seeded held-out windows (1 context frame, the rest
    predicted, per lag, beside copy-last / mean-frame baselines) with the run's own sampler, and `horizon`-frame
    sliding-window rollouts from the first frame of every held-out episode."""
    ev = evaluate(EvalConfig(checkpoint=run_dir, num_samples=windows, device="cpu", video_clips=4, out=run_dir / "eval"))
    ro = heldout_rollouts(run_dir, horizon=horizon, n_ctx=1, device="cpu")
    return ev, ro


CODE_COMMIT = git_rev()  # the code this process imports (later arms' `commit` is HEAD when the arm started)

TARGETS = ("v", "x", "eps", "flow")
INJECTIONS = ("additive", "adaln", "adaln_fuse", "film", "cross_attention")
ARMS = tuple(f"pred_{t}" for t in TARGETS) + tuple(f"inj_{i}" for i in INJECTIONS)

# The guide's tables (nano-world-model docs/training.md): PSNR / SSIM of NanoWM-B/2 after 50k steps on RT-1
# (every arm), and PSNR / SSIM after 30k steps on DINO-WM PushT (injection arms only). Quoted, not measured here.
GUIDE_RT1 = {"pred_v": (23.07, 0.760), "pred_x": (23.37, 0.783), "pred_eps": (21.89, 0.739),
             "pred_flow": (23.54, 0.772), "inj_additive": (23.07, 0.760), "inj_adaln": (23.19, 0.762),
             "inj_adaln_fuse": (23.10, 0.762), "inj_film": (23.20, 0.763), "inj_cross_attention": (20.82, 0.721)}
GUIDE_PUSHT = {"inj_additive": (26.20, 0.962), "inj_adaln_fuse": (26.17, 0.961), "inj_adaln": (26.09, 0.960),
               "inj_cross_attention": (25.95, 0.959), "inj_film": (25.88, 0.960)}


def markdown_table(res: dict) -> str:
    """The README table: each finished arm beside the guide's numbers (missing arms say so)."""
    rows = ["| arm | windows PSNR (copy-last) | gain dB | SSIM | rollout PSNR (copy-last) | params | "
            "guide RT-1 PSNR / SSIM | guide PushT PSNR / SSIM |", "|---|---|---|---|---|---|---|---|"]
    for arm in ARMS:
        g1 = "{:.2f} / {:.3f}".format(*GUIDE_RT1[arm])
        g2 = "{:.2f} / {:.3f}".format(*GUIDE_PUSHT[arm]) if arm in GUIDE_PUSHT else "-"
        r = res["arms"].get(arm)
        if r is None:
            rows.append(f"| {arm} | not run | | | | | {g1} | {g2} |")
            continue
        w, ro = r["windows"], r["rollout"]
        rows.append(f"| {arm} | {w['psnr']:.2f} ({w['copy_last_psnr']:.2f}) | {w['gain_over_copy_last_db']:+.2f} | "
                    f"{w['ssim']:.3f} | {ro['psnr']:.2f} ({ro['copy_last_psnr']:.2f}) | {r['config']['params_M']:.2f}M | "
                    f"{g1} | {g2} |")
    return "\n".join(rows)


def native_diffusion(target: str):
    """The guide's native schedule for a prediction target, with clean context frames as the sampler gives them."""
    from ttlab.worldmodel.diffusion import DiffusionConfig

    common = dict(target=target, timestep_sampling="logit_normal", clean_context_prob=1.0, context_frames=1)
    if target == "eps":
        return DiffusionConfig(schedule="linear", zero_terminal_snr=False, **common)
    if target == "flow":
        return DiffusionConfig(zero_terminal_snr=False, snr_gamma=0.0, **common)
    return DiffusionConfig(schedule="squaredcos_cap_v2", zero_terminal_snr=True, **common)


def arm_config(arm: str, steps: int, batch: int, target_steps: int, data: str, threads: int):
    """The TrainConfig of one arm (pure: same inputs, same config)."""
    from ttlab.worldmodel.presets import pusht_cpu_regressor

    if arm not in ARMS:
        raise ValueError(f"--arms: unknown arm {arm!r}; expected some of {', '.join(ARMS)}")
    cfg = replace(pusht_cpu_regressor(), data=data, max_steps=steps, batch_size=batch, warmup_steps=max(1, steps // 10),
                  checkpoint_every=max(1, steps // 4), null_first_action=True, threads=threads, run_name=f"abl_{arm}",
                  root="runs", resume=True, time_limit="")
    axis, value = arm.split("_", 1)
    if axis == "pred":
        return replace(cfg, diffusion=native_diffusion(value), sample_steps=target_steps, injection="additive")
    return replace(cfg, injection=value)


def arm_result(arm: str, cfg, tr: dict, ev: dict, ro: dict, load_before, t0: float, commit: str, threads: int) -> dict:
    from ttlab.worldmodel.model import count_parameters
    from ttlab.worldmodel.weights import load_world_model

    m = ev["metrics"]
    d = cfg.diffusion
    params = count_parameters(load_world_model(tr["run_dir"]).model)
    return {
        "arm": arm, "axis": "target" if arm.startswith("pred") else "injection",
        "config": {"target": d.target, "schedule": d.schedule, "zero_terminal_snr": d.zero_terminal_snr,
                   "levels": d.timestep_sampling, "residual": d.residual, "snr_gamma": d.snr_gamma,
                   "injection": cfg.injection, "sample_steps": cfg.sample_steps, "params_M": round(params / 1e6, 3),
                   "null_first_action": cfg.null_first_action},
        "train": {"steps": tr["steps"], "max_steps": cfg.max_steps, "batch": cfg.batch_size, "lr": cfg.lr,
                  "seconds": round(tr["seconds"], 1), "precision": cfg.precision},
        "windows": {"count": ev["samples"], "psnr": round(m["psnr"], 3), "ssim": round(m["ssim"], 4),
                    "copy_last_psnr": round(m["baseline_copy_last/psnr"], 3),
                    "mean_frame_psnr": round(m["baseline_mean_frame/psnr"], 3),
                    "gain_over_copy_last_db": round(m["psnr"] - m["baseline_copy_last/psnr"], 3),
                    "per_lag_psnr": [round(m[f"psnr/lag{k}"], 3) for k in range(1, cfg.num_frames)]},
        "rollout": {"episodes": ro["episodes"], "horizon": ro["horizon"], "psnr": round(ro["psnr"], 3),
                    "ssim": round(ro["ssim"], 4), "copy_last_psnr": round(ro["baseline_copy_last/psnr"], 3),
                    "mean_frame_psnr": round(ro["baseline_mean_frame/psnr"], 3)},
        "commit": commit, "commit_at_end": git_rev(), "code_commit": CODE_COMMIT, "nproc": os.cpu_count(), "torch_threads": threads,
        "loadavg_before": [round(x, 2) for x in load_before], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }


def load_results(path: Path, protocol: dict) -> dict:
    if not path.exists():
        return {"benchmark": "wm_ablation", "protocol": protocol, "arms": {}}
    res = json.loads(path.read_text())
    if res.get("protocol") != protocol:
        raise SystemExit(f"{path} was written with another protocol ({res.get('protocol')}); pass --out NEW.json "
                         f"or the same --steps/--batch/--target-steps/--eval-windows/--rollout-horizon")
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {','.join(ARMS)}")
    ap.add_argument("--steps", type=int, default=200, help="optimizer steps per arm (the same for every arm)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--target-steps", type=int, default=20, help="sampling steps of the target arms")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default="data/pusht64", help="PushT dataset (wm_evidence.py generates it)")
    ap.add_argument("--eval-windows", type=int, default=256)
    ap.add_argument("--rollout-horizon", type=int, default=24)
    ap.add_argument("--out", default="runs/bench/wm_ablation/wm_ablation.json")
    ap.add_argument("--table", action="store_true", help="print the README table of the results JSON and exit")
    args = ap.parse_args()
    if args.table:
        print(markdown_table(json.loads((ROOT / args.out).read_text())))
        return
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    for a in arms:
        if a not in ARMS:
            raise SystemExit(f"--arms: unknown arm {a!r}; expected some of {', '.join(ARMS)}")
    if not (Path(args.data) / "states.pth").exists():
        raise SystemExit(f"--data {args.data}: no PushT dataset there; `python benchmarks/wm_evidence.py` generates "
                         f"it (300 episodes x 120 steps), or `ttlab wm data pusht`")
    from ttlab.worldmodel.train import train

    torch.set_num_threads(args.threads)
    protocol = {"steps": args.steps, "batch": args.batch, "target_sample_steps": args.target_steps,
                "eval_windows": args.eval_windows, "rollout_horizon": args.rollout_horizon, "data": args.data}
    out = ROOT / args.out if not Path(args.out).is_absolute() else Path(args.out)
    res = load_results(out, protocol)
    for arm in arms:
        if arm in res["arms"]:
            print(f"{arm}: done, skipped", flush=True)
            continue
        t0, commit, load_before = time.perf_counter(), git_rev(), os.getloadavg()
        cfg = arm_config(arm, args.steps, args.batch, args.target_steps, args.data, args.threads)
        print(f"{arm}: training {cfg.max_steps} steps", flush=True)
        tr = train(cfg)
        ev, ro = score_run(Path(tr["run_dir"]), args.eval_windows, args.rollout_horizon)
        ro.pop("_first_batch", None)
        res["arms"][arm] = arm_result(arm, cfg, tr, ev, ro, load_before, t0, commit, args.threads)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1) + "\n")
        tmp.replace(out)  # each finished arm is kept at once
        r = res["arms"][arm]
        print(f"{arm}: windows {r['windows']['psnr']} dB (copy-last {r['windows']['copy_last_psnr']}), "
              f"rollouts {r['rollout']['psnr']} dB, {r['wall_seconds']:.0f} s", flush=True)
    summary = {"benchmark": "wm_ablation", "out": str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out),
               "done": sorted(res["arms"]), "missing": [a for a in ARMS if a not in res["arms"]],
               "windows_psnr": {a: r["windows"]["psnr"] for a, r in res["arms"].items()},
               "copy_last_psnr": next(iter(res["arms"].values()))["windows"]["copy_last_psnr"] if res["arms"] else None,
               "rollout_psnr": {a: r["rollout"]["psnr"] for a, r in res["arms"].items()}}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
