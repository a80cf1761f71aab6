"""Spatial grid over each scene's road: per-cell candidate segment lists, computed once per pool.

A step never measures agents against every segment of a map. Each scene is cut into square cells of
`cell` metres; each cell stores (a) up to `road_slots` segments lying within `radius + half cell
diagonal` of its centre, nearest first, so every segment within `radius` of any point of the cell is
a candidate when the list is not full, and (b) up to `edge_slots` road-edge segments close enough to
touch a vehicle standing in the cell (for offroad tests). A step then gathers one list per agent:
cost O(agents x road_slots), independent of map size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ttlab.drive.scenarios.types import ROAD_TYPE_ID, ScenarioPool
from ttlab.drive.sim.geometry import point_segment_distance

FAR = 1.0e6  # padding segment location: never within any radius
SEG_FEAT_DIM = 8  # x0, y0, dir_x, dir_y, length, mid_x, mid_y (positions and length / pos_scale), type_id


@dataclass
class RoadGrid:
    """Per-pool grid tensors (P scenes, S+1 segments with a padding one at index S, G cells)."""

    seg_table: torch.Tensor  # (P * (S + 1), 8) per-segment static features, flat over scenes
    cell_cand: torch.Tensor  # (P, G, Kc) int16/int32 segment ids (S = padding)
    edge_cand: torch.Tensor  # (P, G, Ke) int16/int32 road-edge segment ids (S = padding)
    origin: torch.Tensor  # (P, 2) world position of the grid's lower-left corner
    gx: torch.Tensor  # (P,) long cells along x
    gy: torch.Tensor  # (P,) long cells along y
    cell: float
    num_seg_slots: int  # S + 1
    pos_scale: float  # seg_table positions are world metres / pos_scale

    def cells(self, scene: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Flat cell ids into cell_cand.flatten(0, 1) of agents at (x, y): scene (E,), x/y (E, A) -> (E, A) long."""
        org = self.origin[scene]  # (E, 2)
        gx, gy = self.gx[scene].unsqueeze(1), self.gy[scene].unsqueeze(1)  # (E, 1)
        cx = torch.floor((x - org[:, 0:1]) / self.cell).long().clamp(min=0)
        cy = torch.floor((y - org[:, 1:2]) / self.cell).long().clamp(min=0)
        cx = torch.minimum(cx, gx - 1)
        cy = torch.minimum(cy, gy - 1)
        return scene.unsqueeze(1) * self.cell_cand.shape[1] + cy * gx + cx  # (E, A)

    def road_candidates(self, scene: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Rows of `seg_table` near agents at (x, y): scene (E,), x/y (E, A) -> (E, A, Kc) long."""
        base = (scene * self.num_seg_slots).view(-1, 1, 1)  # (E, 1, 1)
        return self.cell_cand.flatten(0, 1)[self.cells(scene, x, y)].long() + base

    def edge_candidates(self, scene: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Road-edge rows of `seg_table` near agents at (x, y): -> (E, A, Ke) long."""
        base = (scene * self.num_seg_slots).view(-1, 1, 1)
        return self.edge_cand.flatten(0, 1)[self.cells(scene, x, y)].long() + base

    def lookup(self, scene: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both candidate lists: road (E, A, Kc) and edge (E, A, Ke) rows of `seg_table`."""
        return self.road_candidates(scene, x, y), self.edge_candidates(scene, x, y)


def segment_endpoints(rows: torch.Tensor, pos_scale: float) -> torch.Tensor:
    """seg_table rows (..., 8) -> endpoints (..., 4) x0, y0, x1, y1 in metres."""
    a = rows[..., 0:2]
    b = a + rows[..., 2:4] * rows[..., 4:5]
    return torch.cat([a, b], -1) * pos_scale


def build_grid(pool: ScenarioPool, radius: float, cell: float, road_slots: int, edge_slots: int,
               pos_scale: float = 1.0, edge_reach: float = 4.0, margin: float = 10.0) -> RoadGrid:
    """Precompute the per-cell candidate lists of every scene of the pool (runs once, on pool.seg's device)."""
    if cell <= 0:
        raise ValueError(f"grid cell size must be > 0, got {cell}")
    seg_all = pool.seg  # (P, S, 4)
    device = seg_all.device
    P, S = seg_all.shape[0], seg_all.shape[1]
    nseg = pool.num_segments.tolist()
    origins, dims = [], []
    for p in range(P):
        n = max(int(nseg[p]), 1)
        pts = seg_all[p, :n].reshape(-1, 2)  # (2n, 2)
        lo = pts.min(0).values - margin
        hi = pts.max(0).values + margin
        origins.append(lo)
        dims.append((max(1, math.ceil(float(hi[0] - lo[0]) / cell)), max(1, math.ceil(float(hi[1] - lo[1]) / cell))))
    G = max(gx * gy for gx, gy in dims)
    idx_dtype = torch.int16 if S + 1 < 32767 else torch.int32
    cell_cand = torch.full((P, G, road_slots), S, dtype=idx_dtype, device=device)
    edge_cand = torch.full((P, G, edge_slots), S, dtype=idx_dtype, device=device)
    half_diag = cell * math.sqrt(0.5)
    edge_id = ROAD_TYPE_ID["road_edge"]
    for p in range(P):
        n = int(nseg[p])
        if n == 0:
            continue
        gx, gy = dims[p]
        ii = torch.arange(gx * gy, device=device)
        cxy = origins[p] + (torch.stack([ii % gx, ii // gx], 1).float() + 0.5) * cell  # (G_p, 2)
        segs = seg_all[p, :n]  # (n, 4)
        is_edge = pool.seg_type[p, :n] == edge_id  # (n,)
        for start in range(0, gx * gy, 1024):  # chunk cells to bound memory on big maps
            c = cxy[start:start + 1024]  # (g, 2)
            d = point_segment_distance(c[:, 0:1], c[:, 1:2], segs.unsqueeze(0))  # (g, n)
            dr = torch.where(d <= radius + half_diag, d, torch.full_like(d, float("inf")))
            k = min(road_slots, n)
            val, idx = torch.topk(dr, k, dim=1, largest=False)  # (g, k) nearest first
            idx = torch.where(torch.isinf(val), torch.full_like(idx, S), idx)
            cell_cand[p, start:start + c.shape[0], :k] = idx.to(idx_dtype)
            de = torch.where(is_edge.unsqueeze(0) & (d <= half_diag + edge_reach), d, torch.full_like(d, float("inf")))
            k = min(edge_slots, n)
            val, idx = torch.topk(de, k, dim=1, largest=False)
            idx = torch.where(torch.isinf(val), torch.full_like(idx, S), idx)
            edge_cand[p, start:start + c.shape[0], :k] = idx.to(idx_dtype)
    return RoadGrid(
        seg_table=segment_table(pool, pos_scale), pos_scale=float(pos_scale), cell_cand=cell_cand, edge_cand=edge_cand,
        origin=torch.stack(origins).float(), gx=torch.tensor([d[0] for d in dims], device=device),
        gy=torch.tensor([d[1] for d in dims], device=device), cell=float(cell), num_seg_slots=S + 1,
    )


def segment_table(pool: ScenarioPool, pos_scale: float) -> torch.Tensor:
    """(P * (S + 1), 8) static features per segment, positions and lengths divided by `pos_scale`;
    row S of each scene (and every padding segment) is a far-away zero-length segment of type 0."""
    seg = pool.seg.float() / pos_scale  # (P, S, 4)
    P, S = seg.shape[:2]
    ex, ey = seg[..., 2] - seg[..., 0], seg[..., 3] - seg[..., 1]
    ln = torch.sqrt(ex * ex + ey * ey)
    safe = ln.clamp_min(1e-9)
    deg = ln <= 1e-9
    feat = torch.stack([
        seg[..., 0], seg[..., 1], torch.where(deg, torch.ones_like(ex), ex / safe), torch.where(deg, 0 * ey, ey / safe),
        ln, 0.5 * (seg[..., 0] + seg[..., 2]), 0.5 * (seg[..., 1] + seg[..., 3]), pool.seg_type.float(),
    ], dim=-1)  # (P, S, 8)
    pad = torch.tensor([FAR, FAR, 1.0, 0.0, 0.0, FAR, FAR, 0.0], device=seg.device)
    feat = torch.where((pool.seg_type > 0).unsqueeze(-1), feat, pad)
    return torch.cat([feat, pad.expand(P, 1, SEG_FEAT_DIM)], dim=1).reshape(P * (S + 1), SEG_FEAT_DIM)
