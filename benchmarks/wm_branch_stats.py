"""How much of a branched clip's future only its actions can explain, and how loud those actions are. Prints ONE
JSON line last.

Reads the branched-clip pool a training run mixes in (`ttlab.worldmodel.data.branches`, the `pusht_cpu` window
shape; simulated and cached if missing) and, for each predicted frame (lag 1..3 after the last context frame):
  - `copy_last_mse`: the squared change from the last context frame per value (what a delta model starts from);
  - `action_blind_mse`: the squared distance of each branch's frame from the pixelwise mean of its context's
    branches, per value: the least error any predictor that ignores the actions can reach on these clips (in MSE);
  - their ratio, the share of the change that only the actions explain; the same on the agent's and the T's pixels.
With `--stats RUN/action_stats.json`, also the size of the actions after the run's normalisation: the mean
norm of a pool clip's (normalised) action rows against the dataset's windows'.

    python benchmarks/wm_branch_stats.py [--contexts 256] [--stats runs/wm/RUN/action_stats.json] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ttlab.common.data import repo_relative
from ttlab.common.result_file import emit_result
from ttlab.worldmodel.data.branches import branch_pool
from ttlab.worldmodel.data.dino_wm import DinoWMSource
from ttlab.worldmodel.data.windows import ActionStats, window_actions
from ttlab.worldmodel.objects import AGENT_RGB, TEE_RGB, colour_mask
from ttlab.worldmodel.presets import pusht_cpu


def shares(frames: torch.Tensor, branches: int, n_ctx: int) -> dict:
    """frames (N, F, 3, H, W) in [-1, 1], context-major groups of `branches` -> per-lag sums."""
    N, F = frames.shape[:2]
    g = frames.view(N // branches, branches, F, *frames.shape[2:])  # (G, b, F, 3, H, W)
    anchor = g[:, :, n_ctx - 1:n_ctx]  # (G, b, 1, 3, H, W)
    fut = g[:, :, n_ctx:]  # (G, b, L, 3, H, W)
    mean = fut.mean(1, keepdim=True)  # the best action-blind prediction, pixelwise
    copy_sq = (fut - anchor).pow(2).sum(3)  # (G, b, L, H, W)
    blind_sq = (fut - mean).pow(2).sum(3)
    flat = fut.flatten(0, 2)  # (G b L, 3, H, W)
    agent = (colour_mask(flat, AGENT_RGB) | colour_mask(anchor.expand_as(fut).flatten(0, 2), AGENT_RGB)).view(
        copy_sq.shape)
    tee = colour_mask(flat, TEE_RGB).view(copy_sq.shape) & ~agent
    out = {}
    for lag in range(fut.shape[2]):
        c, b = copy_sq[:, :, lag], blind_sq[:, :, lag]
        vals = c.numel() * 3
        row = {"copy_last_mse": float(c.sum()) / vals, "action_blind_mse": float(b.sum()) / vals}
        row["action_only_share"] = row["action_blind_mse"] / row["copy_last_mse"]
        for name, m in (("agent", agent[:, :, lag]), ("tee", tee[:, :, lag])):
            row[f"action_only_share_{name}_pixels"] = float(b[m].sum()) / max(float(c[m].sum()), 1e-9)
            row[f"share_of_change_on_{name}_pixels"] = float(c[m].sum()) / float(c.sum())
        out[str(lag + 1)] = {k: round(v, 5) for k, v in row.items()}
    return out


def action_norms(rows: np.ndarray) -> dict:
    """rows (N, F, A) normalised window actions (frame 0 = zeros, left out) -> mean and median row norm."""
    n = np.linalg.norm(rows[:, 1:], axis=-1).reshape(-1)
    return {"mean": round(float(n.mean()), 3), "median": round(float(np.median(n)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--contexts", type=int, default=256, help="the pool's contexts (the preset's pool: 256)")
    ap.add_argument("--seed", type=int, default=1, help="the pool's seed")
    ap.add_argument("--stats", type=Path, help="a run's action_stats.json: compare normalised action sizes")
    ap.add_argument("--data", default="data/pusht64_smooth", help="the dataset whose windows --stats compares with")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.contexts < 1:
        raise SystemExit(f"wm_branch_stats: --contexts {args.contexts} must be >= 1")
    if args.stats is not None and not args.stats.is_file():
        raise SystemExit(f"wm_branch_stats: --stats {args.stats}: no such file")
    t0 = time.perf_counter()
    tc = pusht_cpu()
    bc = replace(tc.branch, contexts=args.contexts, seed=args.seed)
    n_ctx = tc.diffusion.context_frames
    pool, path, made = branch_pool(bc, 64, tc.num_frames, n_ctx, tc.frame_interval, show_progress=False)
    frames = torch.from_numpy(pool["frames"]).movedim(-1, -3).float() / 127.5 - 1  # (N, F, 3, H, W)
    res = {"benchmark": "wm_branch_stats", "pool": repo_relative(path), "simulated_now": made,
           "clips": int(len(frames)), "branches": bc.branches, "n_ctx": n_ctx, "frame_interval": tc.frame_interval,
           "by_lag": shares(frames, bc.branches, n_ctx)}
    if args.stats is not None:
        st = ActionStats.load(args.stats)
        pool_rows = np.stack([window_actions(st.normalize(a), 0, tc.num_frames, tc.frame_interval)
                              for a in pool["rel_actions"]])
        src = DinoWMSource(args.data)
        data_rows = []
        for e in range(min(len(src), 40)):
            acts = st.normalize(src.actions(e))
            span = (tc.num_frames - 1) * tc.frame_interval
            for s in range(0, len(acts) - span, 10):
                data_rows.append(window_actions(acts, s, tc.num_frames, tc.frame_interval))
        res["normalised_action_row_norm"] = {"pool": action_norms(pool_rows),
                                             "dataset_windows": action_norms(np.stack(data_rows))}
    res |= {"nproc": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "wall_seconds": round(time.perf_counter() - t0, 1)}
    emit_result(res, args.out)


if __name__ == "__main__":
    main()
