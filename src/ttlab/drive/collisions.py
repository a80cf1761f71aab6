"""What a driver's collisions look like: each vehicle-vehicle collision's geometry, tick and speeds, recorded
during an evaluation (`evaluate(..., on_step=CollisionRecorder(episodes))`), and the ticks at which goals are
reached.

Geometry from the colliding vehicle's own frame, by the other vehicle's heading relative to it: within 30 degrees
a rear-end collision (the one behind "rear", the one in front "hit_from_behind"); beyond 150 degrees head-on;
between, crossing paths. The other vehicle is the nearest one on the map before the tick.
"""

from __future__ import annotations

import math

import torch


def kind(rel_heading_deg: float, ahead_m: float) -> str:
    """The collision's geometry from one vehicle's frame: the other's relative heading and where it was."""
    h = abs(rel_heading_deg)
    if h < 30:
        return "rear" if ahead_m > 0 else "hit_from_behind"
    return "head_on" if h > 150 else "crossing"


class CollisionRecorder:
    """on_step hook of `evaluate`: collision events and goal-reach ticks of the controlled vehicles, counted
    (as the evaluation counts them) only in each env's first `episodes` episodes. Reads each event on the host:
    an analysis tool, not a hot path."""

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
