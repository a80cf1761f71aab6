"""`ttlab wm encode`: precompute codec latents of a dataset to disk (`latents.encode_source`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ttlab.common.config import ConfigError, parse_config
from ttlab.common.device import resolve_device
from ttlab.common.flags import at_least
from ttlab.worldmodel.codecs.load import load_codec
from ttlab.worldmodel.data.episodes import drop_bad
from ttlab.worldmodel.data.latents import DTYPES, encode_source
from ttlab.worldmodel.data.sources import open_source


@dataclass
class EncodeConfig:
    """Precompute codec latents of a dataset to disk, for training on latents (`--format latents`)."""

    data: Path = Path("runs/data/pusht64")
    """dataset directory (DINO-WM, LeRobot or CSGO)"""
    format: str = "auto"
    """dataset format: auto, dino_wm, lerobot, csgo"""
    codec: str = ""
    """codec: an in-project codec checkpoint (`ttlab wm train-codec`), a diffusers AutoencoderKL directory, or pixel"""
    out: Path = Path("runs/data/pusht_latents")
    """output directory of the latent dataset"""
    batch_size: int = 64
    """frames per codec call"""
    dtype: str = "float16"
    """storage dtype of the latents: float16 or float32"""
    size: int = 0
    """resize frames to size x size before encoding (0 keeps them; NanoWM needs square frames)"""
    device: str = "auto"
    """auto, cpu or cuda"""
    skip_bad: bool = False
    """skip bad episodes (and report how many) instead of stopping at the first"""
    overwrite: bool = False
    """replace an existing latent dataset at --out"""


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(EncodeConfig, argv=argv, prog="ttlab wm encode")

    if not cfg.codec:
        raise ConfigError("--codec is required (a codec checkpoint, a diffusers VAE directory, or pixel)")
    if cfg.dtype not in DTYPES:
        raise ConfigError(f"--dtype must be one of {DTYPES}, got {cfg.dtype!r}")
    at_least(cfg, ("batch_size",), 1)  # 0 looped forever
    at_least(cfg, ("size",), 0)  # a negative size was written into the dataset's header
    src = open_source(cfg.data, cfg.format)
    skipped: list[str] = []
    if cfg.skip_bad:
        src, skipped = drop_bad(src, skip_bad=True)
    codec = load_codec(cfg.codec, resolve_device(cfg.device)).requires_grad_(False).eval()
    out = encode_source(src, codec, cfg.out, cfg.codec, cfg.batch_size, cfg.dtype, cfg.size,
                        overwrite=cfg.overwrite)
    out["skipped"] = len(skipped)
    print(json.dumps(out))
    return 0
