"""The rule-based "human" driver that records procedural logs.

Longitudinal: the Intelligent Driver Model (IDM) behind the nearest vehicle in a corridor along the
driver's own route (plus vehicles predicted to cross it first, and the route's end as a stopped
obstacle), with a curve speed limit sqrt(a_lat / curvature). Lateral: pure pursuit of a look-ahead
point on the route. All agents of a scene step together (numpy over agents, a loop over time only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CORRIDOR = 1.7  # m: a vehicle this close to a point of my route is on my route
AHEAD = 40  # metres of route scanned for leaders (every STRIDE m)
STRIDE = 2
PREDICT_S = (0.6, 1.2, 2.0)  # s: crossing vehicles are checked at their positions this far in the future
CROSS_CORRIDOR = 2.3  # m: wider for crossing vehicles (two half widths and a margin)


@dataclass(frozen=True)
class DriverParams:
    """Car-following and path-following parameters of one driving style."""

    speed_scale: float = 1.0  # desired speed = scene speed x this
    max_accel: float = 1.8  # m/s^2 (IDM a)
    comfort_decel: float = 2.5  # m/s^2 (IDM b)
    headway: float = 1.4  # s (IDM T)
    min_gap: float = 2.5  # m (IDM s0)
    lat_accel: float = 2.5  # m/s^2 allowed in curves
    max_decel: float = 8.0  # m/s^2 hard braking limit


STYLES: dict[str, DriverParams] = {
    "normal": DriverParams(),
    "cautious": DriverParams(speed_scale=0.75, max_accel=1.0, comfort_decel=1.8, headway=2.2, min_gap=4.0,
                             lat_accel=1.8),
    "aggressive": DriverParams(speed_scale=1.3, max_accel=3.2, comfort_decel=3.5, headway=0.7, min_gap=1.5,
                               lat_accel=3.5),
}


def idm_accel(v, v_des, gap, dv, p: DriverParams):
    """IDM acceleration: a [1 - (v/v0)^4 - (s*/s)^2], s* = s0 + vT + v dv / (2 sqrt(ab)).

    v, v_des, gap, dv broadcast (gap = bumper-to-bumper distance, dv = v - v_leader)."""
    v_des = np.maximum(v_des, 0.1)
    s_star = p.min_gap + np.maximum(v * p.headway + v * dv / (2.0 * np.sqrt(p.max_accel * p.comfort_decel)), 0.0)
    free = 1.0 - (v / v_des) ** 4
    inter = (s_star / np.maximum(gap, 0.1)) ** 2
    return np.clip(p.max_accel * (free - inter), -p.max_decel, p.max_accel)


def pure_pursuit_curvature(pos, heading, target):
    """Curvature 2 sin(alpha) / L of the arc from `pos` (heading) through `target`. (N, 2), (N,), (N, 2) -> (N,)."""
    d = target - pos
    dist = np.maximum(np.linalg.norm(d, axis=-1), 1e-6)
    alpha = np.arctan2(d[..., 1], d[..., 0]) - heading
    return 2.0 * np.sin(alpha) / dist


def route_curvature(routes: np.ndarray) -> np.ndarray:
    """|curvature| (N, R) of routes sampled every metre, from the turning of consecutive chords."""
    d = np.diff(routes, axis=1)  # (N, R-1, 2)
    h = np.arctan2(d[..., 1], d[..., 0])
    dh = np.abs(np.angle(np.exp(1j * np.diff(h, axis=1))))  # (N, R-2) rad per metre
    k = np.zeros(routes.shape[:2])
    k[:, 1:-1] = dh
    return k


def drive(routes: np.ndarray, route_len: np.ndarray, s0: np.ndarray, v0: np.ndarray, v_des: np.ndarray,
          length: np.ndarray, p: DriverParams, steps: int = 91, dt: float = 0.1):
    """Roll the driver out for `steps` steps.

    routes (N, R, 2) every 1 m (padded by repeating the end), route_len (N,) m, s0 (N,) start arc, v0 (N,)
    start speed, v_des (N,) scene desired speed (scaled by the style), length (N,) vehicle lengths.
    Returns pos (N, T, 2), heading (N, T), vel (N, T, 2) as float32; vel[t] = speed_t (cos h_t, sin h_t).
    """
    N, R, _ = routes.shape
    idx_all = np.arange(N)
    curv = route_curvature(routes)  # (N, R)
    s = s0.astype(np.float64).copy()
    i0 = np.clip(np.round(s).astype(int), 0, R - 2)
    pos = routes[idx_all, i0].astype(np.float64)  # (N, 2)
    d = routes[idx_all, i0 + 1] - routes[idx_all, i0]
    h = np.arctan2(d[:, 1], d[:, 0])
    v = v0.astype(np.float64).copy()
    v_goal = v_des * p.speed_scale
    out_pos = np.zeros((N, steps, 2), np.float32)
    out_h = np.zeros((N, steps), np.float32)
    out_v = np.zeros((N, steps, 2), np.float32)
    ahead = np.arange(0, AHEAD, STRIDE)
    win = np.arange(-2, 5)
    half_len = 0.5 * (length[:, None] + length[None, :])  # (N, N)
    not_self = ~np.eye(N, dtype=bool)
    for t in range(steps):
        out_pos[:, t], out_h[:, t] = pos, h
        out_v[:, t] = (v * np.cos(h))[:, None] * [1, 0] + (v * np.sin(h))[:, None] * [0, 1]
        if t == steps - 1:
            break
        # project onto the route near the previous arc position
        cand = np.clip(np.floor(s).astype(int)[:, None] + win, 0, R - 1)  # (N, W)
        dist = np.linalg.norm(routes[idx_all[:, None], cand] - pos[:, None], axis=-1)
        s = cand[idx_all, dist.argmin(1)].astype(np.float64)
        # lateral: pure pursuit
        look = np.clip(2.5 + 0.35 * v, 3.0, 8.0)
        ti = np.clip(np.round(s + look).astype(int), 0, R - 1)
        kappa = np.clip(pure_pursuit_curvature(pos, h, routes[idx_all, ti]), -0.25, 0.25)
        # longitudinal: curve speed limit + IDM behind leaders on my route
        base = np.clip(np.floor(s).astype(int)[:, None] + ahead, 0, R - 1)  # (N, AHEAD)
        pts = routes[idx_all[:, None], base]  # (N, AHEAD, 2)
        kmax = curv[idx_all[:, None], np.clip(np.floor(s).astype(int)[:, None] + np.arange(25), 0, R - 1)].max(1)
        v_lim = np.minimum(v_goal, np.sqrt(p.lat_accel / np.maximum(kmax, 1e-4)))
        vel = np.stack([v * np.cos(h), v * np.sin(h)], 1)  # (N, 2)
        along = base - s[:, None]  # (N, AHEAD) metres ahead
        c2 = CORRIDOR**2
        dx = pts[:, None, :, 0] - pos[None, :, None, 0]  # (N_i, N_j, A)
        dy = pts[:, None, :, 1] - pos[None, :, None, 1]
        j_d2 = dx * dx + dy * dy
        near = j_d2 < c2  # j is on my route now
        al = along[:, None, :]
        first_j = j_d2 < al * np.abs(al)  # j is closer to that point of my route than I am
        cross = np.zeros_like(near)
        for horizon in PREDICT_S:
            fut = pos + vel * horizon  # (N, 2)
            fx = pts[:, None, :, 0] - fut[None, :, None, 0]
            fy = pts[:, None, :, 1] - fut[None, :, None, 1]
            cross |= fx * fx + fy * fy < CROSS_CORRIDOR**2
        cross &= first_j  # j gets there first
        hit = (near | cross) & not_self[:, :, None] & (along[:, None, :] > -0.5)
        big = 1e6
        first = np.where(hit, along[:, None, :], big).min(2)  # (N_i, N_j) metres to the obstacle
        gap_ij = first - half_len
        v_along = vel @ np.stack([np.cos(h), np.sin(h)], 0)  # (N_j, N_i) j's speed along i's heading
        v_lead = np.where(near.any(2), np.maximum(v_along.T, 0.0), 0.0)  # crossing ones count as stopped
        gap_ij = np.where(first < big, gap_ij, big)
        jlead = gap_ij.argmin(1)
        gap = gap_ij[idx_all, jlead]
        dv = v - v_lead[idx_all, jlead]
        end_gap = route_len - s - 0.5 * length - 1.0  # stop before the end of the route
        use_end = end_gap < gap
        gap = np.where(use_end, end_gap, gap)
        dv = np.where(use_end, v, dv)
        a = idm_accel(v, v_lim, gap, dv, p)
        v_new = np.maximum(v + a * dt, 0.0)
        v_mid = 0.5 * (v + v_new)
        h_mid = h + 0.5 * kappa * v_mid * dt
        pos = pos + (v_mid * dt)[:, None] * np.stack([np.cos(h_mid), np.sin(h_mid)], 1)
        h = h + kappa * v_mid * dt
        v = v_new
        s = s + v_mid * dt
    return out_pos, np.angle(np.exp(1j * out_h)).astype(np.float32), out_v
