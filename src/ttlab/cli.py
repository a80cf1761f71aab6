"""`ttlab` console script: `ttlab drive|discover|wm|demo ...`.

Each system owns its own command tree in `ttlab.<system>.cli:main(argv)`; this file only dispatches,
importing a system lazily so `ttlab --help` is instant and a missing optional extra names itself.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from ttlab import __version__
from ttlab.common.errors import EXIT_USAGE, pop_debug, run_guarded, set_debug

SYSTEMS = {
    "drive": ("ttlab.drive.cli", "batched multi-agent driving sim, multi-trial episodes, PPO (transformer KV cache)"),
    "discover": ("ttlab.discover.cli", "TTT-Discover: programs for math constructions, PUCT, entropic GRPO, sandbox"),
    "wm": ("ttlab.worldmodel.cli", "Nano World Model: action-conditioned space/time video diffusion transformer"),
    "demo": ("ttlab.demo", "small end-to-end run of every system; writes runs/demo/summary.md"),
}

USAGE = "usage: ttlab {drive,discover,wm,demo} ... [--help]\n\ncommands:\n" + "\n".join(
    f"  {name:<10}{desc}" for name, (_, desc) in SYSTEMS.items()
)


def main(argv: Sequence[str] | None = None) -> int:
    debug, argv = pop_debug(sys.argv[1:] if argv is None else argv)
    set_debug(debug)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if argv[0] in ("--version", "-V"):
        print(__version__)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in SYSTEMS:
        print(f"ttlab: error: unknown command {cmd!r} (expected one of: {', '.join(SYSTEMS)})", file=sys.stderr)
        return EXIT_USAGE
    module_name = SYSTEMS[cmd][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and not e.name.startswith("ttlab"):
            extra = {"wm": "worldmodel"}.get(cmd, cmd)
            print(f"ttlab {cmd}: missing dependency {e.name!r}; install it with: pip install 'ttlab[{extra}]'",
                  file=sys.stderr)
            return 1
        raise
    return run_guarded(f"ttlab {cmd}", lambda: module.main(rest))


if __name__ == "__main__":
    sys.exit(main())
