"""Goal tests and the per-step reward (pure functions).

reward = w_goal * reached + w_collision * collided + w_offroad * offroad [+ w_progress * metres gained
toward the goal, potential-based shaping, EnvConfig.reward_progress], per agent, where the weights
are either the config's fixed weights or per-agent reward-conditioning weights drawn per episode
uniformly in [lb, ub] (and shown to the policy in its ego features).
"""

from __future__ import annotations

import torch

from ttlab.drive.sim import rng


def goal_reached(x: torch.Tensor, y: torch.Tensor, speed: torch.Tensor, gx: torch.Tensor, gy: torch.Tensor,
                 radius: float, max_speed: float) -> torch.Tensor:
    """Within `radius` metres of the goal at speed <= `max_speed` (elementwise bool)."""
    dx, dy = x - gx, y - gy
    return (dx * dx + dy * dy <= radius * radius) & (speed <= max_speed)


def candidate_reached(x: torch.Tensor, y: torch.Tensor, speed: torch.Tensor, cand: torch.Tensor,
                      radius: float, max_speed: float) -> torch.Tensor:
    """Hidden-goal mode: (E, A, M) bool, which candidate goals (E, A, M, 2) are reached."""
    return goal_reached(x.unsqueeze(-1), y.unsqueeze(-1), speed.unsqueeze(-1), cand[..., 0], cand[..., 1],
                        radius, max_speed)


def step_reward(weights: torch.Tensor, reached: torch.Tensor, collided: torch.Tensor,
                offroad: torch.Tensor) -> torch.Tensor:
    """weights (E, A, 3) = (goal, collision, offroad); events (E, A) bool -> reward (E, A) float32."""
    ev = torch.stack([reached, collided, offroad], dim=-1).float()  # (E, A, 3)
    return (weights * ev).sum(-1)


def conflict(x: torch.Tensor, y: torch.Tensor, heading: torch.Tensor, speed: torch.Tensor, visible: torch.Tensor,
             horizon: float, radius: float) -> torch.Tensor:
    """(E, A) bool: some other visible vehicle and this one, if both kept their velocities, would come within
    `radius` metres (centre to centre) within `horizon` seconds: a collision course. Pairwise over the A slots of
    each env, constant-velocity closest approach; every argument (E, A); `visible` (E, A) bool."""
    vx, vy = speed * torch.cos(heading), speed * torch.sin(heading)  # (E, A)
    rx = x.unsqueeze(1) - x.unsqueeze(2)  # (E, A, A): [e, i, j] = x_j - x_i
    ry = y.unsqueeze(1) - y.unsqueeze(2)
    dvx = vx.unsqueeze(1) - vx.unsqueeze(2)
    dvy = vy.unsqueeze(1) - vy.unsqueeze(2)
    t = (-(rx * dvx + ry * dvy) / (dvx * dvx + dvy * dvy + 1e-9)).clamp(0.0, horizon)  # (E, A, A) time of approach
    d2 = (rx + dvx * t) ** 2 + (ry + dvy * t) ** 2
    A = x.shape[1]
    others = ~torch.eye(A, dtype=torch.bool, device=x.device)  # (A, A)
    pair = (d2 < radius * radius) & visible.unsqueeze(1) & visible.unsqueeze(2) & others
    return pair.any(-1)


def progress_to_goal(x0: torch.Tensor, y0: torch.Tensor, x1: torch.Tensor, y1: torch.Tensor, gx: torch.Tensor,
                     gy: torch.Tensor) -> torch.Tensor:
    """Metres closer to the goal (gx, gy) after moving from (x0, y0) to (x1, y1): d0 - d1, elementwise."""
    return torch.hypot(x0 - gx, y0 - gy) - torch.hypot(x1 - gx, y1 - gy)


def nearest_candidate_progress(x0: torch.Tensor, y0: torch.Tensor, x1: torch.Tensor, y1: torch.Tensor,
                               cand: torch.Tensor) -> torch.Tensor:
    """Metres closer to the nearest candidate exit (E, A, M, 2) after moving from (x0, y0) to (x1, y1), (E, A)."""
    d0 = torch.hypot(cand[..., 0] - x0.unsqueeze(-1), cand[..., 1] - y0.unsqueeze(-1)).amin(-1)
    d1 = torch.hypot(cand[..., 0] - x1.unsqueeze(-1), cand[..., 1] - y1.unsqueeze(-1)).amin(-1)
    return d0 - d1


def draw_weights(lb: tuple[float, float, float], ub: tuple[float, float, float], seed: int,
                 env_ids: torch.Tensor, episode: torch.Tensor, num_agents: int, stream: int) -> torch.Tensor:
    """Per-agent reward weights (E, A, 3) uniform in [lb, ub], a pure function of (seed, env, episode)."""
    dev = env_ids.device
    a = torch.arange(num_agents, device=dev).view(1, -1, 1)
    c = torch.arange(3, device=dev).view(1, 1, -1)
    u = rng.uniform(env_ids.view(-1, 1, 1), episode.view(-1, 1, 1), a, c, seed, stream)  # (E, A, 3)
    lo = torch.tensor(lb, device=dev)
    hi = torch.tensor(ub, device=dev)
    return lo + u * (hi - lo)
