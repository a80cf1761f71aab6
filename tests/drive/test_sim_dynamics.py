"""Dynamics against closed forms; geometry (SAT, box vs segment, distances) on hand-checked cases."""

import math

import torch

from ttlab.drive.sim.dynamics import (
    NUM_DISCRETE,
    DynamicsLimits,
    action_tables,
    bicycle_step,
    decode_actions,
    jerk_step,
)
from ttlab.drive.sim.geometry import box_segment_overlap, boxes_overlap, point_segment_distance

T = lambda *v: torch.tensor(v, dtype=torch.float64)  # noqa: E731


def test_bicycle_straight_constant_accel_matches_closed_form():
    x, y, h, v = T(1.0), T(2.0), T(0.3), T(3.0)
    a, dt, n = 1.5, 0.1, 40
    for _ in range(n):
        x, y, h, v = bicycle_step(x, y, h, v, T(a), T(0.0), T(4.5), dt, 30.0)
    t = n * dt
    s = 3.0 * t + 0.5 * a * t * t
    assert abs(float(x) - (1.0 + s * math.cos(0.3))) < 1e-9
    assert abs(float(y) - (2.0 + s * math.sin(0.3))) < 1e-9
    assert abs(float(v) - (3.0 + a * t)) < 1e-9


def test_bicycle_constant_steer_follows_circle():
    L, delta, v0, dt, n = 4.0, 0.3, 5.0, 0.1, 57
    beta = math.atan(0.5 * math.tan(delta))
    R = L / (math.cos(beta) * math.tan(delta))  # radius of the centre's circle
    x, y, h, v = T(0.0), T(0.0), T(0.0), T(v0)
    for _ in range(n):
        x, y, h, v = bicycle_step(x, y, h, v, T(0.0), T(delta), T(L), dt, 30.0)
    phi0, w = beta, v0 / R  # direction of travel and yaw rate
    t = n * dt
    cx, cy = -R * math.sin(phi0), R * math.cos(phi0)  # circle centre
    ex, ey = cx + R * math.sin(phi0 + w * t), cy - R * math.cos(phi0 + w * t)
    assert abs(float(x) - ex) < 1e-9 and abs(float(y) - ey) < 1e-9
    assert abs(math.remainder(float(h) - w * t, 2 * math.pi)) < 1e-9


def test_speed_clamped_no_reverse():
    x, y, h, v = bicycle_step(T(0.0), T(0.0), T(0.0), T(0.1), T(-4.0), T(0.0), T(4.0), 0.1, 30.0)
    assert float(v) == 0.0


def test_jerk_model_matches_discrete_closed_form():
    lim = DynamicsLimits(max_accel=100.0)
    dt, j, n, v0 = 0.1, 2.0, 20, 1.0
    st = (T(0.0), T(0.0), T(0.0), T(v0), T(0.0), T(0.0))
    for _ in range(n):
        st = jerk_step(*st, T(j), T(0.0), T(4.0), dt, lim)
    x, _, _, v, a, _ = st
    assert abs(float(a) - j * dt * n) < 1e-9
    assert abs(float(v) - (v0 + j * dt * dt * n * (n + 1) / 2)) < 1e-9
    # distance: sum of per-tick trapezoids of the speed sequence
    speeds = [v0 + j * dt * dt * k * (k + 1) / 2 for k in range(n + 1)]
    dist = sum(0.5 * (speeds[k] + speeds[k + 1]) * dt for k in range(n))
    assert abs(float(x) - dist) < 1e-9


def test_jerk_model_clamps_accel_and_steer():
    lim = DynamicsLimits()
    st = (T(0.0), T(0.0), T(0.0), T(5.0), T(0.0), T(0.0))
    for _ in range(100):
        st = jerk_step(*st, T(lim.max_jerk), T(lim.max_steer_rate), T(4.0), 0.1, lim)
    assert abs(float(st[4]) - lim.max_accel) < 1e-12 and abs(float(st[5]) - lim.max_steer) < 1e-12


def test_discrete_action_table_is_7_by_13():
    lim = DynamicsLimits()
    lon, lat = action_tables(lim, "classic", torch.device("cpu"))
    assert lon.shape == (NUM_DISCRETE,) == (91,)
    a, s = decode_actions(torch.tensor([[0, 6, 45, 90]]), (lon, lat), lim, "classic")
    assert a.tolist()[0] == [-4.0, -4.0, 0.0, 4.0]
    assert abs(s[0, 2]) < 1e-7 and abs(s[0, 0] + lim.max_steer) < 1e-7 and abs(s[0, 3] - lim.max_steer) < 1e-7
    a, s = decode_actions(torch.tensor([[[0.5, -1.0]]]), (lon, lat), lim, "classic")
    assert float(a) == 2.0 and abs(float(s) + lim.max_steer) < 1e-7


def test_sat_boxes():
    z = T(0.0)
    # side by side with a 0.1 m gap: separate; overlapping by 0.1 m: hit
    assert not boxes_overlap(z, z, z, T(4.0), T(2.0), z, T(2.1), z, T(4.0), T(2.0))
    assert boxes_overlap(z, z, z, T(4.0), T(2.0), z, T(1.9), z, T(4.0), T(2.0))
    # a 45-degree box near the corner: axis-aligned bounds overlap, SAT separates
    r = math.sqrt(2)
    assert not boxes_overlap(z, z, z, T(2.0), T(2.0), T(1.0 + r / 2 + 0.05), T(1.0 + r / 2 + 0.05), T(math.pi / 4),
                             T(2.0), T(0.0001))
    # rotated box crossing the first one's front
    assert boxes_overlap(z, z, z, T(4.0), T(2.0), T(2.5), z, T(math.pi / 2), T(4.0), T(2.0))
    assert not boxes_overlap(z, z, z, T(4.0), T(2.0), T(3.1), z, T(math.pi / 2), T(4.0), T(2.0))


def test_box_segment_offroad_cases():
    z = T(0.0)
    box = (z, z, z, T(4.0), T(2.0))
    assert box_segment_overlap(*box, T(-5.0, 0.5, 5.0, 0.5))  # crosses the box
    assert not box_segment_overlap(*box, T(-5.0, 1.2, 5.0, 1.2))  # parallel, outside
    assert box_segment_overlap(*box, T(-0.5, 0.0, 0.5, 0.0))  # fully inside
    assert box_segment_overlap(*box, T(1.5, 2.0, 2.5, -2.0))  # crosses the front edge
    assert not box_segment_overlap(*box, T(2.2, 3.0, 3.0, -3.0))  # in front, clear
    # rotated box (90 deg) now spans y in [-2, 2]: a line at y = 1.5 crosses it
    assert box_segment_overlap(z, z, T(math.pi / 2), T(4.0), T(2.0), T(-5.0, 1.5, 5.0, 1.5))


def test_point_segment_distance_golden():
    seg = T(0.0, 0.0, 10.0, 0.0)
    assert float(point_segment_distance(T(5.0), T(3.0), seg)) == 3.0
    assert float(point_segment_distance(T(13.0), T(4.0), seg)) == 5.0
    assert float(point_segment_distance(T(-3.0), T(-4.0), seg)) == 5.0
