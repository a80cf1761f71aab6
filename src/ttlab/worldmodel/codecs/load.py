"""Pick a codec from a spec string: `pixel`, an in-project autoencoder checkpoint, or a diffusers VAE directory."""

from __future__ import annotations

from pathlib import Path

import torch

from ttlab.worldmodel.codecs.autoencoder import KLAutoencoder
from ttlab.worldmodel.codecs.base import Codec, PixelCodec
from ttlab.worldmodel.codecs.diffusers_vae import DiffusersVAECodec


def load_codec(spec: str | Path, device: str | torch.device = "cpu") -> Codec:
    """`pixel`; a checkpoint of the in-project autoencoder (`.../codec` stem, `.json` or `.safetensors`);
    or a diffusers AutoencoderKL directory (config.json + diffusion_pytorch_model.safetensors)."""
    s = str(spec)
    if s == "pixel":
        return PixelCodec().to(device)
    p = Path(s)
    if p.is_dir() and (p / "config.json").exists():
        return DiffusersVAECodec.from_dir(p).to(device).eval()
    stem = Path(s.removesuffix(".json").removesuffix(".safetensors"))
    if stem.with_name(stem.name + ".json").exists():
        return KLAutoencoder.load(stem).to(device).eval()
    raise FileNotFoundError(f"codec {s!r}: not 'pixel', not a diffusers AutoencoderKL directory with config.json, "
                            f"and no in-project codec checkpoint {stem}.json")
