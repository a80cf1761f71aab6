"""A benchmark's last act: write its result JSON (when asked) and print it as the one JSON line."""

from __future__ import annotations

import json
from pathlib import Path


def emit_result(res: dict, out: str | Path | None) -> None:
    """Write `res` to `out` (indented, parents created) if given, then print it as one JSON line."""
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))
