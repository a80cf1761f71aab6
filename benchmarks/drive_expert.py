"""What the self-play scenes allow: a log-tracking expert on the held-out self-play protocol.

Every vehicle of each held-out procedural scene is driven by `drive.bc.tracking_actions` (from its current state,
the discrete action whose bicycle tick lands closest to its logged next state: an expert that reads the log's
future) in the self-play evaluation env of `--preset` (one trial per episode, collisions and offroad remove the
vehicle), counted as `ttlab drive eval --mode self_play` counts: exactly `--episodes` episodes per env. The
policy's figures in the README are on the same scenes and protocol, so this is the ceiling they are read against.
Writes `--out` (if given) and prints ONE JSON line last.

    python benchmarks/drive_expert.py --out benchmarks/results/drive_expert_heldout1024.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import torch

from ttlab.drive.presets import TRAIN_PRESETS
from ttlab.drive.replay import expert_rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="selfplay_yield", help="the training preset whose env is evaluated")
    ap.add_argument("--scenes", default="procedural:n=1024,agents=8,seed=1000")
    ap.add_argument("--envs", type=int, default=256)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--scene-order", choices=("random", "cycle"), default="random")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.preset not in TRAIN_PRESETS:
        raise SystemExit(f"--preset {a.preset!r}: expected one of {', '.join(TRAIN_PRESETS)}")
    torch.set_num_threads(a.threads)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    t0, load0 = time.perf_counter(), os.getloadavg()
    rates = expert_rates(TRAIN_PRESETS[a.preset]().env, a.scenes, a.envs, a.episodes, a.scene_order)
    out = {"benchmark": "drive_expert", "preset": a.preset, "envs": a.envs, "episodes": a.episodes,
           "expert": "drive.bc.tracking_actions (reads the log's next state)", **rates, "commit": commit,
           "nproc": os.cpu_count(), "threads": a.threads, "loadavg_start": load0, "loadavg_end": os.getloadavg(),
           "wall_s": round(time.perf_counter() - t0, 1)}
    line = json.dumps(out)
    if a.out is not None:
        a.out.write_text(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
