"""What a PushT world model has to predict: how much of each model frame changes, and whose pixels the change is.
Prints ONE JSON line last.

Reads the first `--episodes` episodes' videos of a generated PushT directory (DINO-WM layout, `obses/*.mp4`; no
states needed) and, between model frames `lag` apart (`--frame-interval` raw steps each), measures:
  - the fraction of pixels that change (any channel by more than `--threshold` of 255);
  - copy-last's squared error (what a delta model's loss starts from, the change itself) split by whose pixels
    carry it: the agent's colour in either frame, the T's colour in either frame, and the rest;
  - the same split of the changed pixels' count.
The agent's share of the squared change is the part only the actions can explain (nothing in the context says
where the pusher goes next); the T's share is explained by the agent's contact. A loss averaged over all pixels
gives the agent that share of the gradient.

    python benchmarks/wm_change_stats.py [--data data/pusht64_smooth] [--episodes 40] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from ttlab.common.data import repo_relative
from ttlab.common.result_file import emit_result
from ttlab.worldmodel.data.video import read_frames
from ttlab.worldmodel.objects import AGENT_RGB, TEE_RGB, colour_mask


def change_stats(frames: torch.Tensor, lag: int, threshold: float) -> dict[str, float]:
    """frames (T, 3, H, W) in [-1, 1], one per model frame -> sums over the pairs (t, t + lag)."""
    a, b = frames[:-lag], frames[lag:]  # (N, 3, H, W) each
    sq = (b - a).pow(2).sum(1)  # (N, H, W) squared change per pixel
    changed = (b - a).abs().amax(1) * 127.5 > threshold  # (N, H, W)
    agent = colour_mask(a, AGENT_RGB) | colour_mask(b, AGENT_RGB)
    tee = (colour_mask(a, TEE_RGB) | colour_mask(b, TEE_RGB)) & ~agent
    rest = ~(agent | tee)
    out = {"pairs": float(len(a)), "pixels": float(changed.numel()), "changed": float(changed.sum()),
           "sq_total": float(sq.sum())}
    for name, m in (("agent", agent), ("tee", tee), ("rest", rest)):
        out[f"sq_{name}"] = float(sq[m].sum())
        out[f"changed_{name}"] = float((changed & m).sum())
        out[f"area_{name}"] = float(m.sum())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data/pusht64_smooth")
    ap.add_argument("--episodes", type=int, default=40)
    ap.add_argument("--frame-interval", type=int, default=5)
    ap.add_argument("--lags", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--threshold", type=float, default=10.0, help="a pixel changes when a channel moves by more")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    t0 = time.perf_counter()
    videos = sorted((Path(args.data) / "obses").glob("*.mp4"))[:args.episodes]
    if not videos:
        raise SystemExit(f"wm_change_stats: no videos in {Path(args.data) / 'obses'}")
    if args.episodes < 1 or args.frame_interval < 1 or min(args.lags) < 1:
        raise SystemExit("wm_change_stats: --episodes, --frame-interval and --lags must be >= 1")
    sums: dict[int, dict[str, float]] = {lag: {} for lag in args.lags}
    for v in videos:
        raw = torch.from_numpy(read_frames(v)).permute(0, 3, 1, 2).float() / 127.5 - 1  # (T, 3, H, W)
        frames = raw[::args.frame_interval]  # one per model frame
        for lag in args.lags:
            for k, x in change_stats(frames, lag, args.threshold).items():
                sums[lag][k] = sums[lag].get(k, 0.0) + x
    by_lag = {}
    for lag, s in sums.items():
        by_lag[str(lag)] = {
            "changed_pixel_fraction": round(s["changed"] / s["pixels"], 4),
            "changed_pixels_per_frame": round(s["changed"] / s["pairs"], 1),
            "copy_last_mse_per_value": round(s["sq_total"] / (s["pixels"] * 3), 5),
            "share_of_squared_change": {n: round(s[f"sq_{n}"] / s["sq_total"], 3) for n in ("agent", "tee", "rest")},
            "share_of_changed_pixels": {n: round(s[f"changed_{n}"] / s["changed"], 3) for n in ("agent", "tee", "rest")},
            "share_of_area": {n: round(s[f"area_{n}"] / s["pixels"], 4) for n in ("agent", "tee", "rest")},
        }
    res = {"benchmark": "wm_change_stats", "data": repo_relative(args.data), "episodes": len(videos),
           "frame_interval": args.frame_interval, "threshold_of_255": args.threshold, "by_lag": by_lag,
           "nproc": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
           "wall_seconds": round(time.perf_counter() - t0, 1)}
    emit_result(res, args.out)


if __name__ == "__main__":
    main()
