"""Observation encoders as PufferDrive users know them.

The flat observation is `[ego (ego_dim) | partners (partner_slots x partner_dim) | road (road_slots x
road_dim)]`. Each part gets its own small MLP:

- ego: Linear -> LayerNorm -> Linear;
- partners: the same MLP on every slot, then a max-pool over slots (all-zero slots are padding and are
  left out of the pool);
- road: the road-type id in column `road_type_col` is replaced by a one-hot over `num_road_types`
  (id 0 = padding, left out of the pool), then MLP and max-pool over slots.

The three embeddings are concatenated and mixed by GELU -> Linear into one `hidden` vector per agent.

Partner encoder `"mlp"` (`PolicyConfig.partner_encoder`): PufferDrive's slot MLP is linear up to LayerNorm's
scale, so after the max-pool the policy knows, per direction in feature space, the most extreme partner, but
nothing a partner's features say only jointly (is this car, here, at this speed and heading, on a course that
meets mine, given my speed?). The `"mlp"` encoder runs a nonlinear per-slot MLP on [partner row | ego speed]:
Linear -> LayerNorm -> GELU -> Linear -> GELU -> Linear, then the same masked max-pool. Partners are few
(<= 8 slots in the self-play preset), so it runs slot by slot. Partner encoder `"kinematic"` is the same MLP
with four more inputs per slot, computed from the observation (`closest_approach`): the partner's velocity
relative to the ego, and the time and distance of their closest approach if both kept their velocities.

Speed: the slot MLPs are most of a policy's compute (263 slots per agent at the default layout), so the
pools do not run them slot by slot: `fold_slot_mlp` rewrites Linear -> LayerNorm -> Linear exactly as one
small matmul plus a per-slot scale, and `slot_max_pool` takes the max without autograd, then back-propagates
through the argmax slots only. `ObsEncoder.reference` is the plain computation (tested to match, values
and gradients).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import nn


@dataclass(frozen=True)
class ObsLayout:
    """Where each part of the flat observation lives (mirrors the simulator's `env.layout`)."""

    ego_dim: int = 7
    partner_slots: int = 63
    partner_dim: int = 7
    road_slots: int = 200
    road_dim: int = 7
    road_type_col: int = 6
    num_road_types: int = 8

    @property
    def obs_dim(self) -> int:
        return self.ego_dim + self.partner_slots * self.partner_dim + self.road_slots * self.road_dim

    @classmethod
    def of(cls, layout) -> ObsLayout:
        """Copy any object (or dict) with the same attribute names, e.g. the simulator's layout."""
        if isinstance(layout, ObsLayout):
            return layout
        get = layout.get if isinstance(layout, dict) else lambda k: getattr(layout, k)
        return cls(**{f.name: int(get(f.name)) for f in fields(cls)})


PARTNER_ENCODERS = ("linear", "mlp", "kinematic")
EGO_SPEED_COL = 2
"""Column of the ego's own speed in its features (`sim.observe`: goal_x, goal_y, speed, ...)."""
CPA_MAX_T = 4.0
"""Closest-approach times are clipped to [0, CPA_MAX_T] observation time units (POS_SCALE / SPEED_SCALE s)."""


def closest_approach(partners: torch.Tensor, ego_speed: torch.Tensor) -> torch.Tensor:
    """Constant-velocity closest approach of each partner to the ego, in the observation's scaled units.

    partners (N, P, >=5): x, y, cos(rel heading), sin(rel heading), speed (`sim.observe`, ego frame: the ego
    sits at the origin heading +x); ego_speed (N,). Returns (N, P, 4): relative velocity (vx, vy), the time of
    closest approach t* = clip(-(r . v) / |v|^2, 0, CPA_MAX_T) and the distance |r + v t*| then. Positions
    are in POS_SCALE units and speeds in SPEED_SCALE units, so t* is in POS_SCALE / SPEED_SCALE seconds."""
    rx, ry, c, s, sp = (partners[..., i] for i in range(5))  # each (N, P)
    vx = sp * c - ego_speed.unsqueeze(-1)  # (N, P)
    vy = sp * s
    t = (-(rx * vx + ry * vy) / (vx * vx + vy * vy + 1e-6)).clamp(0.0, CPA_MAX_T)  # (N, P)
    d = torch.sqrt((rx + vx * t) ** 2 + (ry + vy * t) ** 2 + 1e-12)
    return torch.stack([vx, vy, t, d], dim=-1)  # (N, P, 4)


def _mlp(n_in: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, n_out), nn.LayerNorm(n_out), nn.Linear(n_out, n_out))


