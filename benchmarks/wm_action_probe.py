"""Can the world model's action path carry the information at all? Prints ONE JSON line last.

Probe data (`ttlab.worldmodel.data.pusht.branch_clips`): PushT clips that share their 2 context frames
bit for bit and differ only in the actions after them (the pusher's target heads off in one of `branches`
directions). Only the actions tell the futures apart, so:

  - `--overfit`: train the `pusht_cpu` model (same architecture, objective, sampler) on these few clips only,
    and score every `--eval-every` steps; with `--train-pool N`, train on N contexts of the training pool of
    branched clips (`ttlab.worldmodel.data.branches`) instead and score on the held-out probe contexts;
  - `--run DIR`: score a trained run (its EMA weights and action statistics) on held-out probe clips.

Scores (10-step sampler, fixed noise, x0 clipped to the pixel range at every step as in every scorer): the agent's
position read from the predicted frames (colour centroid, `ttlab.worldmodel.objects`) against the branch whose
actions were given (`agent_px_true`), and, with the actions of another branch of the same context, against that
other branch (`agent_px_swap_followed`: small if the model follows the actions) and against its own branch
(`agent_px_swap_own`); `branch_spread_px` is how far apart the true futures are (what a model that ignores the
actions pays, roughly). PSNR likewise; `agent_ink` is predicted over true agent pixels.

    python benchmarks/wm_action_probe.py --overfit --minutes 6 --injection additive --out runs/bench/probe_add.json
    python benchmarks/wm_action_probe.py --run runs/wm/pilot_g5
    python benchmarks/wm_action_probe.py --overfit --train-pool 256 --seeds 101 102 103 104 --minutes 15
    python benchmarks/wm_action_probe.py --overfit --train-pool 256 --seeds 101 102 103 104 --minutes 20 \
        --actions abs --action-map gaussian --score-train 4

`--actions abs` conditions on the PD target itself (a point in the image) instead of the target minus the agent;
`--action-map gaussian` also draws those targets into the frames (`ttlab.worldmodel.model.action_map`);
`--score-train N` scores the first N training contexts too, once, after the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ttlab.common.data import repo_relative
from ttlab.common.result_file import emit_result
from ttlab.worldmodel.data.branches import branch_pool
from ttlab.worldmodel.data.dino_wm import PUSHT_WORKSPACE
from ttlab.worldmodel.data.pusht import branch_clips
from ttlab.worldmodel.data.windows import compute_action_stats, window_actions
from ttlab.worldmodel.diffusion import Objective, native_diffusion
from ttlab.worldmodel.diffusion.samplers import sample_window
from ttlab.worldmodel.metrics import psnr
from ttlab.worldmodel.model import NanoWM
from ttlab.worldmodel.model.action_map import pixel_affine
from ttlab.worldmodel.objects import ink_counts, read_poses
from ttlab.worldmodel.presets import pusht_cpu
from ttlab.worldmodel.train import build_model_config
from ttlab.worldmodel.weights import load_world_model

ROOT = Path(__file__).resolve().parent.parent


def git_rev() -> str:
    run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    return run("rev-parse", "HEAD") + ("-dirty" if run("status", "--porcelain", "--untracked-files=no") else "")


def probe_set(seeds: list[int], branches: int, num_frames: int, n_ctx: int, interval: int) -> dict[str, np.ndarray]:
    """Branched clips of several seeds stacked: frames (N, F, r, r, 3) uint8, raw rel and abs actions
    (N, n_raw, 2), group (N,) = index of the shared context, branch (N,)."""
    out = [branch_clips(s, branches=branches, num_frames=num_frames, n_ctx=n_ctx, frame_interval=interval)
           for s in seeds]
    return {"frames": np.concatenate([o["frames"] for o in out]),
            "rel_actions": np.concatenate([o["rel_actions"] for o in out]),
            "abs_actions": np.concatenate([o["abs_actions"] for o in out]),
            "group": np.repeat(np.arange(len(seeds)), branches), "branch": np.tile(np.arange(branches), len(seeds))}


def to_tensors(clips: dict, mean: np.ndarray, std: np.ndarray, num_frames: int, interval: int, key: str = "rel_actions"):
    frames = torch.from_numpy(clips["frames"]).float().movedim(-1, -3) / 127.5 - 1.0  # (N, F, 3, H, W)
    acts = np.stack([window_actions((a - mean) / std, 0, num_frames, interval) for a in clips[key]])
    return frames, torch.from_numpy(acts.astype(np.float32))  # (N, F, A)


@torch.no_grad()
def score(model, obj: Objective, frames: torch.Tensor, actions: torch.Tensor, branches: int, n_ctx: int,
          sample_steps: int, seed: int = 0, clip: float | None = 1.0) -> dict[str, float]:
    """True vs swapped actions on clips grouped by shared context (N = groups x branches, branch-major inside)."""
    model.eval()
    N = frames.shape[0]
    idx = torch.arange(N)
    grp, br = idx // branches, idx % branches
    true_pose = read_poses(frames[:, n_ctx:])  # (N, G, 6)
    true_ink = ink_counts(frames[:, n_ctx:])["agent"]  # (N, G)

    def predict(acts):
        g = torch.Generator().manual_seed(seed)
        win = sample_window(model, obj, frames[:, :n_ctx], acts, frames.shape[1] - n_ctx, sample_steps, clip=clip,
                            generator=g, autocast_dtype=torch.bfloat16)  # x0 kept in the pixel range, as every scorer
        return win[:, n_ctx:].clamp(-1, 1)  # (N, G, 3, H, W)

    pred = predict(actions)
    pose = read_poses(pred)
    res = {"agent_px_true": (pose[..., :2] - true_pose[..., :2]).norm(dim=-1).mean() * 64,
           "psnr_true": psnr(pred, frames[:, n_ctx:]).mean(),
           "agent_ink": (ink_counts(pred)["agent"].sum() / true_ink.sum().clamp(min=1))}
    sw = {k: [] for k in ("agent_px_swap_followed", "agent_px_swap_own", "branch_spread_px", "psnr_swap_followed",
                          "psnr_swap_own", "psnr_true_vs_swap", "follow_rate")}
    for shift in range(1, branches):
        other = grp * branches + (br + shift) % branches  # (N,) the same context, another branch
        p2 = predict(actions[other])
        pose2 = read_poses(p2)
        d_f = (pose2[..., :2] - true_pose[other][..., :2]).norm(dim=-1) * 64  # (N, G)
        d_o = (pose2[..., :2] - true_pose[..., :2]).norm(dim=-1) * 64
        sw["agent_px_swap_followed"].append(d_f.mean())
        sw["agent_px_swap_own"].append(d_o.mean())
        sw["branch_spread_px"].append((true_pose[other][..., :2] - true_pose[..., :2]).norm(dim=-1).mean() * 64)
        sw["psnr_swap_followed"].append(psnr(p2, frames[other][:, n_ctx:]).mean())
        sw["psnr_swap_own"].append(psnr(p2, frames[:, n_ctx:]).mean())
        sw["psnr_true_vs_swap"].append(psnr(p2, pred).mean())
        sw["follow_rate"].append((d_f < d_o).float().mean())
    res |= {k: torch.stack(v).mean() for k, v in sw.items()}
    model.train()
    return {k: round(float(v), 4) for k, v in res.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--overfit", action="store_true", help="train the pusht_cpu model on the probe clips only")
    ap.add_argument("--run", type=Path, help="score this trained run on held-out probe clips instead")
    ap.add_argument("--seeds", type=int, nargs="+", default=[101, 102], help="probe clip seeds (one shared context each)")
    ap.add_argument("--branches", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=6.0, help="overfit: wall-clock budget")
    ap.add_argument("--max-steps", type=int, default=10**9, help="overfit: step budget")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--injection", default="additive", help="overfit: the model's action injection")
    ap.add_argument("--change-weight", type=float, default=0.0, help="overfit: diffusion.change_weight")
    ap.add_argument("--target", choices=("v", "x", "eps", "flow"), default="", help="overfit: the preset's "
                    "diffusion with this prediction target in its native schedule (default: the preset's target)")
    ap.add_argument("--hidden", type=int, default=0, help="overfit: the model's width (0: the preset's)")
    ap.add_argument("--batch", type=int, default=16, help="overfit: clips per step (the probe clips repeated)")
    ap.add_argument("--train-pool", type=int, default=0, help="overfit: train on this many contexts of the training "
                    "branched-clip pool (the preset's pool seed) instead, and score on the held-out --seeds")
    ap.add_argument("--actions", choices=("rel", "abs"), default="rel", help="overfit: condition on the PD target "
                    "minus the agent (rel) or on the target itself, a point in the image (abs)")
    ap.add_argument("--action-map", choices=("none", "gaussian"), default="none", help="overfit: also draw the "
                    "targets into the frames (needs --actions abs)")
    ap.add_argument("--action-map-sigma", type=float, default=1.5, help="overfit: blob width in pixels")
    ap.add_argument("--score-train", type=int, default=0, help="overfit with --train-pool: after the budget, also "
                    "score the first N training contexts")
    ap.add_argument("--no-clip", action="store_true", help="sample without clipping x0 to the pixel range at each "
                    "step (every scorer clips; this shows what the clip does)")
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, help="write the JSON here too")
    args = ap.parse_args()
    if args.overfit == (args.run is not None):
        ap.error("give exactly one of --overfit and --run DIR")
    if args.run is not None and not args.run.is_dir():
        ap.error(f"--run {args.run}: not a run directory")
    if args.action_map != "none" and args.actions != "abs":
        ap.error(f"--action-map {args.action_map}: needs --actions abs (relative actions are not image positions)")
    if args.score_train and not args.train_pool:
        ap.error("--score-train needs --train-pool")
    torch.set_num_threads(args.threads)
    clip = None if args.no_clip else 1.0
    t0, load0 = time.time(), os.getloadavg()
    base = pusht_cpu()
    F, n_ctx, interval = base.num_frames, base.n_ctx, base.frame_interval
    clips = probe_set(args.seeds, args.branches, F, n_ctx, interval)
    out = {"benchmark": "wm_action_probe", "commit": git_rev(), "nproc": os.cpu_count(), "torch_threads": args.threads,
           "seeds": args.seeds, "branches": args.branches, "clips": int(len(clips["frames"])), "x0_clip": clip}
    if args.run is not None:
        lw = load_world_model(args.run)
        key = "rel_actions" if lw.train_cfg.get("relative_actions", True) else "abs_actions"
        frames, actions = to_tensors(clips, lw.action_mean, lw.action_std, F, interval, key)
        out |= {"mode": "trained", "run": repo_relative(args.run), "step": lw.step, "injection": lw.model.cfg.injection,
                "scores": score(lw.model, lw.obj, frames, actions, args.branches, n_ctx, base.sample_steps, clip=clip)}
    else:
        train_clips = clips
        if args.train_pool:  # many contexts, scored on held-out ones
            pool_cfg = replace(base.branch, contexts=max(args.train_pool, base.branch.contexts))  # the cached pool
            pool, pool_path, _ = branch_pool(pool_cfg, 64, F, n_ctx, interval, show_progress=False)
            keep = pool["group"] < args.train_pool  # its first contexts (context i depends on (seed, i) only)
            train_clips = {k: v[keep] for k, v in pool.items()}
            out |= {"train_pool": {"file": repo_relative(pool_path), "contexts": args.train_pool,
                                   "clips": int(len(train_clips["frames"]))}}
        key = f"{args.actions}_actions"
        st = compute_action_stats(list(train_clips[key]))  # the training clips' own statistics
        frames, actions = to_tensors(clips, st.mean, st.std, F, interval, key)
        tr_frames, tr_actions = to_tensors(train_clips, st.mean, st.std, F, interval, key)
        diffusion = native_diffusion(base.diffusion, args.target) if args.target else base.diffusion
        cfg = replace(base, injection=args.injection, relative_actions=args.actions == "rel",
                      action_map=args.action_map, action_map_sigma=args.action_map_sigma,
                      hidden=args.hidden or base.hidden,
                      diffusion=replace(diffusion, change_weight=args.change_weight))
        pix = pixel_affine(PUSHT_WORKSPACE, frames.shape[-1], st.mean, st.std) if args.action_map != "none" else None
        torch.manual_seed(0)
        model = NanoWM(build_model_config(cfg, tuple(frames.shape[2:]), actions.shape[-1], pix))
        obj = Objective(cfg.diffusion)
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.99))
        reps = -(-args.batch // len(tr_frames))
        xb, ab = tr_frames.repeat(reps, 1, 1, 1, 1)[:args.batch], tr_actions.repeat(reps, 1, 1)[:args.batch]
        draw = torch.Generator().manual_seed(0)
        curve, step, t_train, losses = [], 0, time.time(), []
        while step < args.max_steps and time.time() - t_train < args.minutes * 60:
            if len(tr_frames) > args.batch:  # a fresh random batch of the pool each step
                idx = torch.randperm(len(tr_frames), generator=draw)[:args.batch]
                xb, ab = tr_frames[idx], tr_actions[idx]
            for g in opt.param_groups:
                g["lr"] = args.lr * min(1.0, (step + 1) / 20)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss, _ = obj.loss(model, xb, ab)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            losses.append(float(loss.detach()))  # host sync: the probe is tiny, the curve is the point
            if step % args.eval_every == 0:
                s = score(model, obj, frames, actions, args.branches, n_ctx, base.sample_steps, clip=clip)
                curve.append({"step": step, "minutes": round((time.time() - t_train) / 60, 2),
                              "loss": round(float(np.mean(losses[-args.eval_every:])), 5), **s})
                print(json.dumps(curve[-1]), flush=True)
        out |= {"mode": "overfit", "target": cfg.diffusion.target, "schedule": cfg.diffusion.schedule,
                "hidden": cfg.hidden, "injection": args.injection, "actions": args.actions,
                "action_map": args.action_map, "action_map_sigma": args.action_map_sigma if pix else None,
                "change_weight": args.change_weight, "batch": args.batch, "lr": args.lr, "steps": step,
                "train_minutes": round((time.time() - t_train) / 60, 2), "curve": curve,
                "scores": curve[-1] if curve else score(model, obj, frames, actions, args.branches, n_ctx,
                                                          base.sample_steps, clip=clip)}
        if args.score_train:  # the open question: does it follow the actions on contexts it trained on?
            n = args.score_train * args.branches  # the pool is context-major: its first N contexts
            out["scores_train_contexts"] = {"contexts": args.score_train, **score(
                model, obj, tr_frames[:n], tr_actions[:n], args.branches, n_ctx, base.sample_steps, clip=clip)}
    out |= {"wall_s": round(time.time() - t0, 1), "loadavg_before": [round(v, 2) for v in load0],
            "loadavg_end": [round(v, 2) for v in os.getloadavg()]}
    emit_result(out, args.out, indent=None)


if __name__ == "__main__":
    main()
