"""Scripted egos at the blind crossing: what the information structure allows, measured without learning.

Each ego drives straight along its lane (the crossing's lanes are straight) and only chooses *when* to go and
how hard to accelerate. Within a trial a scripted ego may use a clock (the trial tick) and its observation; the
*memoryless* ones forget everything at each trial start (a stronger baseline than a memoryless policy, which
has no clock). Only `MemoryEgo` carries anything from one trial to the next, and only what its own in-play
observations showed: whether the last of them, before it left play, had its goal within reach.

- `TimedEgo(go, lon)`: at rest until trial tick `go`, then longitudinal action `lon` (0..6) throughout;
- `ReactiveEgo(go, lon)`: the same, but brakes while a moving partner is in view (and goes on when none is);
- `MemoryEgo(wait)`: trial 0 goes at once (the probe); later trials go at once if the earlier trials of the
  episode succeeded, else wait `wait` ticks first (let the partner through).

    out = partner_summary(*run_paired(env, TimedEgo(0, 6), population, episodes=4), population.names)
"""

from __future__ import annotations

import torch

from ttlab.drive.sim.dynamics import NUM_STEER
from ttlab.drive.sim.observe import POS_SCALE, SPEED_SCALE

STRAIGHT = NUM_STEER // 2
PARTNER_SPEED_COL = 4  # speed within a partner row of the observation (`sim.observe`)
GOAL_SEEN = 4.0  # m: an in-play observation with the goal this close is the last one before reaching it (<= 2 m + a tick)
MOVING = 2.0 / SPEED_SCALE  # a partner faster than 2 m/s counts as moving (observed speeds are over SPEED_SCALE)


def partner_seen(env, obs: torch.Tensor) -> torch.Tensor:
    """(N,) bool: a moving partner is in view in this observation (a partner row faster than 2 m/s)."""
    L = env.layout
    rows = obs[:, L.partner_offset: L.road_offset].unflatten(-1, (L.partner_slots, L.partner_dim))  # (N, P, F)
    return (rows[..., PARTNER_SPEED_COL] > MOVING).any(-1)


class TimedEgo:
    """Memoryless: at rest until trial tick `go`, then action `lon` with straight steering."""

    def __init__(self, env, go: int = 0, lon: int = 6):
        self.env, self.go, self.lon = env, go, lon

    def __call__(self, obs, new_ep, removed, active=None) -> torch.Tensor:
        A = self.env.num_agents
        t = self.env.trial_step.repeat_interleave(A)  # (N,)
        lon = torch.where(t >= self.go, self.lon, 0)
        return lon * NUM_STEER + STRAIGHT


class ReactiveEgo(TimedEgo):
    """Memoryless: `TimedEgo`, but full brake while a moving partner is in view."""

    def __call__(self, obs, new_ep, removed, active=None) -> torch.Tensor:
        act = super().__call__(obs, new_ep, removed)
        return torch.where(partner_seen(self.env, obs), STRAIGHT, act)  # lon 0: -4 m/s^2


class MemoryEgo:
    """With memory across trials: probe at once in trial 0; in later trials wait `wait` ticks first iff an earlier
    trial of this episode failed, else go at once. "Failed" is read from the ego's own in-play observations: the
    last one before it left play showed its goal more than `GOAL_SEEN` metres away (a collision, not the goal,
    took it off the map, or the trial ran out)."""

    def __init__(self, env, wait: int = 12, lon: int = 6):
        self.env = env
        self.now, self.later = TimedEgo(env, 0, lon), TimedEgo(env, wait, lon)
        N = env.num_envs * env.num_agents
        self.failed = torch.zeros(N, dtype=torch.bool, device=env.device)
        self.last_far = torch.zeros(N, dtype=torch.bool, device=env.device)
        self.trial = torch.zeros(N, dtype=torch.long, device=env.device)

    def __call__(self, obs, new_ep, removed, active=None) -> torch.Tensor:
        A = self.env.num_agents
        trial = self.env.trial.repeat_interleave(A)  # (N,)
        new_trial = (trial != self.trial) & ~new_ep
        self.failed = torch.where(new_ep, False, self.failed | (new_trial & self.last_far))
        far = obs[:, :2].norm(dim=-1) * POS_SCALE > GOAL_SEEN  # (N,) goal_x, goal_y lead the ego features
        self.last_far = torch.where(removed, self.last_far, far)
        self.trial = trial
        return torch.where(self.failed, self.later(obs, new_ep, removed), self.now(obs, new_ep, removed))
