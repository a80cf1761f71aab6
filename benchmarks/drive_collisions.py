"""What the collisions a self-play driver still has look like: kind, time, speed; and how much time it leaves.

Runs the self-play evaluation of a checkpoint (`ttlab drive eval --mode self_play`, the protocol of
`drive_selfplay.py`) and records every vehicle-vehicle collision as it happens: the tick, both vehicles'
speeds before it, and its geometry from the vehicle's own frame (the other vehicle's heading relative to it:
within 30 degrees a rear-end collision, the one behind "rear", the one in front "hit_from_behind"; beyond 150
degrees head-on; between, crossing paths). It also records the tick at which each vehicle reaches its goal:
how much of the 91-tick trial a driver that slowed down for a crossing would still have.

    python benchmarks/drive_collisions.py runs/drive/sp_n2048/checkpoints/latest
    python benchmarks/drive_collisions.py STEM --scenes procedural:n=256,agents=8,seed=1000 --episodes 4 --sampled

Prints ONE JSON line last (and writes it to --out when given).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import tempfile
from pathlib import Path

import torch

from ttlab.drive.evaluate import EvalConfig, evaluate


def kind(rel_heading_deg: float, ahead_m: float) -> str:
    """The collision's geometry from one vehicle's frame: the other's relative heading and where it was."""
    h = abs(rel_heading_deg)
    if h < 30:
        return "rear" if ahead_m > 0 else "hit_from_behind"
    return "head_on" if h > 150 else "crossing"


class Recorder:
    """on_step hook of `evaluate`: collision events and goal-reach ticks of the controlled vehicles, counted
    (as the evaluation counts them) only in each env's first `episodes` episodes."""

    def __init__(self, episodes: int) -> None:
        self.episodes = episodes
        self.collisions: list[dict] = []
        self.goal_ticks: list[int] = []
        self.prev_tick: torch.Tensor | None = None  # (E,) ticks played in the current episode before this step
        self.prev_done: torch.Tensor | None = None  # (E,) episodes finished before this step

    def __call__(self, env, before) -> None:
        if self.prev_tick is None:
            self.prev_tick = torch.zeros_like(env.ep_step)
            self.prev_done = torch.zeros_like(env.trial_metrics.episodes_done)
        tick = self.prev_tick + 1  # (E,) the tick just played (the env's ep_step is 0 where a reset followed it)
        counted = (self.prev_done < self.episodes).unsqueeze(1)  # (E, 1)
        ev = env.last_events
        for e, i in (ev["collision"] & counted).nonzero().tolist():
            others = [j for j in range(env.num_agents) if j != i and not bool(before.removed[e, j])]
            if not others:
                continue
            j = min(others, key=lambda j: math.hypot(float(before.x[e, j] - before.x[e, i]),
                                                     float(before.y[e, j] - before.y[e, i])))
            dx, dy = float(before.x[e, j] - before.x[e, i]), float(before.y[e, j] - before.y[e, i])
            h = float(before.heading[e, i])
            ahead = dx * math.cos(h) + dy * math.sin(h)
            rel = math.degrees((float(before.heading[e, j]) - h + math.pi) % (2 * math.pi) - math.pi)
            self.collisions.append({"tick": int(tick[e]), "speed": float(before.speed[e, i]),
                                    "other_speed": float(before.speed[e, j]), "kind": kind(rel, ahead)})
        goal = ev["goal"] & counted
        self.goal_ticks += tick.unsqueeze(1).expand_as(goal)[goal].tolist()
        self.prev_tick = env.ep_step.clone()
        self.prev_done = env.trial_metrics.episodes_done.clone()


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
    rec = Recorder(a.episodes)
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
