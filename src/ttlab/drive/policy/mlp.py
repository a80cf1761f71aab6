"""Memoryless policy: encoder -> MLP -> actor / critic heads. The baseline that cannot adapt."""

from __future__ import annotations

import torch
from torch import nn

from ttlab.drive.policy.dist import head_size
from ttlab.drive.policy.encoders import ObsEncoder, ObsLayout
from ttlab.drive.policy.task_head import TaskHead


class MLPPolicy(nn.Module):
    """`forward_eval(obs (N, D), state)` and `forward(obs (B, T, D), ...)`; the state is always None."""

    context_len = 0
    memoryless = True

    def __init__(self, layout: ObsLayout, num_actions: int, continuous: bool = False, embed: int = 64,
                 hidden: int = 128, task_classes: int = 0, partner_encoder: str = "linear"):
        super().__init__()
        self.num_actions, self.continuous = num_actions, continuous
        self.encoder = ObsEncoder(layout, embed, hidden, partner_encoder)
        self.core = nn.Sequential(nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.actor = nn.Linear(hidden, head_size(num_actions, continuous))
        self.critic = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.actor.weight, 0.01)
        nn.init.zeros_(self.actor.bias)
        self.task_head = TaskHead(hidden, task_classes)

    def initial_state(self, n: int, device: torch.device | str = "cpu") -> None:
        return None

    def _heads(self, obs: torch.Tensor, needed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.core(self.encoder(obs, needed))  # (..., hidden)
        self.task_head.read(h)
        return self.actor(h), self.critic(h).squeeze(-1)

    def forward_eval(self, obs: torch.Tensor, state=None, terminals: torch.Tensor | None = None,
                     removed: torch.Tensor | None = None, active: torch.Tensor | None = None):
        """`active` (N,) bool: encode only these agents (CPU); the others' outputs are unspecified."""
        logits, value = self._heads(obs, active)  # (N, P), (N,)
        return logits, value, None

    def forward(self, obs: torch.Tensor, terminals: torch.Tensor, removed: torch.Tensor, state=None, pos0=None,
                needed: torch.Tensor | None = None):
        logits, values = self._heads(obs, needed)  # (B, T, P), (B, T)
        return logits, values, None
