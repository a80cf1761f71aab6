"""Ego-frame observations: ego features, nearest partners, nearest road segments; flat float32.

obs = [ego (ego_dim) | partners (63 x 7) | road (200 x 7)], zero-padded, all in the ego's frame
(x forward, y left), so a global rotation + translation of a scene leaves every observation unchanged.

ego      : goal_x, goal_y, speed, length, width, collided, offroad, accel, steer
           [+ 3 reward-conditioning weights (goal, collision, offroad)] [+ M x (x, y) hidden-goal candidates]
           [+ priority: this episode's random right-of-way token in [0, 1) (priority mode)]
           [+ last reward, exit flag (+1 true exit / -1 wrong exit reached last tick, else 0): exit feedback]
           [+ intent open (1 at a trial's first tick, where the action also picks the candidate to head for): exit intent]
           (in hidden-goal mode goal_x, goal_y are 0: only the candidates are shown; with exit intent they show the
           candidate the ego picked at the trial's first tick, 0 at that tick)
partner  : x, y, cos(rel heading), sin(rel heading), speed, length, width   (within `partner_radius`)
           [+ accel, steer: the partner's last applied command over its bound, "brake lights and turn signal"
           (partner controls; 0 for a partner replaying its log)] [+ the partner's priority token (priority mode)]
road     : mid_x, mid_y, length, cos(rel dir), sin(rel dir), distance, type id (ROAD_TYPE_ID; 0 = padding)
Positions and lengths are divided by POS_SCALE, speeds by SPEED_SCALE, sizes by SIZE_SCALE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from ttlab.drive.scenarios.types import NUM_ROAD_TYPES
from ttlab.drive.sim.geometry import to_ego
from ttlab.drive.sim.grid import RoadGrid

POS_SCALE = 50.0
SPEED_SCALE = 20.0
SIZE_SCALE = 5.0
EGO_BASE_DIM = 9
EGO_RC_DIM = 3
EGO_FEEDBACK_DIM = 2
EGO_INTENT_DIM = 1
PARTNER_BASE_DIM = 7
PARTNER_CONTROLS_DIM = 2
EGO_PRIORITY_DIM = 1


@dataclass(frozen=True)
class ObsLayout:
    """Where each part of the flat observation lives."""

    ego_dim: int
    partner_slots: int = 63
    partner_dim: int = 7
    road_slots: int = 200
    road_dim: int = 7
    road_type_col: int = 6  # column of the road type id within one road feature row
    num_road_types: int = NUM_ROAD_TYPES  # ids 0 (padding) .. NUM_ROAD_TYPES - 1
    num_goal_candidates: int = 0  # hidden-goal mode: candidates appended to the ego features
    reward_conditioning: bool = False  # 3 weights appended to the ego features
    exit_feedback: bool = False  # last reward and exit flag appended to the ego features
    exit_intent: bool = False  # the "intent open" flag appended last to the ego features

    @property
    def exit_flag_col(self) -> int:
        """Column of the exit flag (the last exit-feedback feature); only with exit_feedback."""
        if not self.exit_feedback:
            raise ValueError("this observation layout has no exit feedback")
        return self.ego_dim - 1 - (EGO_INTENT_DIM if self.exit_intent else 0)

    @property
    def intent_col(self) -> int:
        """Column of the "intent open" flag (the last ego feature); only with exit_intent."""
        if not self.exit_intent:
            raise ValueError("this observation layout has no exit intent")
        return self.ego_dim - 1

    @property
    def partner_offset(self) -> int:
        return self.ego_dim

    @property
    def road_offset(self) -> int:
        return self.ego_dim + self.partner_slots * self.partner_dim

    @property
    def obs_dim(self) -> int:
        return self.road_offset + self.road_slots * self.road_dim

    def split(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(..., obs_dim) -> ego (..., ego_dim), partners (..., 63, 7), road (..., 200, 7)."""
        ego = obs[..., : self.ego_dim]
        par = obs[..., self.partner_offset: self.road_offset].unflatten(-1, (self.partner_slots, self.partner_dim))
        road = obs[..., self.road_offset:].unflatten(-1, (self.road_slots, self.road_dim))
        return ego, par, road


