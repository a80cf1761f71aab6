"""The codec interface and the loader that picks a codec from a spec string.

A codec maps images (B, 3, H, W) in [-1, 1] to latents (B, C', h, w) and back. `encode` returns latents
already multiplied by `scale` (so they have roughly unit variance, as a diffusion model wants) and
`decode` divides by it, so callers never touch `scale` themselves; it is exposed for bookkeeping.
"""

from __future__ import annotations

from pathlib import Path

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


def load_codec(spec: str | Path, device: str | torch.device = "cpu") -> Codec:
    """`pixel`; a checkpoint of the in-project autoencoder (`.../codec` stem, `.json` or `.safetensors`);
    or a diffusers AutoencoderKL directory (config.json + diffusion_pytorch_model.safetensors)."""
    s = str(spec)
    if s == "pixel":
        return PixelCodec().to(device)
    p = Path(s)
    if p.is_dir() and (p / "config.json").exists():
        from ttlab.worldmodel.codecs.diffusers_vae import DiffusersVAECodec

        return DiffusersVAECodec.from_dir(p).to(device).eval()
    stem = Path(s.removesuffix(".json").removesuffix(".safetensors"))
    if stem.with_name(stem.name + ".json").exists():
        from ttlab.worldmodel.codecs.autoencoder import KLAutoencoder

        return KLAutoencoder.load(stem).to(device).eval()
    raise FileNotFoundError(f"codec {s!r}: not 'pixel', not a diffusers AutoencoderKL directory with config.json, "
                            f"and no in-project codec checkpoint {stem}.json")
