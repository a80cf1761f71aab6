"""Check an output location before a command does its work, so a path that cannot be written fails in the first
second with one line, not after minutes of evaluation or search with the result lost.

    writable_dir("--out", Path("runs/x/eval"))      # a directory the command may create and write in
    writable_parent("--out", Path("runs/x.json"))   # a file the command may create

Nothing is created: a command whose other inputs turn out bad leaves no trace. The path's nearest existing
ancestor must be a directory this process can write in (a probe file is written and removed where the directory
itself exists).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ttlab.common.errors import UserError


def writable_dir(flag: str, path: str | Path) -> Path:
    """Check directory `path` can be made (if missing) and written in; a UserError naming `flag` otherwise."""
    path = Path(path)
    _check(flag, path, path)
    return path


def writable_parent(flag: str, path: str | Path) -> Path:
    """Check the file `path` can be written: not a directory, its directory writable or creatable."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{flag} {path}: is a directory, expected a file path")
    _check(flag, path, path.parent)
    return path


def _check(flag: str, shown: Path, directory: Path) -> None:
    """`directory` exists and takes a file, or its nearest existing ancestor is a writable directory; errors name
    `flag` and the path the user gave (`shown`)."""
    d = directory if str(directory) else Path(".")
    while not d.exists() and d != d.parent:
        d = d.parent
    if not d.is_dir():
        why = "exists and is not a directory" if d == shown else f"{d} is not a directory"
        raise UserError(f"{flag} {shown}: {why}")
    try:
        if d == directory:
            with tempfile.NamedTemporaryFile(dir=d, prefix=".ttlab-write-check-"):
                pass
        elif not os.access(d, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied", str(d))
    except OSError as e:
        raise UserError(f"{flag} {shown}: cannot write there ({e.strerror or e})") from None
