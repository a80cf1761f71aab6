"""The numeric settings a composed Erdős block program writes, read from its text, and how widely a set of
programs spreads them.

A setting is a keyword argument of a block call written as a number (`sigma=0.214`, `tau0=1e-06`,
`window=0.234`); anything else (an expression, a variable) is not read. The scales, temperatures and tolerances
are compared on log10 (the random-blocks grammar draws them log-uniformly), `window` as is; a zero temperature
(a monotone hop, a choice rather than a scale) is left out.
"""

from __future__ import annotations

import math
import re

import numpy as np

LOG_SETTINGS = ("temperature", "sigma", "tau0", "delta", "tau")
LIN_SETTINGS = ("window",)
_SETTING = re.compile(r"\b(" + "|".join(LOG_SETTINGS + LIN_SETTINGS) + r")=(-?\d+\.?\d*(?:[eE]-?\d+)?)(?![\w.(])")


def settings_in(text: str) -> list[tuple[str, float]]:
    """[(name, value)] in the order written: log10 of the log-scale settings, `window` as is."""
    out = []
    for name, num in _SETTING.findall(text or ""):
        x = float(num)
        if name in LIN_SETTINGS:
            out.append((name, x))
        elif x > 0:
            out.append((name, math.log10(x)))
    return out


def spread(texts: list[str]) -> dict[str, dict]:
    """{name: {"n", "std", "distinct"}}: over every occurrence in `texts`, the standard deviation of the setting
    (log10 for the scales) and the share of distinct values (1.0: no value written twice)."""
    vals: dict[str, list[float]] = {}
    for t in texts:
        for name, v in settings_in(t):
            vals.setdefault(name, []).append(v)
    return {k: {"n": len(v), "std": round(float(np.std(v)), 4), "distinct": round(len(set(v)) / len(v), 3)}
            for k, v in sorted(vals.items())}