def _deep_mlp(n_in: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, n_out), nn.LayerNorm(n_out), nn.GELU(), nn.Linear(n_out, n_out), nn.GELU(),
                         nn.Linear(n_out, n_out))


def masked_max(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Max over dim -2 of `x` (..., S, H) where `valid` (..., S); rows with no valid slot give 0."""
    neg = torch.finfo(x.dtype).min
    pooled = torch.where(valid.unsqueeze(-1), x, torch.full_like(x, neg)).amax(dim=-2)  # (..., H)
    return torch.where(valid.any(-1, keepdim=True), pooled, torch.zeros_like(pooled))


def fold_slot_mlp(mlp: nn.Sequential) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """Linear(F, E) -> LayerNorm(E) -> Linear(E, E2) rewritten as  y(x) = M x1 / sqrt(x1' Q x1 + eps) + b,  x1 = [x, 1].

    With W1 = [weight | bias] (E, F+1), LayerNorm's centring is linear: h - mean(h) = C x1 where C = W1 minus the
    mean of its rows; so the (biased) variance is x1' (C'C / E) x1 and the second Linear gives
    W2 (gamma * C x1 / std + beta) + b2 = (W2 diag(gamma) C) x1 / std + (W2 beta + b2). The same function, but
    each slot costs F+1 (8 or 15) inputs instead of an (E,) hidden vector. Returns M (E2, F+1), Q (F+1, F+1),
    b (E2,), eps; all differentiable in the module's parameters.
    """
    lin1, ln, lin2 = mlp[0], mlp[1], mlp[2]
    w1 = torch.cat([lin1.weight, lin1.bias.unsqueeze(1)], dim=1)  # (E, F+1)
    c = w1 - w1.mean(dim=0, keepdim=True)  # (E, F+1)
    m = (lin2.weight * ln.weight) @ c  # (E2, F+1)
    q = c.T @ c / c.shape[0]  # (F+1, F+1)
    b = lin2.bias + lin2.weight @ ln.bias  # (E2,)
    return m, q, b, ln.eps


def _drop_padding(x: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Move each row's valid slots to the front and cut the slots no row uses (one host sync: CPU only)."""
    n, s, f = x.shape
    k = max(1, int(valid.sum(dim=1).amax())) if n else s
    if k == s:
        return x, valid
    order = torch.argsort((~valid).to(torch.uint8), dim=1, stable=True)[:, :k]  # (N, k) valid first
    return x.gather(1, order.unsqueeze(-1).expand(n, k, f)), valid.gather(1, order)


def slot_max_pool(mlp: nn.Sequential, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """`masked_max(mlp(x), valid)` for x (N, S, F), valid (N, S) -> (N, E2), without running the MLP per slot.

    The max (and, for autograd, its argmax) is found without autograd in one (N*S, F+2) @ (F+2, E2) matmul over the folded
    MLP (`fold_slot_mlp`), whose extra input column pushes padding slots to -1e30. The gradient of a max
    flows only to the argmax, so the MLP is then re-applied with autograd to just that slot per output
    channel: (N, E2) slot evaluations instead of (N, S) full MLPs forward and backward. (Where two slots tie
    exactly, the gradient goes to one of them instead of being split; the weight gradient is the same.)
    Runs in fp32 under autocast; on CPU, slots that are padding in every row are dropped first.
    """
    with torch.autocast(x.device.type, enabled=False):
        x = x.float()
        if x.device.type == "cpu":
            x, valid = _drop_padding(x, valid)
        n, s, f = x.shape
        m, q, b, eps = fold_slot_mlp(mlp)
        any_valid = valid.any(dim=1, keepdim=True)  # (N, 1)
        grad = torch.is_grad_enabled()
        with torch.no_grad():
            x1 = torch.cat([x, torch.ones_like(x[..., :1])], dim=-1)  # (N, S, F+1)
            inv_std = torch.rsqrt(((x1 @ q) * x1).sum(-1, keepdim=True) + eps)  # (N, S, 1)
            pad = (~valid).unsqueeze(-1).to(x.dtype)  # (N, S, 1)
            xs = torch.cat([x1 * inv_std, pad], dim=-1).reshape(n * s, f + 2)  # (N*S, F+2)
            ms = torch.cat([m, torch.full_like(m[:, :1], -1e30)], dim=1)  # (E2, F+2)
            y = (xs @ ms.T).reshape(n, s, m.shape[0])  # (N, S, E2) slot outputs less b; padding -1e30
            if not grad:  # amax is several times cheaper than max-with-indices on CPU
                top = y.amax(dim=1)  # (N, E2)
                return torch.where(any_valid, top + b, torch.zeros_like(top))
            arg = y.max(dim=1).indices  # (N, E2)
        xa = x.gather(1, arg.unsqueeze(-1).expand(n, arg.shape[1], f))  # (N, E2, F): channel c's argmax slot
        xa1 = torch.cat([xa, torch.ones_like(xa[..., :1])], dim=-1)  # (N, E2, F+1)
        inv_std = torch.rsqrt(((xa1 @ q) * xa1).sum(-1) + eps)  # (N, E2)
        out = (xa1 * m).sum(-1) * inv_std + b  # (N, E2)
        return torch.where(any_valid, out, torch.zeros_like(out))


class ObsEncoder(nn.Module):
    """(..., obs_dim) -> (..., hidden). `forward` pools with `slot_max_pool`; `reference` is the plain
    per-slot MLP + `masked_max` it is tested against."""

    def __init__(self, layout: ObsLayout, embed: int = 64, hidden: int = 128, partner_encoder: str = "linear"):
        super().__init__()
        self.layout = L = ObsLayout.of(layout)
        if not 0 <= L.road_type_col < L.road_dim:
            raise ValueError(f"layout.road_type_col={L.road_type_col} outside road_dim={L.road_dim}")
        if partner_encoder not in PARTNER_ENCODERS:
            raise ValueError(f"--policy.partner_encoder {partner_encoder!r}: expected one of {', '.join(PARTNER_ENCODERS)}")
        if partner_encoder == "kinematic" and L.partner_dim < 5:
            raise ValueError(f"--policy.partner_encoder kinematic reads x, y, cos, sin, speed of each partner row; "
                             f"this layout's rows have {L.partner_dim} features")
        self.partner_encoder = partner_encoder
        self.ego = _mlp(L.ego_dim, embed)
        extra = {"linear": 0, "mlp": 1, "kinematic": 5}[partner_encoder]  # ego speed (+ closest approach)
        self.partner = _mlp(L.partner_dim, embed) if partner_encoder == "linear" else _deep_mlp(L.partner_dim + extra, embed)
        self.road = _mlp(L.road_dim - 1 + L.num_road_types, embed)
        self.mix = nn.Sequential(nn.GELU(), nn.Linear(3 * embed, hidden))
        self.hidden = hidden

    def _split(self, obs: torch.Tensor):
        """Flat (N, obs_dim) -> ego (N, ego_dim), partners (N, P, pd) + valid, road inputs (N, R, rd-1+types) + valid."""
        L = self.layout
        if obs.shape[-1] != L.obs_dim:
            raise ValueError(f"observation has {obs.shape[-1]} features, layout expects {L.obs_dim}")
        n = obs.shape[0]
        p0 = L.ego_dim
        r0 = p0 + L.partner_slots * L.partner_dim
        ego = obs[:, :p0]  # (N, ego_dim)
        partners = obs[:, p0:r0].reshape(n, L.partner_slots, L.partner_dim)  # (N, P, pd)
        road = obs[:, r0:].reshape(n, L.road_slots, L.road_dim)  # (N, R, rd)
        rtype = road[..., L.road_type_col].round().long().clamp(0, L.num_road_types - 1)  # (N, R)
        feats = torch.cat([road[..., :L.road_type_col], road[..., L.road_type_col + 1:]], dim=-1)  # (N, R, rd-1)
        onehot = nn.functional.one_hot(rtype, L.num_road_types).to(obs.dtype)  # (N, R, types)
        road_in = torch.cat([feats, onehot], dim=-1)  # (N, R, rd-1+types)
        return ego, partners, partners.abs().sum(-1) > 0, road_in, rtype > 0

    def _partner_in(self, ego: torch.Tensor, partners: torch.Tensor) -> torch.Tensor:
        """Per-slot input of the partner MLP: (N, P, pd); [row | ego speed] (N, P, pd+1) for the "mlp" encoder;
        [row | ego speed | closest approach] (N, P, pd+5) for "kinematic". Padding slots stay all-zero inputs of
        the pool's mask, whatever these columns hold there."""
        if self.partner_encoder == "linear":
            return partners
        speed = ego[:, EGO_SPEED_COL]  # (N,)
        parts = [partners, speed[:, None, None].expand(-1, partners.shape[1], 1)]
        if self.partner_encoder == "kinematic":
            parts.append(closest_approach(partners, speed))
        return torch.cat(parts, dim=-1)

    def _partners(self, ego: torch.Tensor, partners: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Pooled partner embedding (N, E)."""
        if self.partner_encoder == "linear":
            return slot_max_pool(self.partner, partners, valid)
        if partners.device.type == "cpu":
            partners, valid = _drop_padding(partners, valid)
        return masked_max(self.partner(self._partner_in(ego, partners)), valid)

    def forward(self, obs: torch.Tensor, only: torch.Tensor | None = None) -> torch.Tensor:
        """obs (..., obs_dim) -> (..., hidden). `only` (...) bool: encode just those observations and give
        zeros elsewhere (a data-dependent shape, so a host sync: the learner passes it on CPU only)."""
        if only is not None:
            out = obs.new_zeros(*obs.shape[:-1], self.hidden)  # (..., hidden)
            out[only] = self(obs[only]).to(out.dtype)
            return out
        lead = obs.shape[:-1]
        ego, partners, p_valid, road_in, r_valid = self._split(obs.reshape(-1, obs.shape[-1]))
        e = self.ego(ego)  # (N, E)
        p = self._partners(ego, partners, p_valid).to(e.dtype)  # (N, E)
        r = slot_max_pool(self.road, road_in, r_valid).to(e.dtype)  # (N, E)
        h = self.mix(torch.cat([e, p, r], dim=-1))  # (N, hidden)
        return h.reshape(*lead, self.hidden)

    def reference(self, obs: torch.Tensor) -> torch.Tensor:
        """The same function, one MLP per slot then `masked_max` (slow; for tests)."""
        lead = obs.shape[:-1]
        ego, partners, p_valid, road_in, r_valid = self._split(obs.reshape(-1, obs.shape[-1]))
        e = self.ego(ego)  # (N, E)
        p = masked_max(self.partner(self._partner_in(ego, partners)), p_valid)  # (N, E)
        r = masked_max(self.road(road_in), r_valid)  # (N, E)
        h = self.mix(torch.cat([e, p, r], dim=-1))  # (N, hidden)
        return h.reshape(*lead, self.hidden)
