"""diffusers `AutoencoderKL` loaded from a local directory (sd-vae-ft-mse layout), as a `Codec`.

The directory holds `config.json` + `diffusion_pytorch_model.safetensors` (what `save_pretrained`
writes). Latents are the posterior mean times `scale` (the config's `scaling_factor`, 0.18215 for
sd-vae-ft-mse), so encoding is deterministic; `sample=True` draws from the posterior instead.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ttlab.worldmodel.codecs.base import Codec

SD_SCALE = 0.18215


class DiffusersVAECodec(Codec):
    name = "diffusers-vae"

    def __init__(self, vae, scale: float | None = None, sample: bool = False):
        super().__init__()
        self.vae = vae
        cfg = vae.config
        self.scale = float(scale if scale is not None else getattr(cfg, "scaling_factor", None) or SD_SCALE)
        self.latent_channels = int(cfg.latent_channels)
        self.downsample = 2 ** (len(cfg.block_out_channels) - 1)
        self.sample = sample

    @classmethod
    def from_dir(cls, path: str | Path, scale: float | None = None) -> DiffusersVAECodec:
        from diffusers import AutoencoderKL  # deferred on purpose: a heavy optional dependency

        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path}/config.json not found: not a diffusers AutoencoderKL directory")
        weights = [path / "diffusion_pytorch_model.safetensors", path / "diffusion_pytorch_model.bin"]
        if not any(w.exists() for w in weights):
            raise FileNotFoundError(f"{path}: no diffusion_pytorch_model.safetensors (or .bin) weights")
        vae = AutoencoderKL.from_pretrained(str(path), local_files_only=True)
        vae.requires_grad_(False)
        return cls(vae, scale)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        dist = self.vae.encode(x.to(self.vae.dtype)).latent_dist
        z = dist.sample() if self.sample else dist.mean  # (B, C', H/8, W/8)
        return z * self.scale

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.vae.decode((z / self.scale).to(self.vae.dtype)).sample  # (B, 3, H, W)
