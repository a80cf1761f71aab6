"""LSTM policy: encoder -> LSTMCell -> heads.

The hidden state is reset (zeroed) for an agent whose observation starts a new episode (`terminals`),
and frozen while the agent is `removed` (limbo steps never enter the memory). The training `forward`
starts from the state the rollout had at the start of the row (stored per row), so it replays exactly
what the rollout computed. It steps over time in Python (an LSTM with mid-sequence resets has no
fused kernel); the transformer is the fast memory policy.
"""

from __future__ import annotations

import torch
from torch import nn

from ttlab.drive.policy.dist import head_size
from ttlab.drive.policy.encoders import ObsEncoder, ObsLayout
from ttlab.drive.policy.task_head import TaskHead


class LSTMPolicy(nn.Module):
    context_len = 0
    memoryless = False

    def __init__(self, layout: ObsLayout, num_actions: int, continuous: bool = False, embed: int = 64,
                 hidden: int = 128, task_classes: int = 0, partner_encoder: str = "linear"):
        super().__init__()
        self.num_actions, self.continuous, self.hidden = num_actions, continuous, hidden
        self.encoder = ObsEncoder(layout, embed, hidden, partner_encoder)
        self.cell = nn.LSTMCell(hidden, hidden)
        self.actor = nn.Linear(hidden, head_size(num_actions, continuous))
        self.critic = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.actor.weight, 0.01)
        nn.init.zeros_(self.actor.bias)
        self.task_head = TaskHead(hidden, task_classes)

    def initial_state(self, n: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        z = torch.zeros(n, self.hidden, device=device)
        return z, z.clone()

    def _step(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor, terminals: torch.Tensor,
              removed: torch.Tensor):
        keep = (~terminals.bool()).unsqueeze(-1).to(x.dtype)  # (N, 1)
        h, c = h * keep, c * keep
        h2, c2 = self.cell(x, (h, c))  # (N, H)
        out = h2
        frozen = removed.bool().unsqueeze(-1)  # (N, 1)
        return out, torch.where(frozen, h, h2), torch.where(frozen, c, c2)

    def forward_eval(self, obs: torch.Tensor, state, terminals: torch.Tensor, removed: torch.Tensor,
                     active: torch.Tensor | None = None):
        """`active` is accepted for a common signature and ignored (every agent is computed)."""
        h, c = state
        out, h, c = self._step(self.encoder(obs), h, c, terminals, removed)  # (N, H)
        self.task_head.read(out)
        return self.actor(out), self.critic(out).squeeze(-1), (h, c)

    def forward(self, obs: torch.Tensor, terminals: torch.Tensor, removed: torch.Tensor, state=None, pos0=None,
                needed: torch.Tensor | None = None):
        B, T = obs.shape[:2]
        x = self.encoder(obs, needed)  # (B, T, H)
        h, c = state if state is not None else self.initial_state(B, obs.device)
        outs = []
        for t in range(T):
            out, h, c = self._step(x[:, t], h, c, terminals[:, t], removed[:, t])
            outs.append(out)
        o = torch.stack(outs, dim=1)  # (B, T, H)
        self.task_head.read(o)
        return self.actor(o), self.critic(o).squeeze(-1), (h, c)
