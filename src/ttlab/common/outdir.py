"""Check an output location before a command does its work, so a path that cannot be written fails in the first
second with one line, not after minutes of evaluation or search with the result lost.

    writable_dir("--out", Path("runs/x/eval"))      # creates it (and its parents) and writes a probe file
    writable_parent("--out", Path("runs/x.json"))   # the same for a file's directory
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ttlab.common.errors import UserError


def writable_dir(flag: str, path: str | Path) -> Path:
    """Create directory `path` (parents too) and check a file can be written in it; a UserError naming `flag`."""
    path = Path(path)
    _check(flag, path, path)
    return path


def writable_parent(flag: str, path: str | Path) -> Path:
    """Check the file `path` can be written: not a directory, its directory creatable and writable."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{flag} {path}: is a directory, expected a file path")
    _check(flag, path, path.parent)
    return path


def _check(flag: str, shown: Path, directory: Path) -> None:
    """Make `directory` and write a probe file in it; errors name `flag` and the path the user gave (`shown`)."""
    if directory.exists() and not directory.is_dir():
        why = "exists and is not a directory" if shown == directory else f"{directory} is not a directory"
        raise UserError(f"{flag} {shown}: {why}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".ttlab-write-check-"):
            pass
    except OSError as e:
        raise UserError(f"{flag} {shown}: cannot write there ({e.strerror or e})") from None
