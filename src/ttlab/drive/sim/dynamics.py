"""Vehicle dynamics: a kinematic bicycle ("classic") and a jerk-limited bicycle ("jerk").

Both integrate one tick of `dt` seconds exactly for piecewise-constant controls: the speed changes
linearly over the tick, and the vehicle travels the covered distance along a circular arc whose
curvature is set by the steering angle (rear-axle-to-centre slip angle beta = atan(tan(delta) / 2)).
So a straight run follows x = x0 + v0 t + a t^2 / 2 and a constant-speed, constant-steer run follows a
circle of radius L / (cos(beta) tan(delta)) exactly (tested against those closed forms).

Discrete actions index a joint grid of 7 longitudinal x 13 steering values (91 actions);
continuous actions are two numbers in [-1, 1] scaled to the same bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

NUM_ACCEL = 7
NUM_STEER = 13
NUM_DISCRETE = NUM_ACCEL * NUM_STEER


@dataclass(frozen=True)
class DynamicsLimits:
    """Bounds shared by both models."""

    max_accel: float = 4.0  # m/s^2, classic action bound and jerk-model accel clamp
    max_steer: float = 0.6  # rad, steering-angle bound
    max_speed: float = 30.0  # m/s (no reverse: speed is clamped to [0, max_speed])
    max_jerk: float = 8.0  # m/s^3, jerk-model action bound
    max_steer_rate: float = 1.2  # rad/s, jerk-model steering-rate bound


def action_tables(limits: DynamicsLimits, dynamics: str, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-discrete-action (longitudinal, steering) command values, each (91,).

    classic: (accel m/s^2, steer rad); jerk: (jerk m/s^3, steer rate rad/s). Index = i_long * 13 + i_steer.
    """
    long_max = limits.max_accel if dynamics == "classic" else limits.max_jerk
    steer_max = limits.max_steer if dynamics == "classic" else limits.max_steer_rate
    # symmetric grids with an exact 0 in the middle (index 45 = coast straight)
    lon = (torch.arange(NUM_ACCEL, device=device) - NUM_ACCEL // 2) / (NUM_ACCEL // 2) * long_max  # (7,)
    lat = (torch.arange(NUM_STEER, device=device) - NUM_STEER // 2) / (NUM_STEER // 2) * steer_max  # (13,)
    return lon.repeat_interleave(NUM_STEER), lat.repeat(NUM_ACCEL)  # (91,), (91,)


def decode_actions(
    actions: torch.Tensor, tables: tuple[torch.Tensor, torch.Tensor], limits: DynamicsLimits, dynamics: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(E, A) long indices or (E, A, 2) floats in [-1, 1] -> (longitudinal, steering) commands (E, A)."""
    if actions.dtype in (torch.int64, torch.int32, torch.int16, torch.uint8):
        idx = actions.long().clamp(0, NUM_DISCRETE - 1)  # (E, A)
        return tables[0][idx], tables[1][idx]
    a = actions.clamp(-1.0, 1.0)  # (E, A, 2)
    long_max = limits.max_accel if dynamics == "classic" else limits.max_jerk
    steer_max = limits.max_steer if dynamics == "classic" else limits.max_steer_rate
    return a[..., 0] * long_max, a[..., 1] * steer_max


def bicycle_step(
    x: torch.Tensor, y: torch.Tensor, heading: torch.Tensor, speed: torch.Tensor,
    accel: torch.Tensor, steer: torch.Tensor, length: torch.Tensor, dt: float, max_speed: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One exact tick of the kinematic bicycle. All inputs (...); returns new (x, y, heading, speed)."""
    new_speed = (speed + accel * dt).clamp(0.0, max_speed)
    dist = 0.5 * (speed + new_speed) * dt  # distance covered (exact for constant accel)
    beta = torch.atan(0.5 * torch.tan(steer))  # slip angle at the centre
    curvature = torch.cos(beta) * torch.tan(steer) / length.clamp_min(0.5)
    dtheta = dist * curvature  # heading change over the tick
    phi = heading + beta  # direction of travel of the centre
    small = dtheta.abs() < 1e-6
    safe = torch.where(small, torch.ones_like(dtheta), dtheta)
    # chord of the arc: sin/cos differences over dtheta, with the straight-line limit for tiny turns
    fx = torch.where(small, torch.cos(phi + 0.5 * dtheta), (torch.sin(phi + dtheta) - torch.sin(phi)) / safe)
    fy = torch.where(small, torch.sin(phi + 0.5 * dtheta), (torch.cos(phi) - torch.cos(phi + dtheta)) / safe)
    new_heading = wrap_angle(heading + dtheta)
    return x + dist * fx, y + dist * fy, new_heading, new_speed


def jerk_step(
    x: torch.Tensor, y: torch.Tensor, heading: torch.Tensor, speed: torch.Tensor,
    accel: torch.Tensor, steer: torch.Tensor, jerk: torch.Tensor, steer_rate: torch.Tensor,
    length: torch.Tensor, dt: float, limits: DynamicsLimits,
) -> tuple[torch.Tensor, ...]:
    """Jerk-limited tick: accel += jerk dt, steer += rate dt (clamped), then a bicycle tick.

    Returns (x, y, heading, speed, accel, steer)."""
    new_accel = (accel + jerk * dt).clamp(-limits.max_accel, limits.max_accel)
    new_steer = (steer + steer_rate * dt).clamp(-limits.max_steer, limits.max_steer)
    x, y, heading, speed = bicycle_step(x, y, heading, speed, new_accel, new_steer, length, dt, limits.max_speed)
    return x, y, heading, speed, new_accel, new_steer


def wrap_angle(a: torch.Tensor) -> torch.Tensor:
    """Wrap radians to [-pi, pi)."""
    return torch.remainder(a + torch.pi, 2 * torch.pi) - torch.pi
