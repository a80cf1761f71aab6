"""`ttlab demo`: run each system's demo stage in turn and write `runs/demo/summary.md`.

A system plugs in by providing `ttlab.<system>.demo.run(out_dir: Path, device: str) -> str`, which
does a small end-to-end run and returns a markdown paragraph of what it produced (paths, numbers).
A stage whose module is absent is reported as not built yet; a stage that fails is reported with its
error and the other stages still run.
"""

from __future__ import annotations

import importlib
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from ttlab.common.checkpoint import atomic_write_text
from ttlab.common.config import parse_config
from ttlab.common.errors import UserError

STAGES = {"drive": "ttlab.drive.demo", "discover": "ttlab.discover.demo", "wm": "ttlab.worldmodel.demo"}


@dataclass
class DemoConfig:
    """Small end-to-end run of each ttlab system on embedded defaults."""

    out: Path = Path("runs/demo")
    """Directory for the demo's outputs and summary.md."""
    stages: tuple[str, ...] = ("drive", "discover", "wm")
    """Which stages to run, in order (drive, discover, wm)."""
    device: str = "auto"
    """auto | cpu | cuda."""
    strict: bool = True
    """Exit non-zero when a stage fails or is not built (--no-strict: exit 0 and only report it)."""


def run_stage(name: str, out: Path, device: str) -> tuple[str, str, float]:
    """Returns (status, markdown, seconds); status is ok | not built | failed."""
    t0 = time.time()
    try:
        module = importlib.import_module(STAGES[name])
    except ModuleNotFoundError as e:
        if e.name == STAGES[name]:
            return "not built", f"The `{name}` demo stage is not built yet.", 0.0
        return "failed", f"missing dependency `{e.name}` (install the project's extras: `make setup`)", 0.0
    stage_dir = out / name
    stage_dir.mkdir(parents=True, exist_ok=True)
    try:
        md = module.run(stage_dir, device)
        return "ok", md, time.time() - t0
    except Exception:  # a failing stage must not hide the others
        return "failed", "```\n" + traceback.format_exc()[-3000:] + "\n```", time.time() - t0


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(DemoConfig, argv=argv, prog="ttlab demo")
    unknown = [s for s in cfg.stages if s not in STAGES]
    if unknown:
        raise UserError(f"--stages: unknown stage(s) {unknown}; choose from {list(STAGES)}")
    cfg.out.mkdir(parents=True, exist_ok=True)
    lines = ["# ttlab demo summary", ""]
    bad = 0
    for name in cfg.stages:
        print(f"== demo stage: {name}", flush=True)
        status, md, secs = run_stage(name, cfg.out, cfg.device)
        bad += status != "ok"
        print(f"== {name}: {status} ({secs:.0f}s)", flush=True)
        lines += [f"## {name}: {status} ({secs:.0f} s)", "", md.strip(), ""]
        atomic_write_text(cfg.out / "summary.md", "\n".join(lines) + "\n")
    print(f"wrote {cfg.out / 'summary.md'}")
    return 1 if (cfg.strict and bad) else 0
