"""A full-resolution conv refiner after a patch transformer's output: the U-Net's skip at the top level.

An 8x8 patch token is decoded by one linear layer, so edges that cross patch borders and detail finer than what
the token carries come out blocky or speckled. The refiner sees, per pixel and per frame, the transformer's output,
the noisy input frame (with any conditioning image beside it) and the noise level, and adds a correction through
three 3x3 convolutions. Its last convolution starts at zero, so a model with a refiner starts as the model
without one.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Refiner(nn.Module):
    """`forward(out (B, F, C, H, W), x (B, F, Cx, H, W), t (B, F)) -> correction (B, F, C, H, W)`, with
    `in_channels` = C + Cx (the level adds one channel)."""

    def __init__(self, in_channels: int, out_channels: int, width: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels + 1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.conv3 = nn.Conv2d(width, out_channels, 3, padding=1)

    def init_weights(self) -> None:
        for c in (self.conv1, self.conv2):
            nn.init.kaiming_uniform_(c.weight, nonlinearity="relu")  # SiLU after it, close enough to ReLU's gain
            nn.init.zeros_(c.bias)
        nn.init.zeros_(self.conv3.weight)  # the correction starts at zero
        nn.init.zeros_(self.conv3.bias)

    def forward(self, out: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        B, Fr, C, H, W = out.shape
        dt = self.conv1.weight.dtype
        level = (t.to(dt) / 1000.0)[:, :, None, None, None].expand(B, Fr, 1, H, W)  # (B, F, 1, H, W) in [0, 1)
        z = torch.cat([out.to(dt), x.to(dt), level], dim=2).reshape(B * Fr, -1, H, W)  # (BF, C + Cx + 1, H, W)
        z = z.contiguous(memory_format=torch.channels_last)  # oneDNN's fast layout on CPU (about 2x here)
        z = self.conv3(F.silu(self.conv2(F.silu(self.conv1(z)))))  # (BF, C, H, W)
        return z.reshape(B, Fr, C, H, W).to(out.dtype)
