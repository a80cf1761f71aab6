"""Task-inference head: a linear read-out of the core's hidden state that predicts the hidden task (the true exit
of a hidden-exit episode). It is a training target only (`PPOConfig.aux_task_coef`): its output never feeds the
actor, the critic or the memory, and the label it is trained on never enters a policy input.

With 0 classes the head has no parameters and does nothing (checkpoints without it load unchanged).
"""

from __future__ import annotations

import torch
from torch import nn


class TaskHead(nn.Module):
    """`read(h (..., d))` keeps `logits` (..., classes) of the latest forward (None when disabled)."""

    def __init__(self, d: int, classes: int = 0):
        super().__init__()
        if classes < 0 or classes == 1:
            raise ValueError(f"task_classes={classes}: expected 0 (no head) or >= 2 (the number of hidden tasks)")
        self.classes = classes
        self.linear = nn.Linear(d, classes) if classes else None
        self.logits: torch.Tensor | None = None

    def read(self, h: torch.Tensor) -> None:
        self.logits = self.linear(h) if self.linear is not None else None
