"""Episode metrics accumulated on device; `read()` is the only host-visible step (at report time).

An ego's episode outcome: return, length (ticks in play), goal (reached at least once / fraction of
trials), collision, offroad, score (goal reached with no collision and no offroad).
"""

from __future__ import annotations

import torch

EPISODE_KEYS = ("return", "length", "goal_rate", "collision_rate", "offroad_rate", "score")


class EpisodeMetrics:
    """Sums over finished ego-episodes since the last read."""

    def __init__(self, device: torch.device):
        self.acc = torch.zeros(len(EPISODE_KEYS) + 1, device=device)  # sums ..., count

    def add(self, done: torch.Tensor, ret: torch.Tensor, length: torch.Tensor, goal: torch.Tensor,
            collision: torch.Tensor, offroad: torch.Tensor, score: torch.Tensor) -> None:
        """done (E, A) bool: egos whose episode ends now; the rest (E, A) float per-ego outcomes."""
        vals = torch.stack([ret, length, goal, collision, offroad, score, torch.ones_like(ret)], -1)  # (E, A, 7)
        self.acc += (vals * done.unsqueeze(-1)).sum((0, 1))

    def read(self) -> dict[str, torch.Tensor]:
        count = self.acc[-1]
        mean = self.acc[:-1] / count.clamp_min(1.0)
        out = {k: mean[i] for i, k in enumerate(EPISODE_KEYS)}
        out["episodes"] = count.clone()
        self.acc.zero_()
        return out
