"""World-model evidence on CPU: does NanoWM beat copying the last frame on held-out PushT? Prints ONE JSON line last.

One command: generates PushT 64x64 (gym-pusht, scripted pusher) into data/ if missing, trains the `pusht_cpu`
preset for a step budget (the cosine anneals inside it), then scores the EMA model with the sampler its
training matches on held-out episodes only:
  - windows: >= 128 fixed seeded windows of 1 context + 3 predicted frames (DINO-WM PushT spacing,
    frame_interval 5), PSNR (capped at 80 dB) and SSIM on the predicted frames, per lag, beside copy-last and
    mean-training-frame baselines on the same frames;
  - rollouts: 24-frame sliding-window rollouts from the first frame of each held-out episode, driven by its
    own actions, against copying that frame forward.
Writes benchmarks/results/wm_evidence.json and a ground truth vs prediction strip (wm_evidence_strip.png).

    python benchmarks/wm_evidence.py [--max-steps 2000] [--threads 2] [--run-name evidence] [--resume]
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

ROOT = Path(__file__).resolve().parent.parent


def git_rev() -> str:
    """HEAD, with -dirty when tracked files differ from it."""
    run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    return run("rev-parse", "HEAD") + ("-dirty" if run("status", "--porcelain", "--untracked-files=no") else "")


def strip_png(path: Path, rows: list[tuple[str, torch.Tensor]], scale: int = 2) -> Path:
    """rows of (label, frames (T, C, H, W) in [-1, 1]) -> one PNG, frames left to right, rows top to bottom."""
    from PIL import Image, ImageDraw

    from ttlab.worldmodel.evaluate import to_uint8

    label_w, pad = 70, 2
    H, W = rows[0][1].shape[-2:]
    width = label_w + max(len(f) for _, f in rows) * (W * scale + pad)
    img = Image.new("RGB", (width, len(rows) * (H * scale + pad)), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for r, (label, frames) in enumerate(rows):
        y = r * (H * scale + pad)
        draw.text((2, y + H * scale // 2 - 5), label, fill=(0, 0, 0))
        for k, fr in enumerate(to_uint8(frames)):
            tile = Image.fromarray(fr).resize((W * scale, H * scale), Image.NEAREST)
            img.paste(tile, (label_w + k * (W * scale + pad), y))
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def score_run(run_dir: Path, windows: int = 256, horizon: int = 24) -> tuple[dict, dict]:
    """The copy-last protocol on a trained run: `windows` fixed seeded held-out windows (1 context frame, the
    rest predicted, per lag, beside copy-last / mean-frame baselines) with the run's own sampler, and
    `horizon`-frame sliding-window rollouts from the first frame of every held-out episode."""
    from ttlab.worldmodel.evaluate import EvalConfig, evaluate, heldout_rollouts

    ev = evaluate(EvalConfig(weights=run_dir, num_samples=windows, device="cpu", video_clips=4, out=run_dir / "eval"))
    ro = heldout_rollouts(run_dir, horizon=horizon, n_ctx=1, device="cpu")
    return ev, ro


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data/pusht64")
    ap.add_argument("--episodes", type=int, default=300, help="episodes to generate when --data is missing")
    ap.add_argument("--episode-steps", type=int, default=120, help="raw steps per generated episode")
    ap.add_argument("--max-steps", type=int, default=0, help="training budget in steps (0 = the preset's)")
    ap.add_argument("--batch", type=int, default=0, help="batch size (0 = the preset's)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: see the pusht_cpu preset)")
    ap.add_argument("--max-minutes", type=float, default=42.0, help="wall-clock guard on training (reported)")
    ap.add_argument("--run-name", default="evidence")
    ap.add_argument("--resume", action="store_true", help="continue the run's step count from its last checkpoint")
    ap.add_argument("--eval-only", action="store_true", help="score the existing run without training (the JSON says so)")
    ap.add_argument("--eval-windows", type=int, default=256)
    ap.add_argument("--rollout-horizon", type=int, default=24)
    ap.add_argument("--out", default="benchmarks/results/wm_evidence.json")
    ap.add_argument("--strip", default="benchmarks/results/wm_evidence_strip.png")
    args = ap.parse_args()
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    from ttlab.worldmodel.data.pusht import generate_pusht
    from ttlab.worldmodel.model import count_parameters
    from ttlab.worldmodel.presets import pusht_cpu
    from ttlab.worldmodel.train import load_world_model, train

    t_start = time.perf_counter()
    commit_at_start = git_rev()
    torch.set_num_threads(args.threads)
    data = Path(args.data)
    gen = None
    if not (data / "states.pth").exists():
        print(f"generating {args.episodes} PushT episodes into {data}", flush=True)
        gen = generate_pusht(data, args.episodes, 64, args.episode_steps, workers=2, seed=0, show_progress=False)
    cfg = replace(pusht_cpu(), data=str(data), cpu_threads=args.threads, run_name=args.run_name, root="runs",
                  resume=args.resume, max_minutes=args.max_minutes)
    if args.max_steps:
        cfg = replace(cfg, max_steps=args.max_steps)
    if args.batch:
        cfg = replace(cfg, batch_size=args.batch)
    load_before = os.getloadavg()
    print(f"training {cfg.max_steps} steps (batch {cfg.batch_size}, {args.threads} threads)", flush=True)
    if args.eval_only:
        run_dir = Path(cfg.root) / "wm" / cfg.run_name
        tr = {"steps": load_world_model(run_dir).step, "seconds": float("nan"), "stopped_by_wall_clock": None}
    else:
        tr = train(cfg)
        run_dir = Path(tr["run_dir"])
    wm = load_world_model(run_dir)
    print(f"trained to step {tr['steps']} in {tr['seconds']:.0f} s; evaluating", flush=True)
    t_eval = time.perf_counter()
    ev, ro = score_run(run_dir, args.eval_windows, args.rollout_horizon)
    gt_ro, pred_ro = ro.pop("_first_batch")
    eval_secs = time.perf_counter() - t_eval

    # figure: two held-out windows (GT over prediction), then one held-out 24-frame rollout
    from ttlab.worldmodel.diffusion import sample_window
    from ttlab.worldmodel.train import build_datasets, fixed_subset

    _, val_ds = build_datasets(cfg, run_dir / "action_stats.json")
    sub = fixed_subset(val_ds, 2, 1)
    batch = torch.utils.data.default_collate([sub[i] for i in range(len(sub))])
    pw = sample_window(wm.model, wm.obj, batch["frames"][:, :1], batch["actions"], cfg.num_frames - 1,
                       cfg.sample_steps, clip=1.0)
    rows = []
    for i in range(len(sub)):
        rows += [(f"win{i} GT", batch["frames"][i]), (f"win{i} pred", pw[i])]
    rows += [("roll GT", gt_ro[0]), ("roll pred", pred_ro[0]),
             ("copy-last", gt_ro[0, :1].expand_as(gt_ro[0]))]
    png = strip_png(ROOT / args.strip if not Path(args.strip).is_absolute() else Path(args.strip), rows)

    m = ev["metrics"]
    lag_keys = sorted(k for k in m if "/lag" in k)
    res = {
        "benchmark": "wm_evidence", "commit": commit_at_start, "commit_at_end": git_rev(),
        "nproc": os.cpu_count(), "torch_threads": args.threads, "loadavg_before_train": [round(x, 2) for x in load_before],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "data": {"dir": str(data), "generated_now": gen is not None, "episodes": len(val_ds.source),
                 "heldout_episodes": len(val_ds.episodes), "resolution": 64, "frame_interval": cfg.frame_interval},
        "model": {"params_M": round(count_parameters(wm.model) / 1e6, 3), "hidden": cfg.hidden, "depth": cfg.depth,
                  "patch": cfg.patch_size, "target": cfg.diffusion.target, "residual": cfg.diffusion.residual,
                  "precision": cfg.precision,
                  "levels": cfg.diffusion.timestep_sampling, "sample_steps": cfg.sample_steps},
        "train": {"steps": tr["steps"], "max_steps": cfg.max_steps, "batch": cfg.batch_size, "lr": cfg.lr,
                  "seconds": round(tr["seconds"], 1), "minutes": round(tr["seconds"] / 60, 2),
                  "stopped_by_wall_clock": tr["stopped_by_wall_clock"], "resumed": args.resume,
                  "eval_only": args.eval_only},
        "windows": {"count": ev["samples"], "n_ctx": 1, "predicted": cfg.num_frames - 1, "split": "held-out episodes",
                    "psnr": round(m["psnr"], 3), "ssim": round(m["ssim"], 4),
                    "copy_last_psnr": round(m["baseline_copy_last/psnr"], 3),
                    "copy_last_ssim": round(m["baseline_copy_last/ssim"], 4),
                    "mean_frame_psnr": round(m["baseline_mean_frame/psnr"], 3),
                    "mean_frame_ssim": round(m["baseline_mean_frame/ssim"], 4),
                    "gain_over_copy_last_db": round(m["psnr"] - m["baseline_copy_last/psnr"], 3),
                    "per_lag": {k: round(m[k], 4) for k in lag_keys}},
        "rollout": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in ro.items()},
        "target": {"gain_db": 3.0, "reached": m["psnr"] - m["baseline_copy_last/psnr"] >= 3.0,
                   "rollout_beats_copy_last": ro["psnr"] > ro["baseline_copy_last/psnr"]},
        "eval_seconds": round(eval_secs, 1), "wall_seconds": round(time.perf_counter() - t_start, 1),
        "strip_png": str(png.relative_to(ROOT)) if png.is_relative_to(ROOT) else str(png),
    }
    res["rollout"]["gain_over_copy_last_db"] = round(ro["psnr"] - ro["baseline_copy_last/psnr"], 3)
    out = ROOT / args.out if not Path(args.out).is_absolute() else Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
