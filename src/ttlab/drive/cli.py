"""`ttlab drive ...` command tree. Each command parses its own dataclass config."""

from __future__ import annotations

from ttlab.common.cli import dispatch

COMMANDS: dict = {
    # name: (handler(argv) -> int, one-line help); commands are added as they are built.
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("ttlab drive", COMMANDS, argv)
