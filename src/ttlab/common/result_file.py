"""A benchmark's last act: write its result JSON (when asked) and print it as the one JSON line."""

from __future__ import annotations

import json
from pathlib import Path

from ttlab.common.checkpoint import atomic_write_text


def emit_result(res: dict, out: str | Path | None, indent: int | None = 1) -> None:
    """Write `res` to `out` (atomically, parents created; indented unless `indent` is None) if given, then print it
    as one JSON line."""
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(out), json.dumps(res, indent=indent) + "\n")
    print(json.dumps(res))
