"""Repairs of logged trajectories that no vehicle could have driven (pure functions on one object's log).

Real exports carry two artefacts that upstream simulators read as they are, and that make a log-tracking expert
fail on real scenes while it succeeds on procedural ones:

- *heading spikes*: an exporter that derives heading from the last displacement writes atan2(0, 0) = 0 rad at
  every tick the vehicle did not move (CARLA exports through py123d do: a car driving south at 1 m/s reads
  -1.57, 0, -1.57, -1.57, 0, ...). The box then turns 90 degrees for one tick, across the kerb. A heading
  that turns by more than `MAX_TURN` rad in one tick while the displacement does not confirm it (the vehicle
  moved less than `MIN_MOTION` m, or in another direction) is held at its neighbour's value.
- *teleports*: a displacement of more than `MAX_STEP` m in one tick (a respawned or re-identified actor).
  No dynamics can follow it; the log is cut there (later steps invalid) and the goal moved to the last
  position before the jump.
- *logged overlaps*: two vehicles whose logged boxes, at the simulator's box scale (`BOX_SCALE`, upstream's
  0.7), overlap: the logged drivers drove through each other, so tracking both logs is a collision. The
  log of the later-listed vehicle of the pair is cut at the first overlapping step (PufferDrive's WOSAC mode
  removes such a partner's trajectory whole, `remove_bad_trajectories`).

The loader applies both to vehicles, names each repair, and keeps the list in `Scenario.metadata["repairs"]`.
"""

from __future__ import annotations

import numpy as np

MAX_TURN = 1.0  # rad in one 0.1 s tick (10 rad/s: no car turns that fast)
MIN_MOTION = 0.05  # m: a displacement this long has a direction
MOTION_AGREE = 0.3  # rad: a heading within this of the displacement direction is confirmed
MAX_STEP = 6.0  # m in one tick (60 m/s); a longer displacement is a teleport
BOX_SCALE = 0.7  # the box scale of the simulator's contact tests (EnvConfig.box_scale's default, upstream's)


def wrap(a: np.ndarray) -> np.ndarray:
    """Radians to [-pi, pi)."""
    return (a + np.pi) % (2 * np.pi) - np.pi


def confirmed_headings(pos: np.ndarray, heading: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(T,) bool: valid steps whose heading agrees with the direction of the displacement from the previous valid
    step (the first valid step: to the next one), when that displacement has a direction. (A reversing vehicle's
    headings are never confirmed; they need not be: it never turns by MAX_TURN in one tick.)"""
    idx = np.flatnonzero(valid)
    ok = np.zeros(len(heading), bool)
    if len(idx) < 2:
        return ok
    d = pos[idx[1:]] - pos[idx[:-1]]  # (n-1, 2) displacement into each later step
    moved = np.hypot(d[:, 0], d[:, 1]) >= MIN_MOTION
    direction = np.arctan2(d[:, 1], d[:, 0])
    # step idx[k] (k >= 1) is judged on the displacement into it; idx[0] on the displacement out of it
    judge_dir = np.concatenate([direction[:1], direction])
    judge_moved = np.concatenate([moved[:1], moved])
    err = np.abs(wrap(heading[idx] - judge_dir))
    ok[idx] = judge_moved & (err < MOTION_AGREE)
    return ok


def hold_heading_spikes(pos: np.ndarray, heading: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """(T,) headings with every unconfirmed jump of more than MAX_TURN rad per tick held at its neighbour's value
    (forwards from the first confirmed step, backwards before it); also the steps changed."""
    out = heading.astype(np.float64).copy()
    idx = np.flatnonzero(valid)
    if len(idx) < 2:
        return out.astype(heading.dtype), []
    ok = confirmed_headings(pos, heading, valid)
    first = next((k for k, t in enumerate(idx) if ok[t]), 0)
    for k in range(first + 1, len(idx)):  # forwards: hold the previous heading through a spike
        t, s = idx[k], idx[k - 1]
        if not ok[t] and abs(wrap(out[t] - out[s])) > MAX_TURN:
            out[t] = out[s]
    for k in range(first - 1, -1, -1):  # backwards before the first confirmed heading
        t, s = idx[k], idx[k + 1]
        if not ok[t] and abs(wrap(out[t] - out[s])) > MAX_TURN:
            out[t] = out[s]
    changed = [int(t) for t in idx if out[t] != heading[t]]
    return out.astype(heading.dtype), changed


def first_teleport(pos: np.ndarray, valid: np.ndarray, max_step: float = MAX_STEP) -> int | None:
    """The first valid step reached by a displacement of more than `max_step` m from the previous valid step
    (None without one)."""
    idx = np.flatnonzero(valid)
    if len(idx) < 2:
        return None
    d = np.hypot(*(pos[idx[1:]] - pos[idx[:-1]]).T)  # (n-1,)
    jumps = np.flatnonzero(d > max_step)
    return int(idx[jumps[0] + 1]) if len(jumps) else None


def boxes_overlap_np(x1, y1, h1, l1, w1, x2, y2, h2, l2, w2) -> np.ndarray:
    """Oriented-box intersection by separating axes, broadcast over numpy arrays (touching counts)."""
    dx, dy = x2 - x1, y2 - y1
    c1, s1, c2, s2 = np.cos(h1), np.sin(h1), np.cos(h2), np.sin(h2)
    cd, sd = c1 * c2 + s1 * s2, s2 * c1 - c2 * s1  # cos, sin of h2 - h1
    hl1, hw1, hl2, hw2 = l1 / 2, w1 / 2, l2 / 2, w2 / 2
    sep = np.abs(dx * c1 + dy * s1) > hl1 + hl2 * np.abs(cd) + hw2 * np.abs(sd)
    sep |= np.abs(-dx * s1 + dy * c1) > hw1 + hl2 * np.abs(sd) + hw2 * np.abs(cd)
    sep |= np.abs(dx * c2 + dy * s2) > hl2 + hl1 * np.abs(cd) + hw1 * np.abs(sd)
    sep |= np.abs(-dx * s2 + dy * c2) > hw2 + hl1 * np.abs(sd) + hw1 * np.abs(cd)
    return ~sep


def first_overlap(pos: np.ndarray, heading: np.ndarray, length: np.ndarray, width: np.ndarray, valid: np.ndarray,
                  scale: float = BOX_SCALE) -> tuple[int, int, int] | None:
    """The earliest logged overlap of two of these N objects' boxes (scaled by `scale`) as (step, i, j), i < j
    (ties: lowest pair); None without one. pos (N, T, 2), heading / valid (N, T), length / width (N,)."""
    N = pos.shape[0]
    if N < 2:
        return None
    x, y = pos[..., 0], pos[..., 1]  # (N, T)
    ln, wd = (length * scale)[:, None, None], (width * scale)[:, None, None]  # (N, 1, 1)
    hit = boxes_overlap_np(x[:, None], y[:, None], heading[:, None], ln, wd,
                           x[None], y[None], heading[None], ln.transpose(1, 0, 2), wd.transpose(1, 0, 2))  # (N, N, T)
    hit &= valid[:, None] & valid[None] & np.triu(np.ones((N, N), bool), 1)[..., None]
    if not hit.any():
        return None
    t = int(np.flatnonzero(hit.any((0, 1)))[0])
    i, j = np.argwhere(hit[:, :, t])[0]
    return t, int(i), int(j)
