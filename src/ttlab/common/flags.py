"""Range checks of config fields, named as the CLI flag that sets them.

    at_least(cfg.ppo, ("update_epochs",), 1, prefix="ppo.")   # UserError("--ppo.update-epochs 0: must be >= 1")

Pure functions: each raises `UserError` (the CLI prints it as one line, exit 2) on the first field out of range.
NaN is out of every range. A command runs its checks before it loads, starts or writes anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ttlab.common.errors import UserError


def flag_name(name: str, prefix: str = "") -> str:
    """`ppo.` + `update_epochs` -> `--ppo.update-epochs`."""
    return f"--{prefix}{name.replace('_', '-')}"


def at_least(cfg: object, names: Iterable[str], low: float, prefix: str = "") -> None:
    """Each named field >= low (NaN fails)."""
    for n in names:
        v = getattr(cfg, n)
        if not v >= low:
            raise UserError(f"{flag_name(n, prefix)} {v}: must be >= {low:g}")


def above(cfg: object, names: Iterable[str], low: float, prefix: str = "") -> None:
    """Each named field > low and finite."""
    for n in names:
        v = getattr(cfg, n)
        if not (v > low and math.isfinite(v)):
            raise UserError(f"{flag_name(n, prefix)} {v}: must be > {low:g}")


def within(cfg: object, name: str, lo: float, hi: float, hi_open: bool = False, prefix: str = "") -> None:
    """lo <= field <= hi (or < hi)."""
    v = getattr(cfg, name)
    if not (lo <= v and (v < hi if hi_open else v <= hi)):
        raise UserError(f"{flag_name(name, prefix)} {v}: must be in [{lo:g}, {hi:g}{')' if hi_open else ']'}")


def one_of(cfg: object, name: str, choices: Iterable[str], prefix: str = "") -> None:
    """The field is one of `choices`."""
    v, choices = getattr(cfg, name), tuple(choices)
    if v not in choices:
        raise UserError(f"{flag_name(name, prefix)} {v!r}: expected one of {', '.join(choices)}")
