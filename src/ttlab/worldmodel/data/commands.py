"""`ttlab wm data ...`: make PushT data, describe a dataset, check every episode of one.

A dataset that cannot be opened is a user error (`ttlab wm data <cmd>: error: ...`, exit 2, from the CLI's
error boundary); `check` exits 1 when the dataset opens but some episodes are bad."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ttlab.common.cli import dispatch
from ttlab.common.config import parse_config
from ttlab.worldmodel.data.episodes import drop_bad
from ttlab.worldmodel.data.pusht import PushTConfig, generate_pusht
from ttlab.worldmodel.data.sources import detect_format, open_source


@dataclass
class DatasetConfig:
    """A dataset to inspect."""

    path: Path = Path("runs/data/pusht64")
    """dataset directory"""
    format: str = "auto"
    """dataset format: auto, dino_wm, lerobot, csgo, latents"""


def describe(path: Path, format: str = "auto") -> dict:
    """Format, episode count and lengths, action width and frame shape of a dataset."""

    src = open_source(path, format)
    lengths = np.array([src.length(e) for e in range(len(src))])
    out = {"path": str(path), "format": detect_format(path) if format == "auto" else format,
           "reader": type(src).__name__, "episodes": len(src), "steps": int(lengths.sum()),
           "length_min": int(lengths.min()), "length_mean": float(lengths.mean()), "length_max": int(lengths.max()),
           "action_dim": int(src.action_dim), "is_latent": bool(src.is_latent),
           "frame_shape": list(src.frames(0, [0]).shape[1:])}
    for attr in ("layout", "image_key", "version"):
        if hasattr(src, attr):
            out[attr] = getattr(src, attr)
    return out


def info_main(argv: list[str]) -> int:
    cfg = parse_config(DatasetConfig, argv=argv, prog="ttlab wm data info")
    print(json.dumps(describe(cfg.path, cfg.format), indent=2))
    return 0


def check_main(argv: list[str]) -> int:

    cfg = parse_config(DatasetConfig, argv=argv, prog="ttlab wm data check")
    src = open_source(cfg.path, cfg.format)
    _, errors = drop_bad(src, skip_bad=True, show_progress=None)
    print(json.dumps({"path": str(cfg.path), "episodes": len(src), "bad": len(errors), "errors": errors}, indent=2))
    return 1 if errors else 0


def pusht_main(argv: list[str]) -> int:

    cfg = parse_config(PushTConfig, argv=argv, prog="ttlab wm data pusht")
    out = generate_pusht(cfg.out, cfg.episodes, cfg.resolution, cfg.max_steps, cfg.workers, cfg.seed,
                         crf=cfg.crf, overwrite=cfg.overwrite, pusher=cfg.pusher)
    print(json.dumps(out))
    return 0


COMMANDS: dict = {
    "pusht": (pusht_main, "generate PushT episodes (gym-pusht + scripted pusher) in the DINO-WM layout"),
    "info": (info_main, "describe a dataset: format, episodes, lengths, action width, frame shape"),
    "check": (check_main, "read every episode once and list the bad ones (exit 1 if any)"),
}


def data_main(argv: list[str] | None = None) -> int:
    return dispatch("ttlab wm data", COMMANDS, argv)
