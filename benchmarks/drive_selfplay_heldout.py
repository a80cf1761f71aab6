"""Re-evaluate self-play runs on a larger held-out set, with a standard error that counts scenes, not vehicles.

`drive_selfplay.py` evaluates on 256 held-out scenes (2048 ego-episodes). Vehicles of one scene share its
difficulty, so the 2048 outcomes are not independent: the standard error that matters is over scenes. This
script evaluates each run's final checkpoint (`RUN_DIR/checkpoints/latest`) in self-play on `--scenes`
(default: the pool of the first 1024 procedural scenes of held-out seed 1000, whose first 256 are the usual set;
the evaluation draws an env's scene from the pool at random, with replacement, so 256 envs x 4 episodes play
about 650 distinct scenes), sampled and greedy, and reports per run: goal rate, collision + offroad (as the
evaluation sums them), its scene-clustered standard error (`cluster_ratio_stderr`: a ratio estimator's
error with the scenes as clusters), and the same rates on the scenes of the first 256 alone. The counting and
the statistics are `ttlab.drive.stats`; this script wires them to the evaluation and prints. Writes `--out`
and prints ONE JSON line last.

    python benchmarks/drive_selfplay_heldout.py runs/drive/pkinc_s0 runs/drive/sp_n2048 \\
        --out benchmarks/results/drive_selfplay_heldout1024.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from ttlab.drive.evaluate import EvalConfig, evaluate
from ttlab.drive.stats import SceneCounts


def scene_count(spec: str) -> int:
    for part in spec.split(":", 1)[1].split(","):
        key, _, value = part.partition("=")
        if key == "n":
            return int(value)
    raise SystemExit(f"--scenes {spec!r}: give n=... (a procedural source)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (runs/drive/<name>)")
    ap.add_argument("--scenes", default="procedural:n=1024,agents=8,seed=1000")
    ap.add_argument("--envs", type=int, default=256)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--scene-order", choices=("random", "cycle"), default="random",
                    help="random: scenes drawn with replacement (as drive_selfplay.py evaluates); cycle: with envs x "
                         "episodes = n, every scene of the pool exactly once")
    ap.add_argument("--first", type=int, default=256, help="also report the first this many scenes alone")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    for r in a.runs:
        if not (r / "checkpoints" / "latest.safetensors").is_file():
            raise SystemExit(f"{r}: no checkpoints/latest.safetensors (give run directories)")
    torch.set_num_threads(a.threads)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    t0, load0, rows = time.perf_counter(), os.getloadavg(), []
    n_scenes = scene_count(a.scenes)
    for r in a.runs:
        row = {"run": str(r)}
        for mode, greedy in (("sampled", False), ("greedy", True)):
            rec = SceneCounts(a.episodes, n_scenes)
            with tempfile.TemporaryDirectory() as tmp:
                m = evaluate(EvalConfig(checkpoint=str(r / "checkpoints" / "latest"), mode="self_play",
                                        scenarios=a.scenes, num_envs=a.envs, episodes=a.episodes, greedy=greedy,
                                        scene_order=a.scene_order, device="cpu", out=Path(tmp) / "eval.json"), on_step=rec)
            s = rec.summary(a.first)
            if s["ego_episodes"] != m["ego_trials"]:  # the hook counts what the evaluation counts
                raise RuntimeError(f"{r} {mode}: {s['ego_episodes']} ego-episodes counted, evaluation has {m['ego_trials']}")
            s["evaluation"] = {"goal_rate": m["trial_0_goal_rate"],
                               "collision_plus_offroad": m["trial_0_collision_rate"] + m["trial_0_offroad_rate"]}
            row[mode] = s
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {"benchmark": "drive_selfplay_heldout", "scenes": a.scenes, "scene_order": a.scene_order, "envs": a.envs,
           "episodes": a.episodes,
           "commit": commit, "nproc": os.cpu_count(), "threads": a.threads, "loadavg_start": load0,
           "loadavg_end": os.getloadavg(), "wall_s": round(time.perf_counter() - t0, 1), "runs": rows}
    line = json.dumps(out)
    if a.out is not None:
        a.out.write_text(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
