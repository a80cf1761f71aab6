"""Exit intent: the route choice of a hidden-exit trial as one sampled action (an option), not a steering habit.

With `EnvConfig.exit_intent` the env's discrete action is a pair (driving action d in 0..D-1, candidate i in
0..M-1) packed as a = i * D + d. The env reads i only at the first tick of each trial (the observation's
"intent open" flag is 1 there), holds it for the trial and shows the chosen candidate as the ego's goal. So the
exit a trial heads for is a single categorical draw that entropy keeps stochastic and PPO credits with the
trial's return, where a per-tick steering policy commits to one side and never samples the other (the
diagnosis in docs/notes/drive-adapt2.md). The true exit is not revealed: the agent picks among the candidates.

`IntentPolicy` wraps any core whose head has D + M outputs and turns them into the joint logits of the env's
D * M actions (see `joint_logits`): the joint distribution factorises into the driving action and the intent,
and on ticks where the intent is not read the intent is pinned to candidate 0 with probability 1, so it adds
nothing to the log-probability, the entropy or the gradient there.
"""

from __future__ import annotations

import torch
from torch import nn

CLOSED = -1.0e4  # logit of the candidates that cannot be drawn on a tick where the intent is not read


def joint_logits(raw: torch.Tensor, open_: torch.Tensor, num_intents: int, floor: float = 0.0) -> torch.Tensor:
    """raw (..., D + M) = [driving logits (D) | intent logits (M)], open_ (...,) bool -> joint logits (..., M * D).

    joint[i * D + d] = raw_d + intent_i, so log_softmax(joint) = log_softmax(driving)_d + log_softmax(intent)_i
    (a product distribution). `floor` mixes the intent with the uniform choice, p = (1 - floor) softmax + floor / M,
    so every candidate keeps probability >= floor / M (the exploration that a 2-way choice with a tiny entropy
    bonus loses within a few updates; the mixture is the distribution that acts and is trained).
    Where `open_` is False the intent logits are (0, CLOSED, ..., CLOSED): candidate 0 with probability 1
    (exp(CLOSED) underflows to 0 in float32), log-probability 0, entropy 0."""
    M = num_intents
    drive, intent = raw[..., :-M], raw[..., -M:]  # (..., D), (..., M)
    if floor > 0:
        intent = torch.log((1 - floor) * torch.softmax(intent.float(), -1) + floor / M).to(intent.dtype)
    pinned = torch.full_like(intent, CLOSED)
    pinned[..., 0] = 0.0
    intent = torch.where(open_.unsqueeze(-1), intent, pinned)
    return (intent.unsqueeze(-1) + drive.unsqueeze(-2)).flatten(-2)  # (..., M * D)


def split_action(action: torch.Tensor, num_drive: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Joint action (...,) long -> (driving action, intent) each (...,)."""
    return action % num_drive, torch.div(action, num_drive, rounding_mode="floor")


class IntentPolicy(nn.Module):
    """A core with D + M head outputs, seen from outside as a policy over the env's D * M joint actions.

    Same entry points as every policy (`forward_eval`, `forward`, `prefill` when the core has it,
    `initial_state`, `context_len`, `memoryless`, `task_head`); `intent_col` is the column of the
    observation's "intent open" flag."""

    def __init__(self, core: nn.Module, num_intents: int, intent_col: int, floor: float = 0.0):
        super().__init__()
        if not 0.0 <= floor < 1.0:
            raise ValueError(f"intent floor must be in [0, 1), got {floor}")
        self.floor = floor
        if getattr(core, "continuous", False):
            raise ValueError("exit intent needs discrete actions (the intent is a categorical choice)")
        self.core = core
        self.num_intents, self.intent_col = num_intents, intent_col
        self.num_drive = core.num_actions - num_intents
        self.num_actions = self.num_drive * num_intents
        self.continuous = False
        self.memoryless = core.memoryless
        self.context_len = core.context_len
        if hasattr(core, "prefill"):
            self.prefill = core.prefill

    @property
    def task_head(self) -> nn.Module:
        return self.core.task_head

    def initial_state(self, n: int, device: torch.device | str = "cpu"):
        return self.core.initial_state(n, device)

    def _joint(self, raw: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        return joint_logits(raw, obs[..., self.intent_col] > 0.5, self.num_intents, self.floor)

    def forward_eval(self, obs: torch.Tensor, state, terminals=None, removed=None, active=None):
        raw, value, state = self.core.forward_eval(obs, state, terminals, removed, active=active)  # (N, D+M)
        return self._joint(raw, obs), value, state

    def forward(self, obs: torch.Tensor, terminals: torch.Tensor, removed: torch.Tensor, state=None, pos0=None,
                **kw):
        raw, values, state = self.core.forward(obs, terminals, removed, state, pos0, **kw)  # (B, T, D+M)
        return self._joint(raw, obs), values, state
