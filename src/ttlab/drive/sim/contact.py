"""Per-step contact tests: vehicle-vehicle collisions and offroad, one pure function over the batch.

Collisions test each agent's oriented box (SAT) against its few nearest visible others only; offroad
tests the box against the road-edge candidates of its grid cell. Kept pure so `torch.compile` can
fuse it whole (EnvConfig.compile).
"""

from __future__ import annotations

import torch

from ttlab.drive.sim.geometry import box_segment_overlap, boxes_overlap
from ttlab.drive.sim.grid import RoadGrid, segment_endpoints
from ttlab.drive.sim.observe import nearest_partners

COLLISION_RADIUS = 12.0  # m: centres further apart than this cannot touch (two 5.5 m x 2.5 m cars)


def contacts(grid: RoadGrid, scene: torch.Tensor, x: torch.Tensor, y: torch.Tensor, heading: torch.Tensor,
             length: torch.Tensor, width: torch.Tensor, visible: torch.Tensor, *,
             candidates: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x, y, heading, length, width, visible (E, A); scene (E,) -> collided, offroad (E, A) bool
    (both False for invisible slots)."""
    cidx, cok = nearest_partners(x, y, visible, candidates, COLLISION_RADIUS)  # (E, A, kc)
    E, A, kc = cidx.shape
    box = torch.stack([x, y, heading, length, width], -1)  # (E, A, 5)
    other = torch.gather(box, 1, cidx.reshape(E, A * kc, 1).expand(E, A * kc, 5)).reshape(E, A, kc, 5)
    hit = boxes_overlap(x.unsqueeze(-1), y.unsqueeze(-1), heading.unsqueeze(-1), length.unsqueeze(-1),
                        width.unsqueeze(-1), *other.unbind(-1))  # (E, A, kc)
    collided = (hit & cok).any(-1) & visible
    edge_cand = grid.edge_candidates(scene, x, y)
    erows = grid.seg_table.index_select(0, edge_cand.reshape(-1)).view(*edge_cand.shape, -1)
    eseg = segment_endpoints(erows, grid.pos_scale)  # (E, A, Ke, 4) metres
    offroad = box_segment_overlap(x.unsqueeze(-1), y.unsqueeze(-1), heading.unsqueeze(-1), length.unsqueeze(-1),
                                  width.unsqueeze(-1), eseg).any(-1) & visible
    return collided, offroad
