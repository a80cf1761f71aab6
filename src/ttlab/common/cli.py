"""Subcommand dispatch for a system's command tree (`ttlab drive render ...`), behind the error boundary.

A system's `cli.py` maps names to `(handler(argv) -> int, one-line help)`; each handler parses its own
dataclass config with `parse_config`, so `ttlab drive render --help` shows that command's flags. A user
error in any handler prints `ttlab <system> <cmd>: error: <message>` and exits 2 (`ttlab.common.errors`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

from ttlab.common.errors import EXIT_USAGE, run_guarded

Handler = Callable[[list[str]], int | None]


def dispatch(prog: str, commands: Mapping[str, tuple[Handler, str]], argv: Sequence[str] | None, about: str = "") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = "|".join(commands)
    usage = f"usage: {prog} {{{names}}} ... [--help]\n"
    if about:
        usage += f"\n{about}\n"
    usage += "\ncommands:\n" + "\n".join(f"  {n:<14}{h}" for n, (_, h) in commands.items())
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in commands:
        print(f"{prog}: error: unknown command {cmd!r} (expected one of: {', '.join(commands)})", file=sys.stderr)
        return EXIT_USAGE

    return run_guarded(f"{prog} {cmd}", lambda: commands[cmd][0](rest))
