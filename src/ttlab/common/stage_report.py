"""What a `ttlab demo` stage hands back: the row of the summary's top table and its own section.

A stage's `run(out_dir, device)` returns a `StageReport` (or plain markdown, which the summary shows as its
section with no figure in the table). Paths in `body` are written relative to the summary's folder (`rel`),
so pictures embed and videos link from `runs/demo/summary.md`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class StageReport:
    """One demo stage's result."""

    shows: str
    """What the stage shows, in a few words (the top table's second column)."""
    figure: str
    """The figure that means something, one line of markdown (the top table's third column)."""
    body: str
    """The stage's section: figures, embedded pictures, links to videos."""


def rel(path: str | Path, summary_dir: str | Path) -> str:
    """`path` relative to the summary's folder, with forward slashes (for markdown links)."""
    return Path(os.path.relpath(Path(path).resolve(), Path(summary_dir).resolve())).as_posix()


def picture(path: str | Path, summary_dir: str | Path, alt: str) -> str:
    """An embedded picture (PNG/GIF) or, for a video, a link."""
    r = rel(path, summary_dir)
    if Path(path).suffix.lower() in (".png", ".gif", ".jpg", ".jpeg"):
        return f"![{alt}]({r})"
    return f"[{alt} ({Path(path).suffix[1:]})]({r})"


def demo_threads() -> int:
    """Torch threads for a demo stage's training: the stages run one at a time on the 2 cores the demo is sized for,
    so a stage's learner gets both (at most the machine's cores)."""
    return max(1, min(2, os.cpu_count() or 1))