class ObsInputs(NamedTuple):
    """What one observation pass reads of the state: every field (E, A) unless noted; None = not observed."""

    x: torch.Tensor
    y: torch.Tensor
    heading: torch.Tensor
    speed: torch.Tensor
    length: torch.Tensor
    width: torch.Tensor
    goal_x: torch.Tensor  # world position of the goal shown
    goal_y: torch.Tensor
    collided: torch.Tensor  # bool
    offroad: torch.Tensor  # bool
    accel: torch.Tensor  # last applied command
    steer: torch.Tensor
    visible: torch.Tensor  # bool: on the map for the others
    rc_weights: torch.Tensor | None = None  # (E, A, 3) reward-conditioning weights
    candidates: torch.Tensor | None = None  # (E, A, M, 2) hidden-goal candidate exits, world positions
    feedback: torch.Tensor | None = None  # (E, A, 2) last reward, exit flag
    intent_open: torch.Tensor | None = None  # float: 1 where the exit pick is open
    priority: torch.Tensor | None = None  # right-of-way token


@dataclass(frozen=True)
class ObsSettings:
    """The fixed settings of an observation pass (from EnvConfig)."""

    partner_slots: int
    partner_radius: float
    road_slots: int
    road_radius: float
    max_accel: float
    max_steer: float
    hide_goal: bool  # hidden-goal mode: goal_x, goal_y show as 0
    partner_controls: bool = False  # each partner row also shows its last command


def make_layout(partner_slots: int, road_slots: int, reward_conditioning: bool, num_goal_candidates: int,
                exit_feedback: bool = False, exit_intent: bool = False, partner_controls: bool = False,
                priority: bool = False) -> ObsLayout:
    ego_dim = (EGO_BASE_DIM + (EGO_RC_DIM if reward_conditioning else 0) + 2 * num_goal_candidates
               + (EGO_PRIORITY_DIM if priority else 0)
               + (EGO_FEEDBACK_DIM if exit_feedback else 0) + (EGO_INTENT_DIM if exit_intent else 0))
    return ObsLayout(ego_dim=ego_dim, partner_slots=partner_slots, road_slots=road_slots,
                     num_goal_candidates=num_goal_candidates, reward_conditioning=reward_conditioning,
                     exit_feedback=exit_feedback, exit_intent=exit_intent,
                     partner_dim=PARTNER_BASE_DIM + (PARTNER_CONTROLS_DIM if partner_controls else 0)
                     + (EGO_PRIORITY_DIM if priority else 0))


