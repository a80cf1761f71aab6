"""Modules a sandboxed program may import by name (`import erdos_blocks as eb`), and how they get there.

Each module here (`erdos_blocks.py`) is standalone: numpy and scipy only, no ttlab import, so the sandbox can
expose exactly that file read-only. Two ways it reaches a program:

- `with_blocks(code)` (works with any sandbox): a program that imports a block module gets one line
  prepended that builds the module from its source, shipped inside the program text, as the library
  programs themselves are shipped. Call it where a program becomes a sandbox `Job`; the program's own
  lines move down by one.
- a sandbox that exposes `BLOCKS_DIR` read-only and puts it on the program's `sys.path` needs no bundling.

On the host this package registers the same module objects under their sandbox names in `sys.modules`,
so library programs (which `import erdos_blocks`) also import and run in-process (tests, benchmarks).
`program_meta(stdout)` reads the `program_meta {...}` line a block program prints (`erdos_blocks.report`).
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

from ttlab.discover.blocks import erdos_blocks

BLOCKS_DIR = Path(__file__).resolve().parent
"""The directory to expose read-only to sandboxed programs (and to put on their sys.path)."""
MODULES = {"erdos_blocks": erdos_blocks}
"""Sandbox module name -> the module (its source file is BLOCKS_DIR / f"{name}.py")."""

for _name, _mod in MODULES.items():
    sys.modules.setdefault(_name, _mod)

_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)
_META = re.compile(r"^program_meta (\{.*\})[ \t]*$", re.M)


def source(name: str) -> str:
    return (BLOCKS_DIR / f"{name}.py").read_text()


def uses_blocks(code: str) -> list[str]:
    """The block modules `code` imports (by a top-level or nested import statement)."""
    return sorted({m for m in _IMPORT.findall(code) if m in MODULES})


CLOCKS = ("time", "work")
"""What the blocks' clocks count in a program: CPU time with a wall backstop, or the deterministic work model."""


def clock_wall_factor(clock: str) -> float:
    """How many times its budget a program's wall time may reach under `clock` before its backstop binds (the
    sandbox's wall limit must allow it, plus grace): 1 for "time", the blocks' WORK_WALL_FACTOR for "work"."""
    if clock not in CLOCKS:
        raise ValueError(f"program clock {clock!r}: one of {', '.join(CLOCKS)}")
    return erdos_blocks.WORK_WALL_FACTOR if clock == "work" else 1.0


def loader_line(name: str, clock: str = "time") -> str:
    """One line that builds module `name` from its shipped source, sets its default clock unit (`CLOCK_UNIT`,
    when it has one) and registers it in sys.modules."""
    if clock not in CLOCKS:
        raise ValueError(f"program clock {clock!r}: one of {', '.join(CLOCKS)}")
    unit = f"_m.CLOCK_UNIT = {clock!r}; " if hasattr(MODULES[name], "CLOCK_UNIT") else ""
    return (f"import sys as _s, types as _t; _m = _t.ModuleType({name!r}); "
            f"exec(compile({source(name)!r}, {name + '.py'!r}, 'exec'), _m.__dict__); {unit}_s.modules[{name!r}] = _m; "
            "del _s, _t, _m\n")


def with_blocks(code: str, clock: str = "time") -> str:
    """`code` with a loader line for every block module it imports prepended (unchanged when it imports none);
    `clock` "work": the blocks' clocks count work, not time, unless a program asks otherwise."""
    return "".join(loader_line(m, clock) for m in uses_blocks(code)) + code


def log_tail(stdout: str, lines: int = 24, width: int = 160) -> list[str]:
    """The last `lines` non-empty lines of a program's output, each cut to `width` characters, without the
    `program_meta` line: what a result file keeps of a program's own account (e.g. a ladder's C5 at each
    size). Untrusted text, kept as a diagnostic only."""
    out = [ln[:width] for ln in (stdout or "").splitlines() if ln.strip() and not ln.startswith("program_meta ")]
    return out[-lines:]


def program_meta(stdout: str) -> dict[str, float]:
    """The last `program_meta {...}` line of a program's output: finite numbers only (the program is
    untrusted; these are diagnostics such as the CPU seconds it got, never a score)."""
    found = _META.findall(stdout or "")
    if not found:
        return {}
    try:
        d = json.loads(found[-1])
    except ValueError:
        return {}
    if not isinstance(d, dict):
        return {}
    return {str(k)[:40]: float(v) for k, v in list(d.items())[:16]
            if type(v) in (int, float) and math.isfinite(v)}
