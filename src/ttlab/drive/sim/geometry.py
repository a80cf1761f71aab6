"""Pure geometry on batched tensors: oriented boxes, separating axes, segment distances, ego frames.

A box is (cx, cy, heading, length, width); every function broadcasts over leading dims.
"""

from __future__ import annotations

import torch


def box_corners(cx: torch.Tensor, cy: torch.Tensor, heading: torch.Tensor, length: torch.Tensor,
                width: torch.Tensor) -> torch.Tensor:
    """Corners (..., 4, 2) counter-clockwise from front-left."""
    c, s = torch.cos(heading), torch.sin(heading)
    hl, hw = 0.5 * length, 0.5 * width
    sx = torch.tensor([1.0, -1.0, -1.0, 1.0], device=cx.device)  # (4,)
    sy = torch.tensor([1.0, 1.0, -1.0, -1.0], device=cx.device)  # (4,)
    lx = sx * hl.unsqueeze(-1)  # (..., 4)
    ly = sy * hw.unsqueeze(-1)  # (..., 4)
    px = cx.unsqueeze(-1) + lx * c.unsqueeze(-1) - ly * s.unsqueeze(-1)
    py = cy.unsqueeze(-1) + lx * s.unsqueeze(-1) + ly * c.unsqueeze(-1)
    return torch.stack([px, py], dim=-1)  # (..., 4, 2)


def _half_extent(cos_rel: torch.Tensor, sin_rel: torch.Tensor, hl: torch.Tensor, hw: torch.Tensor) -> torch.Tensor:
    """Half-length of a box's projection onto an axis at relative angle (cos, sin) to the box."""
    return hl * cos_rel.abs() + hw * sin_rel.abs()


def boxes_overlap(
    x1: torch.Tensor, y1: torch.Tensor, h1: torch.Tensor, l1: torch.Tensor, w1: torch.Tensor,
    x2: torch.Tensor, y2: torch.Tensor, h2: torch.Tensor, l2: torch.Tensor, w2: torch.Tensor,
) -> torch.Tensor:
    """Oriented-box intersection by the separating axis theorem (4 axes: both boxes' own axes).

    Touching boxes (zero-gap) count as overlapping. Returns a bool tensor of the broadcast shape."""
    dx, dy = x2 - x1, y2 - y1
    c1, s1, c2, s2 = torch.cos(h1), torch.sin(h1), torch.cos(h2), torch.sin(h2)
    cd = c1 * c2 + s1 * s2  # cos(h2 - h1)
    sd = s2 * c1 - c2 * s1  # sin(h2 - h1)
    hl1, hw1, hl2, hw2 = 0.5 * l1, 0.5 * w1, 0.5 * l2, 0.5 * w2
    # axes of box 1: u1 = (c1, s1), v1 = (-s1, c1); box 2 seen at relative angle d
    sep = (dx * c1 + dy * s1).abs() > hl1 + _half_extent(cd, sd, hl2, hw2)
    sep = sep | ((-dx * s1 + dy * c1).abs() > hw1 + _half_extent(sd, cd, hl2, hw2))
    # axes of box 2: box 1 seen at relative angle -d
    sep = sep | ((dx * c2 + dy * s2).abs() > hl2 + _half_extent(cd, sd, hl1, hw1))
    sep = sep | ((-dx * s2 + dy * c2).abs() > hw2 + _half_extent(sd, cd, hl1, hw1))
    return ~sep


def box_segment_overlap(
    cx: torch.Tensor, cy: torch.Tensor, heading: torch.Tensor, length: torch.Tensor, width: torch.Tensor,
    seg: torch.Tensor,
) -> torch.Tensor:
    """Whether a box and a segment (..., 4) = x0, y0, x1, y1 intersect (SAT with 3 axes).

    A road-edge segment that touches or crosses the box boundary (or lies inside it) is an offroad event."""
    c, s = torch.cos(heading), torch.sin(heading)
    hl, hw = 0.5 * length, 0.5 * width
    # segment endpoints in the box frame
    ax, ay = seg[..., 0] - cx, seg[..., 1] - cy
    bx, by = seg[..., 2] - cx, seg[..., 3] - cy
    pax, pay = ax * c + ay * s, -ax * s + ay * c
    pbx, pby = bx * c + by * s, -bx * s + by * c
    sep = torch.minimum(pax, pbx) > hl
    sep = sep | (torch.maximum(pax, pbx) < -hl)
    sep = sep | (torch.minimum(pay, pby) > hw)
    sep = sep | (torch.maximum(pay, pby) < -hw)
    # segment normal axis
    nx, ny = -(pby - pay), pbx - pax
    d = pax * nx + pay * ny  # both endpoints project to d
    r = hl * nx.abs() + hw * ny.abs()
    sep = sep | (d.abs() > r)
    return ~sep


def point_segment_distance(px: torch.Tensor, py: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    """Euclidean distance from points to segments (..., 4); degenerate segments are points."""
    ax, ay, bx, by = seg.unbind(-1)
    ex, ey = bx - ax, by - ay
    den = (ex * ex + ey * ey).clamp_min(1e-12)
    t = (((px - ax) * ex + (py - ay) * ey) / den).clamp(0.0, 1.0)
    qx, qy = ax + t * ex - px, ay + t * ey - py
    return torch.sqrt(qx * qx + qy * qy)


def to_ego(dx: torch.Tensor, dy: torch.Tensor, cos_h: torch.Tensor, sin_h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate world-frame offsets into the ego frame (x forward, y left)."""
    return dx * cos_h + dy * sin_h, -dx * sin_h + dy * cos_h
