"""Time limits as the CLI spells them: `--time-limit 90s | 10m | 1.5h` ("" or "0": no limit)."""

from __future__ import annotations

import re

from ttlab.common.errors import UserError

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(s: str | float | None, flag: str = "--time-limit") -> float:
    """'90s' | '10m' | '1.5h' -> seconds; '' / '0' / None -> 0 (no limit). A bare number is refused: its unit
    would be a guess."""
    text = "" if s is None else str(s).strip()
    if text in ("", "0", "0.0"):
        return 0.0
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([smh])", text)
    if not m:
        raise UserError(f"{flag} {text!r}: expected a number with a unit s, m or h (e.g. 90s, 10m, 1.5h)")
    return float(m.group(1)) * _UNITS[m.group(2)]
