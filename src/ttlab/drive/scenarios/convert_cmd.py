"""`ttlab drive convert SRC_DIR OUT_DIR [--workers N] [--skip-bad]`: JSON scenes -> scenario cache."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from ttlab.common.config import parse_config
from ttlab.common.errors import UserError
from ttlab.common.logging import progress
from ttlab.drive.scenarios.cache import convert


@dataclass
class ConvertConfig:
    """Convert a folder of Waymo/GPUDrive-format JSON scenes into a compact cache (npz shards + index.json)."""

    src: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="SRC_DIR")] = Path("data/scenes")
    """Folder holding the *.json scene files."""
    out: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="OUT_DIR")] = Path("data/scenes_cache")
    """Output folder of the cache."""
    workers: int = min(4, os.cpu_count() or 1)
    """Worker processes (1 = convert in this process)."""
    shard_size: int = 64
    """Scenes per shard file."""
    tolerance: float = 0.1
    """Ramer-Douglas-Peucker tolerance (m) for road polylines."""
    skip_bad: bool = False
    """Accept malformed files (reported and skipped, exit 0); without it they still are skipped but exit 1."""
    strict: bool = False
    """Treat as malformed every file that needs a repair (by default the quirks PufferDrive's converter reads,
    such as ragged per-step arrays or missing optional fields, are repaired the same way and each is reported)."""


def main(argv: list[str]) -> int:
    cfg = parse_config(ConvertConfig, None, argv, prog="ttlab drive convert")
    if cfg.workers < 1 or cfg.shard_size < 1:
        raise UserError("--workers and --shard-size must be >= 1")
    if not cfg.src.is_dir():
        raise UserError(f"SRC_DIR {cfg.src}: no such directory")
    n = len(list(cfg.src.glob("*.json")))
    if n == 0:
        raise UserError(f"SRC_DIR {cfg.src}: no *.json scene files")
    t0 = time.perf_counter()
    with progress(n, "convert") as bar:
        index = convert(cfg.src, cfg.out, cfg.workers, cfg.shard_size, cfg.tolerance, on_progress=bar.advance,
                        strict=cfg.strict)
    dt = time.perf_counter() - t0
    bad = index["bad"]
    for name, notes in index.get("repaired", []):
        shown = notes[:5]
        more = f"\n  ... and {len(notes) - len(shown)} more (index.json 'repaired')" if len(notes) > len(shown) else ""
        print(f"scene repaired ({len(notes)} repair(s)): {name}\n  " + "\n  ".join(shown) + more, file=sys.stderr)
    for name, err in bad:
        print(f"bad scene skipped: {err if err.startswith(name) else f'{name}: {err}'}", file=sys.stderr)
    print(f"converted {len(index['scenes'])}/{n} scenes to {cfg.out} in {dt:.1f}s "
          f"({len(index.get('repaired', []))} repaired, {len(bad)} bad file(s) skipped)")
    if bad and not cfg.skip_bad:
        print(f"ttlab drive convert: {len(bad)} malformed file(s); rerun with --skip-bad to accept", file=sys.stderr)
        return 1
    return 0
