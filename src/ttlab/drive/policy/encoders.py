"""Observation encoders as PufferDrive users know them.

The flat observation is `[ego (ego_dim) | partners (partner_slots x partner_dim) | road (road_slots x
road_dim)]`. Each part gets its own small MLP:

- ego: Linear -> LayerNorm -> Linear;
- partners: the same MLP on every slot, then a max-pool over slots (all-zero slots are padding and are
  left out of the pool);
- road: the road-type id in column `road_type_col` is replaced by a one-hot over `num_road_types`
  (id 0 = padding, left out of the pool), then MLP and max-pool over slots.

The three embeddings are concatenated and mixed by GELU -> Linear into one `hidden` vector per agent.
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


def _mlp(n_in: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, n_out), nn.LayerNorm(n_out), nn.Linear(n_out, n_out))


def masked_max(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Max over dim -2 of `x` (..., S, H) where `valid` (..., S); rows with no valid slot give 0."""
    neg = torch.finfo(x.dtype).min
    pooled = torch.where(valid.unsqueeze(-1), x, torch.full_like(x, neg)).amax(dim=-2)  # (..., H)
    return torch.where(valid.any(-1, keepdim=True), pooled, torch.zeros_like(pooled))


class ObsEncoder(nn.Module):
    """(..., obs_dim) -> (..., hidden)."""

    def __init__(self, layout: ObsLayout, embed: int = 64, hidden: int = 128):
        super().__init__()
        self.layout = L = ObsLayout.of(layout)
        if not 0 <= L.road_type_col < L.road_dim:
            raise ValueError(f"layout.road_type_col={L.road_type_col} outside road_dim={L.road_dim}")
        self.ego = _mlp(L.ego_dim, embed)
        self.partner = _mlp(L.partner_dim, embed)
        self.road = _mlp(L.road_dim - 1 + L.num_road_types, embed)
        self.mix = nn.Sequential(nn.GELU(), nn.Linear(3 * embed, hidden))
        self.hidden = hidden

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        L = self.layout
        lead = obs.shape[:-1]
        if obs.shape[-1] != L.obs_dim:
            raise ValueError(f"observation has {obs.shape[-1]} features, layout expects {L.obs_dim}")
        obs = obs.reshape(-1, L.obs_dim)  # (N, D)
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
        e = self.ego(ego)  # (N, E)
        p = masked_max(self.partner(partners), partners.abs().sum(-1) > 0)  # (N, E)
        r = masked_max(self.road(road_in), rtype > 0)  # (N, E)
        h = self.mix(torch.cat([e, p, r], dim=-1))  # (N, hidden)
        return h.reshape(*lead, self.hidden)
