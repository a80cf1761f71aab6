"""Subcommand dispatch for a system's command tree (`ttlab drive render ...`).

A system's `cli.py` maps names to `(handler(argv) -> int, one-line help)`; each handler parses its own
dataclass config with `parse_config`, so `ttlab drive render --help` shows that command's flags.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

from ttlab.common.config import ConfigError

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
        print(f"{prog}: unknown command {cmd!r}\n\n{usage}", file=sys.stderr)
        return 2
    try:
        rc = commands[cmd][0](rest)
    except SystemExit as e:  # tyro exits on --help / bad flags
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    except ConfigError as e:  # an unknown preset, a bad config file: one line, not a traceback
        print(f"{prog} {cmd}: {e}", file=sys.stderr)
        return 2
    return int(rc or 0)
