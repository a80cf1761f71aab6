"""Run directories: `runs/<system>/<run-name>/` with `config.json` and the git revision."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttlab.common.checkpoint import atomic_write_text, latest_checkpoint
from ttlab.common.config import to_dict


def git_revision(cwd: str | Path | None = None) -> str:
    """The current commit (with `-dirty` when the tree has changes), or `unknown` outside git."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd, capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@dataclass
class RunDir:
    """A run's directory and the standard places inside it."""

    path: Path

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def latest(self) -> Path | None:
        return latest_checkpoint(self.checkpoints, "latest")

    def file(self, name: str) -> Path:
        return self.path / name


def make_run_dir(
    system: str,
    cfg: Any,
    run_name: str | None = None,
    root: str | Path = "runs",
    resume: bool = False,
) -> RunDir:
    """Create (or, with `resume`, reopen) `root/system/run_name` and write `config.json` + `git_rev.txt`.

    Without `resume`, an existing non-empty run directory is an error rather than silently mixed.
    """
    name = run_name or time.strftime("%Y%m%d-%H%M%S")
    path = Path(root) / system / name
    if path.exists() and any(path.iterdir()) and not resume:
        raise FileExistsError(f"run directory {path} already exists; pass --resume to continue it or pick another --run-name")
    path.mkdir(parents=True, exist_ok=True)
    (path / "checkpoints").mkdir(exist_ok=True)
    cfg_path = path / "config.json"
    if resume and cfg_path.exists():
        atomic_write_text(path / "config.resume.json", json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n")
    else:
        atomic_write_text(cfg_path, json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n")
    atomic_write_text(path / "git_rev.txt", git_revision() + "\n")
    return RunDir(path)
