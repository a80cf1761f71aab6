"""Statistics the self-play results rest on: per-scene outcome counts, their scene-clustered standard error, and
the checkpoint selection rule. `benchmarks/drive_selfplay.py` and `drive_selfplay_heldout.py` wire them.

Vehicles of one scene share its difficulty, so the outcomes of a held-out evaluation are not independent: the
standard error that matters is over scenes (`cluster_ratio_stderr`), from counts per scene (`SceneCounts`, an
`on_step` hook of `ttlab.drive.evaluate.evaluate` that counts exactly what the evaluation counts).
"""

from __future__ import annotations

import torch

GOAL_FLOOR = 0.95
"""The self-play target's goal rate: selection prefers checkpoints at or above it."""


def cluster_ratio_stderr(bad: torch.Tensor, egos: torch.Tensor) -> float:
    """Standard error of the pooled rate R = sum(bad) / sum(egos) when the units are clusters (scenes) of
    correlated outcomes: sqrt(S / (S - 1) * sum_s (bad_s - R egos_s)^2) / sum(egos), over the S clusters with
    egos_s > 0 (the linearised ratio estimator). Equal cluster sizes give std(per-cluster rate) / sqrt(S);
    fewer than two played clusters give nan."""
    keep = egos > 0
    b, e = bad[keep].double(), egos[keep].double()  # (S,)
    n = int(keep.sum())
    if n < 2:
        return float("nan")
    r = b.sum() / e.sum()
    return float(torch.sqrt(n / (n - 1) * ((b - r * e) ** 2).sum()) / e.sum())


def choose_checkpoint(rows: list[dict]) -> dict:
    """The selection rule: the lowest collision + offroad among rows with goal rate >= `GOAL_FLOOR` (the earlier
    on a tie), else the highest score. Rows hold goal_rate, collision_plus_offroad and score."""
    ok = [r for r in rows if r["goal_rate"] >= GOAL_FLOOR]
    return min(ok, key=lambda r: r["collision_plus_offroad"]) if ok else max(rows, key=lambda r: r["score"])


class SceneCounts:
    """on_step hook of `evaluate`: per scene, the controlled vehicles that started an episode and how many of them
    reached the goal / collided / went offroad, counted (as the evaluation counts) in each env's first `episodes`."""

    def __init__(self, episodes: int, num_scenes: int) -> None:
        self.episodes = episodes
        self.egos = torch.zeros(num_scenes, dtype=torch.long)
        self.goals = torch.zeros(num_scenes, dtype=torch.long)
        self.collisions = torch.zeros(num_scenes, dtype=torch.long)
        self.offroads = torch.zeros(num_scenes, dtype=torch.long)
        self.scene: torch.Tensor | None = None  # (E,) the scene each env played during the step
        self.done: torch.Tensor | None = None  # (E,) episodes finished before the step
        self.fresh: torch.Tensor | None = None  # (E,) bool: the step was an episode's first

    def __call__(self, env, before) -> None:
        if self.scene is None:
            self.scene = env.scene.clone()
            self.done = torch.zeros_like(env.trial_metrics.episodes_done)
            self.fresh = torch.ones(env.num_envs, dtype=torch.bool)
        counted = self.done < self.episodes  # (E,)
        ctrl = (before.role != 0) & env.controlled  # (E, A) the controlled vehicles of the step
        start = (self.fresh & counted).unsqueeze(1) & ctrl & ~before.removed
        self.egos.index_add_(0, self.scene, start.sum(1))
        ev = env.last_events
        c = counted.unsqueeze(1)
        self.goals.index_add_(0, self.scene, (ev["goal"] & c).sum(1))
        self.collisions.index_add_(0, self.scene, (ev["collision"] & c).sum(1))
        self.offroads.index_add_(0, self.scene, (ev["offroad"] & c).sum(1))
        self.fresh = env.ep_step == 0  # a reset followed this step: the next step is a first one
        self.done = env.trial_metrics.episodes_done.clone()
        self.scene = env.scene.clone()

    def summary(self, first: int) -> dict:
        """Pooled rates over every played scene and over the played scenes among the first `first`. Collision +
        offroad is the sum of the two rates, as the evaluation reports it (a vehicle with both counts twice)."""
        bad = self.collisions + self.offroads  # (S,)
        head = torch.zeros_like(self.egos, dtype=torch.bool)
        head[:first] = True
        return {"scenes": int((self.egos > 0).sum()), "ego_episodes": int(self.egos.sum()),
                "goal_rate": round(float(self.goals.sum() / self.egos.sum()), 5),
                "collision_plus_offroad": round(float(bad.sum() / self.egos.sum()), 5),
                "stderr_scenes": round(cluster_ratio_stderr(bad, self.egos), 5),
                "stderr_goal_scenes": round(cluster_ratio_stderr(self.goals, self.egos), 5),
                f"first_{first}": {"scenes": int((self.egos[head] > 0).sum()),
                                   "goal_rate": round(float(self.goals[head].sum() / self.egos[head].sum()), 5),
                                   "collision_plus_offroad": round(float(bad[head].sum() / self.egos[head].sum()), 5),
                                   "stderr_scenes": round(cluster_ratio_stderr(bad[head], self.egos[head]), 5)}}
