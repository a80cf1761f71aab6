"""What the collisions a self-play driver still has look like: kind, time, speed; and how much time it leaves.

Runs the self-play evaluation of a checkpoint (`ttlab drive eval --mode self_play`, the protocol of
`drive_selfplay.py`) and records every vehicle-vehicle collision as it happens: the tick, both vehicles'
speeds before it, and its geometry from the vehicle's own frame (the other vehicle's heading relative to it:
within 30 degrees a rear-end collision, the one behind "rear", the one in front "hit_from_behind"; beyond 150
degrees head-on; between, crossing paths; `drive.collisions`). It also records the tick at which each vehicle
reaches its goal: how much of the 91-tick trial a driver that slowed down for a crossing would still have.

    python benchmarks/drive_collisions.py runs/drive/sp_n2048/checkpoints/latest
    python benchmarks/drive_collisions.py STEM --scenes procedural:n=256,agents=8,seed=1000 --episodes 4 --sampled

Prints ONE JSON line last (and writes it to --out when given).
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
from pathlib import Path

import torch

from ttlab.drive.collisions import CollisionRecorder
from ttlab.drive.evaluate import EvalConfig, evaluate


def quantiles(xs: list[float], qs=(0.1, 0.5, 0.9)) -> dict:
    if not xs:
        return {}
    t = torch.tensor(xs, dtype=torch.float64)
    return {f"q{int(q * 100)}": round(float(torch.quantile(t, q)), 2) for q in qs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", help="checkpoint stem, e.g. runs/drive/<run>/checkpoints/latest")
    ap.add_argument("--scenes", default="procedural:n=256,agents=8,seed=1000")
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--sampled", action="store_true", help="sample actions (default: greedy)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rec = CollisionRecorder(a.episodes)
    with tempfile.TemporaryDirectory() as tmp:  # the evaluation's own JSON: only its rates are kept, in ours
        m = evaluate(EvalConfig(checkpoint=a.checkpoint, mode="self_play", scenarios=a.scenes, num_envs=a.envs,
                                episodes=a.episodes, greedy=not a.sampled, device="cpu",
                                out=Path(tmp) / "eval.json"), on_step=rec)
    c = rec.collisions
    by_kind = collections.Counter(e["kind"] for e in c)
    out = {"benchmark": "drive_collisions", "checkpoint": a.checkpoint, "scenes": a.scenes,
           "greedy": not a.sampled, "ego_episodes": m["ego_trials"], "goal_rate": m["trial_0_goal_rate"],
           "collision_rate": m["trial_0_collision_rate"], "offroad_rate": m["trial_0_offroad_rate"],
           "collision_events": len(c),
           "kinds": {k: round(v / max(len(c), 1), 3) for k, v in by_kind.most_common()},
           "tick": quantiles([e["tick"] for e in c]), "speed_m_s": quantiles([e["speed"] for e in c]),
           "goal_tick": quantiles(rec.goal_ticks), "goal_events": len(rec.goal_ticks)}
    line = json.dumps(out)
    if a.out is not None:
        a.out.write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