def nearest_partners(x: torch.Tensor, y: torch.Tensor, visible: torch.Tensor, k: int, radius: float,
                     nearest_first: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The k nearest visible others of each agent within `radius`, nearest first.

    With nearest_first=False and k >= A - 1 every other agent is returned in slot order (no ranking).

    x, y (E, A), visible (E, A) bool -> idx (E, A, k) long, ok (E, A, k) bool. Cost O(E A^2)."""
    A = x.shape[1]
    dx = x.unsqueeze(1) - x.unsqueeze(2)  # (E, A, A) other j minus self i
    dy = y.unsqueeze(1) - y.unsqueeze(2)
    d2 = dx * dx + dy * dy
    eye = torch.eye(A, dtype=torch.bool, device=x.device)
    bad = eye | ~visible.unsqueeze(1) | (d2 > radius * radius)  # (E, A, A)
    d2 = d2.masked_fill(bad, float("inf"))
    k = min(k, A - 1) if A > 1 else 0
    if k == 0:
        z = torch.zeros(*x.shape, 0, dtype=torch.long, device=x.device)
        return z, z.bool()
    if k == A - 1 and not nearest_first:  # every other agent fits: all of them in slot order, no ranking
        j = torch.arange(A - 1, device=x.device)
        idx = (j.unsqueeze(0) + (j.unsqueeze(0) >= torch.arange(A, device=x.device).unsqueeze(1))).long()  # (A, A-1)
        idx = idx.expand(x.shape[0], A, A - 1)
        return idx, ~torch.gather(bad, 2, idx)
    val, idx = torch.topk(d2, k, dim=2, largest=False)  # (E, A, k)
    return idx, torch.isfinite(val)


def partner_features(x, y, cos_h, sin_h, heading, speed, length, width, idx, ok, slots: int,
                     extra: list[torch.Tensor] | None = None) -> torch.Tensor:
    """The selected partners' features in each ego's frame, (E, A, slots, 7 + len(extra)): `extra` are per-agent
    columns (E, A) copied as they are (partner controls, priority); 0 where not ok or padding."""
    E, A, k = idx.shape
    flat = idx.reshape(E, A * k)  # (E, A*k)
    cols = [x, y, heading, speed, length, width] + list(extra or [])
    table = torch.stack(cols, dim=-1)  # (E, A, 6 + len(extra))
    nc = table.shape[-1]
    p = torch.gather(table, 1, flat.unsqueeze(-1).expand(E, A * k, nc)).reshape(E, A, k, nc)
    c, s = cos_h.unsqueeze(-1), sin_h.unsqueeze(-1)
    rx, ry = to_ego(p[..., 0] - x.unsqueeze(-1), p[..., 1] - y.unsqueeze(-1), c, s)
    dh = p[..., 2] - heading.unsqueeze(-1)
    feat = torch.stack([
        rx * (1 / POS_SCALE), ry * (1 / POS_SCALE), torch.cos(dh), torch.sin(dh),
        p[..., 3] * (1 / SPEED_SCALE), p[..., 4] * (1 / SIZE_SCALE), p[..., 5] * (1 / SIZE_SCALE),
    ] + [p[..., q] for q in range(6, nc)], dim=-1)  # (E, A, k, 7 + len(extra))
    feat = torch.where(ok.unsqueeze(-1), feat, feat.new_zeros(()))
    if k < slots:
        feat = torch.nn.functional.pad(feat, (0, 0, 0, slots - k))
    return feat  # (E, A, slots, 7 + len(extra))


def partner_extra(inp: ObsInputs, cfg: ObsSettings) -> list[torch.Tensor]:
    """The per-agent columns each partner row carries after its 7 base features, each (E, A)."""
    out = [inp.accel / cfg.max_accel, inp.steer / cfg.max_steer] if cfg.partner_controls else []
    return out + ([inp.priority] if inp.priority is not None else [])


def road_features(seg_table: torch.Tensor, cand: torch.Tensor, xs: torch.Tensor, ys: torch.Tensor,
                  cos_h: torch.Tensor, sin_h: torch.Tensor, radius: float, slots: int) -> torch.Tensor:
    """Candidate road segments within `radius` in each ego's frame, (E, A, slots, 7).

    seg_table (rows, 8) of a RoadGrid; cand (E, A, Kc) rows of it; xs, ys (E, A) agent positions already
    divided by the table's pos_scale, and `radius` likewise. When Kc > slots the `slots` nearest are
    kept. Rows outside the radius are 0."""
    E, A, Kc = cand.shape
    seg = seg_table.index_select(0, cand.reshape(-1)).view(E, A, Kc, 8)  # (E, A, Kc, 8)
    xe, ye = xs.unsqueeze(-1), ys.unsqueeze(-1)  # (E, A, 1)
    dx, dy = seg[..., 0] - xe, seg[..., 1] - ye  # from the ego to the segment start
    ux, uy, ln = seg[..., 2], seg[..., 3], seg[..., 4]
    t = torch.minimum((-(dx * ux + dy * uy)).clamp(min=0.0), ln)  # closest point along
    qx, qy = dx + t * ux, dy + t * uy
    dist = torch.sqrt(qx * qx + qy * qy)  # (E, A, Kc)
    if Kc > slots:
        dist, keep = torch.topk(dist, slots, dim=2, largest=False)
        seg = torch.gather(seg, 2, keep.unsqueeze(-1).expand(E, A, slots, 8))
    k = seg.shape[2]
    c, s = cos_h.unsqueeze(-1), sin_h.unsqueeze(-1)
    mx, my = seg[..., 5] - xe, seg[..., 6] - ye
    dc, ds = to_ego(seg[..., 2], seg[..., 3], c, s)
    feat = torch.stack([mx * c + my * s, my * c - mx * s, seg[..., 4], dc, ds, dist, seg[..., 7]], dim=-1)
    feat = torch.where((dist <= radius).unsqueeze(-1), feat, feat.new_zeros(()))  # (E, A, k, 7)
    if k < slots:
        feat = torch.nn.functional.pad(feat, (0, 0, 0, slots - k))
    return feat


def ego_features(inp: ObsInputs, cos_h: torch.Tensor, sin_h: torch.Tensor, cfg: ObsSettings) -> torch.Tensor:
    """(E, A, ego_dim); cos_h, sin_h (E, A) of each ego's heading."""
    x, y = inp.x, inp.y
    gx, gy = to_ego(inp.goal_x - x, inp.goal_y - y, cos_h, sin_h)
    if cfg.hide_goal:
        gx, gy = torch.zeros_like(gx), torch.zeros_like(gy)
    parts = [torch.stack([
        gx / POS_SCALE, gy / POS_SCALE, inp.speed / SPEED_SCALE, inp.length / SIZE_SCALE, inp.width / SIZE_SCALE,
        inp.collided.float(), inp.offroad.float(), inp.accel / cfg.max_accel, inp.steer / cfg.max_steer,
    ], dim=-1)]  # (E, A, 9)
    if inp.rc_weights is not None:
        parts.append(inp.rc_weights)  # (E, A, 3)
    if inp.candidates is not None:
        cand = inp.candidates  # (E, A, M, 2)
        c, s = cos_h.unsqueeze(-1), sin_h.unsqueeze(-1)
        cx, cy = to_ego(cand[..., 0] - x.unsqueeze(-1), cand[..., 1] - y.unsqueeze(-1), c, s)
        parts.append(torch.stack([cx, cy], -1).flatten(-2) / POS_SCALE)  # (E, A, 2M)
    if inp.priority is not None:
        parts.append(inp.priority.unsqueeze(-1))  # (E, A, 1)
    if inp.feedback is not None:
        parts.append(inp.feedback)  # (E, A, 2) last reward, exit flag
    if inp.intent_open is not None:
        parts.append(inp.intent_open.unsqueeze(-1))  # (E, A, 1)
    return torch.cat(parts, dim=-1)


def observe(grid: RoadGrid, scene: torch.Tensor, inp: ObsInputs, cfg: ObsSettings) -> torch.Tensor:
    """The full flat observation of every agent slot, (E, A, obs_dim) float32; scene (E,).

    One pure function of the state tensors, so `torch.compile` can fuse it whole into a few loops that write
    the output once. Slots are filled whatever their role; the policy reads only its own."""
    x, y, heading = inp.x, inp.y, inp.heading
    E, A = x.shape
    c, s = torch.cos(heading), torch.sin(heading)
    idx, ok = nearest_partners(x, y, inp.visible, cfg.partner_slots, cfg.partner_radius, nearest_first=False)
    par = partner_features(x, y, c, s, heading, inp.speed, inp.length, inp.width, idx, ok, cfg.partner_slots,
                           partner_extra(inp, cfg))  # (E, A, slots, pdim)
    road_cand = grid.road_candidates(scene, x, y)
    inv = 1.0 / grid.pos_scale
    road = road_features(grid.seg_table, road_cand, x * inv, y * inv, c, s, cfg.road_radius * inv,
                         cfg.road_slots)  # (E, A, road_slots, 7)
    ego = ego_features(inp, c, s, cfg)  # (E, A, ego_dim)
    return torch.cat([ego, par.reshape(E, A, -1), road.reshape(E, A, -1)], dim=-1)  # (E, A, obs_dim)
