"""Block programs that draw their settings at run time, from ranges the program writes.

The random-blocks grammar (`random_blocks.py`) writes every setting as a number. A model warm-started on it
writes numbers near the ones it was trained on, so its 16 programs of a step vary less than 16 fresh grammar
draws, and the random proposer's best of 16 wins from the root (docs/notes/discover-llm8.md). In this grammar the
structure (start, stages, their order and ends, sizes) is written as before, but each continuous setting is
either a number or a range the program draws from with its own seeded generator:

    sigma=10 ** rng.uniform(-1.1, -0.4)      a log-uniform draw (scales, temperatures, tolerances)
    window=rng.uniform(0.1, 0.4)             a uniform draw (fractions)
    eb.multistart(rng.integers(30, 90), ...) a size

The ranges themselves vary in the corpus (a sub-range of the grammar's range, the whole range, or a number), so
a warm-started model has a prior over where to look and how widely, which the test-time updates can narrow or
move. A program and a seed still compute the same thing every time (the generator is seeded by the seed).
"""

from __future__ import annotations

import math

import numpy as np

from ttlab.discover.random_blocks import HEAD, MAX_N, STAGES, TAIL

LOG_RANGES = {"temperature": (-6.0, -4.0), "sigma": (math.log10(0.05), math.log10(0.6)), "tau0": (-7.0, -3.0),
              "delta": (math.log10(0.002), math.log10(0.05)), "tau": (-3.0, math.log10(0.05))}
"""log10 of the random-blocks grammar's ranges for the settings it draws log-uniformly."""
LIN_RANGES = {"window": (0.05, 0.5)}
N0_RANGE = (24, 128)

P_WHOLE, P_NUMBER = 0.25, 0.15
"""How a setting is written: the grammar's whole range, one number, else (0.6) a sub-range of it."""


def _sub(rng: np.random.Generator, lo: float, hi: float, min_frac: float = 0.15) -> tuple[float, float, str]:
    """(a, b, kind): a sub-range of [lo, hi] at least `min_frac` of it wide, the whole range, or a point (a == b)."""
    u = rng.uniform()
    if u < P_WHOLE:
        return lo, hi, "whole"
    if u < P_WHOLE + P_NUMBER:
        x = float(rng.uniform(lo, hi))
        return x, x, "number"
    a, b = np.sort(rng.uniform(lo, hi, 2))
    w = max(b - a, min_frac * (hi - lo))
    mid = min(max((a + b) / 2, lo + w / 2), hi - w / 2)
    return float(mid - w / 2), float(mid + w / 2), "range"


def log_setting(rng: np.random.Generator, name: str) -> tuple[str, dict]:
    """A log-uniform setting's source (`10 ** rng.uniform(a, b)` or a number) and its record."""
    a, b, kind = _sub(rng, *LOG_RANGES[name])
    if kind == "number":
        return f"{10 ** a:.3g}", {"kind": kind, "value": float(f"{10 ** a:.3g}")}
    return f"10 ** rng.uniform({a:.2f}, {b:.2f})", {"kind": kind, "log10": [round(a, 2), round(b, 2)]}


def lin_setting(rng: np.random.Generator, name: str) -> tuple[str, dict]:
    a, b, kind = _sub(rng, *LIN_RANGES[name])
    if kind == "number":
        return f"{a:.3g}", {"kind": kind, "value": float(f"{a:.3g}")}
    return f"rng.uniform({a:.2f}, {b:.2f})", {"kind": kind, "range": [round(a, 2), round(b, 2)]}


def size_setting(rng: np.random.Generator) -> tuple[str, dict]:
    lo, hi = N0_RANGE
    a, b, kind = _sub(rng, math.log(lo), math.log(hi))
    a, b = round(math.exp(a)), round(math.exp(b))
    if kind == "number" or b - a < 4:
        return f"{a}", {"kind": "number", "value": a}
    return f"rng.integers({a}, {b})", {"kind": kind, "range": [a, b]}


def _stage(kind: str, end: float, rng: np.random.Generator, choices: dict) -> str:
    """One stage's source line(s), ending at fraction `end` of the budget."""
    until = f"clock.until({end:.3g})"
    rec: dict = {"kind": kind, "end": round(end, 3)}
    choices.setdefault("stages", []).append(rec)
    if kind in ("hop", "up_hop"):
        temp, rec["temperature"] = ("0.0", 0.0) if rng.uniform() < 0.5 else log_setting(rng, "temperature")
        sym = float(rng.choice([0.0, 0.0, 0.15, 0.5]))
        (sigma, rec["sigma"]), (window, rec["window"]) = log_setting(rng, "sigma"), lin_setting(rng, "window")
        rec["sym"] = sym
        x = "eb.upsample(h, 2)" if kind == "up_hop" else "h"
        return (f"    h, c, hops = eb.hop({x}, {until}, rng, temperature={temp}, sym={sym}, "
                f"sigma={sigma}, window={window})\n")
    if kind == "continuation":
        tau0, rec["tau0"] = log_setting(rng, "tau0")
        return f"    h, c = eb.continuation(h, {until}, tau0={tau0})\n"
    if kind == "converge":
        return f"    h, c = eb.converge(h, {until}, eb.FINE_TAUS, \"scaled\", 1e-15)\n"
    delta, rec["delta"] = log_setting(rng, "delta")
    return (f"    if h.size <= 300:\n"
            f"        h, c, steps = eb.lp_polish(h, {until}, delta={delta})\n")


def ranged_program(rng: np.random.Generator, wall_factor: float = 1.0) -> tuple[str, dict]:
    """(source, the choices it was written with): the random-blocks grammar's structure, settings as ranges."""
    choices: dict = {"grammar": "ranges"}
    src = HEAD.format(wall="" if wall_factor == 1.0 else f", wall_factor={wall_factor:g}")
    start = str(rng.choice(["parent", "coarse", "multistart", "multistart"]))
    choices["start"] = start
    t = 0.0
    if start == "coarse":
        f = int(rng.choice([2, 4, 8]))
        choices["coarsen"] = f
        src += f"    h = eb.coarsen(h, {f})\n"
    elif start == "multistart":
        (n0, choices["n0"]), (tau, choices["tau"]) = size_setting(rng), log_setting(rng, "tau")
        shape = str(rng.choice(["random_start", "smooth_start"]))
        t = float(rng.uniform(0.03, 0.3))
        choices.update(shape=shape, start_end=round(t, 3))
        src += f"    h, c = eb.multistart({n0}, clock.until({t:.3g}), rng, tau={tau}, start=eb.{shape})\n"
    if rng.uniform() < 0.25:
        choices["symmetrise"] = True
        src += "    h = eb.symmetrise(h)\n"
    k = int(rng.integers(1, 4))
    ends = np.sort(rng.uniform(t, 0.85, k))
    for kind, end in zip(rng.choice(STAGES, size=k, p=[0.35, 0.25, 0.15, 0.1, 0.15]), ends, strict=True):
        src += _stage(str(kind), float(end), rng, choices)
    max_n = int(rng.choice(MAX_N))
    choices["max_n"] = max_n
    return src + TAIL.format(max_n=max_n), choices
