"""Polyline helpers shared by the procedural roads and the JSON loader (pure numpy).

A polyline is a float array (K, 2). Curves are cubic Béziers and circle arcs; everything is resampled
by arc length; Ramer-Douglas-Peucker simplifies dense recorded geometry before cutting it into segments.
"""

from __future__ import annotations

import numpy as np


def arc_length(poly: np.ndarray) -> np.ndarray:
    """Cumulative arc length (K,) of a polyline (K, 2), starting at 0."""
    d = np.linalg.norm(np.diff(poly, axis=0), axis=1)  # (K-1,)
    return np.concatenate([[0.0], np.cumsum(d)])


def resample(poly: np.ndarray, spacing: float) -> np.ndarray:
    """Points every `spacing` metres along the polyline, both ends kept. (K, 2) -> (K', 2)."""
    poly = np.asarray(poly, np.float64)
    s = arc_length(poly)
    total = s[-1]
    if total <= 1e-9:
        return poly[:1].copy()
    n = max(int(np.ceil(total / spacing)), 1)
    q = np.linspace(0.0, total, n + 1)
    return np.stack([np.interp(q, s, poly[:, 0]), np.interp(q, s, poly[:, 1])], 1)


def interp_at(poly: np.ndarray, s: np.ndarray | float) -> np.ndarray:
    """Points at arc positions `s` (clipped to the polyline). (K, 2), (...) -> (..., 2)."""
    cs = arc_length(poly)
    s = np.clip(np.asarray(s, np.float64), 0.0, cs[-1])
    return np.stack([np.interp(s, cs, poly[:, 0]), np.interp(s, cs, poly[:, 1])], -1)


def bezier(p0, p1, p2, p3, n: int = 24) -> np.ndarray:
    """Cubic Bézier through control points p0..p3, n+1 samples. -> (n+1, 2)."""
    t = np.linspace(0.0, 1.0, n + 1)[:, None]
    p0, p1, p2, p3 = (np.asarray(p, np.float64) for p in (p0, p1, p2, p3))
    return ((1 - t) ** 3) * p0 + 3 * ((1 - t) ** 2) * t * p1 + 3 * (1 - t) * t**2 * p2 + t**3 * p3


def connector(p0, h0: float, p1, h1: float, n: int = 24) -> np.ndarray:
    """A smooth curve leaving p0 with heading h0 and arriving at p1 with heading h1.

    Control lengths follow the circle-arc rule c = 4/3 tan(phi/4) R (exact for symmetric turns), so a
    90-degree corner becomes a near-circular quarter arc; a straight pair gives a straight line."""
    p0, p1 = np.asarray(p0, np.float64), np.asarray(p1, np.float64)
    chord = float(np.linalg.norm(p1 - p0))
    phi = abs(float(np.angle(np.exp(1j * (h1 - h0)))))
    if phi < 1e-3:
        c = chord / 3.0
    else:
        radius = chord / (2.0 * np.sin(phi / 2.0))
        c = 4.0 / 3.0 * np.tan(phi / 4.0) * radius
    d0 = np.array([np.cos(h0), np.sin(h0)])
    d1 = np.array([np.cos(h1), np.sin(h1)])
    return bezier(p0, p0 + c * d0, p1 - c * d1, p1, n)


def circle_arc(center, radius: float, a0: float, a1: float, step: float = 1.5) -> np.ndarray:
    """Arc from angle a0 to a1 (counter-clockwise when a1 > a0), about `step` metres between samples."""
    n = max(int(np.ceil(abs(a1 - a0) * radius / step)), 2)
    a = np.linspace(a0, a1, n + 1)
    return np.asarray(center, np.float64) + radius * np.stack([np.cos(a), np.sin(a)], 1)


def rdp(poly: np.ndarray, tol: float) -> np.ndarray:
    """Ramer-Douglas-Peucker: keep the fewest points so no dropped point is further than `tol` m away.

    Iterative (explicit stack), O(K log K) typical; ends always kept. (K, 2) -> (K', 2)."""
    poly = np.asarray(poly, np.float64)
    k = len(poly)
    if k <= 2 or tol <= 0:
        return poly
    keep = np.zeros(k, bool)
    keep[0] = keep[-1] = True
    stack = [(0, k - 1)]
    while stack:
        i, j = stack.pop()
        if j <= i + 1:
            continue
        a, b = poly[i], poly[j]
        ab = b - a
        pts = poly[i + 1 : j] - a  # (m, 2)
        den = float(ab @ ab)
        if den < 1e-12:
            dist = np.linalg.norm(pts, axis=1)
        else:
            t = np.clip(pts @ ab / den, 0.0, 1.0)
            dist = np.linalg.norm(pts - t[:, None] * ab, axis=1)
        m = int(np.argmax(dist))
        if dist[m] > tol:
            mid = i + 1 + m
            keep[mid] = True
            stack.append((i, mid))
            stack.append((mid, j))
    return poly[keep]


def to_segments(poly: np.ndarray, max_len: float | None = None) -> np.ndarray:
    """Cut a polyline into straight segments (S, 4) x0, y0, x1, y1; long pieces split to <= max_len.

    A single point gives one zero-length segment (stop signs are points in Waymo files)."""
    poly = np.asarray(poly, np.float64)
    if len(poly) == 1:
        return np.concatenate([poly[0], poly[0]])[None]
    if max_len is not None:
        pieces = [poly[:1]]
        for a, b in zip(poly[:-1], poly[1:], strict=True):
            n = max(int(np.ceil(np.linalg.norm(b - a) / max_len)), 1)
            t = np.linspace(0.0, 1.0, n + 1)[1:, None]
            pieces.append(a + t * (b - a))
        poly = np.concatenate(pieces)
    return np.concatenate([poly[:-1], poly[1:]], 1)


def rotate(points: np.ndarray, angle: float) -> np.ndarray:
    """Rotate (..., 2) points about the origin by `angle` rad."""
    c, s = np.cos(angle), np.sin(angle)
    x, y = points[..., 0], points[..., 1]
    return np.stack([c * x - s * y, s * x + c * y], -1)
