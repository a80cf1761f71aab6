"""The codec interface (and the identity codec); `codecs/load.py` picks a codec from a spec string.

A codec maps images (B, 3, H, W) in [-1, 1] to latents (B, C', h, w) and back. `encode` returns latents
already multiplied by `scale` (so they have roughly unit variance, as a diffusion model wants) and
`decode` divides by it, so callers never touch `scale` themselves; it is exposed for bookkeeping.
"""

from __future__ import annotations

import torch
from torch import nn


class Codec(nn.Module):
    """encode (B, 3, H, W) [-1, 1] -> scaled latents (B, C', H / downsample, W / downsample); decode back."""

    scale: float = 1.0
    latent_channels: int = 3
    downsample: int = 1
    name: str = "codec"

    def encode(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def decode(self, z: torch.Tensor) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def latent_shape(self, height: int, width: int) -> tuple[int, int, int]:
        return (self.latent_channels, height // self.downsample, width // self.downsample)


class PixelCodec(Codec):
    """Identity: the model works on pixels directly."""

    name = "pixel"

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return z
