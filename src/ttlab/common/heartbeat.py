"""A heartbeat for long steps that print nothing themselves: one line every `every` seconds with the stage, its
current step, the elapsed time and an ETA against the stage's budget.

    with Heartbeat("drive", budget_s=360) as hb:
        hb.step("rendering")                              # printed at once, then repeated every 20 s
        step("training 40/120 s", frac=0.4, show=False)   # from code without a handle; printed by the next beat

A step may say how far it is (`frac` of the whole stage when the step began); the ETA is then the stage's
projected length (elapsed at that moment / frac) minus the time elapsed now, and once the step runs past that
projection, or without a fraction, the budget minus the elapsed time ("over budget" once past it). The printing thread only reads two attributes;
stages stay free of any printing of their own.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


def clock(seconds: float) -> str:
    """90 -> '1m30s', 5 -> '5s'."""
    s = max(0, int(round(seconds)))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def eta_text(elapsed: float, budget_s: float, frac: float | None, frac_at: float | None = None) -> str:
    """The ETA part of a heartbeat line (pure, tested). `frac_at`: the elapsed time when `frac` was reported
    (default: now)."""
    if frac is not None and 0.0 < frac < 1.0:
        left = (elapsed if frac_at is None else frac_at) / frac - elapsed
        if left > 0:
            return f"ETA {clock(left)} (budget {clock(budget_s)})"
    left = budget_s - elapsed
    if left >= 0:
        return f"ETA <= {clock(left)} (budget {clock(budget_s)})"
    return f"over budget by {clock(-left)} (budget {clock(budget_s)})"


class Heartbeat:
    """Prints `[demo <stage>] <step> | elapsed 1m20s | ETA ...` now and every `every` seconds until closed."""

    def __init__(self, stage: str, budget_s: float, every: float = 20.0, stream: TextIO | None = None,
                 prefix: str = "demo"):
        self.stage, self.budget_s, self.every = stage, float(budget_s), float(every)
        self.stream = stream if stream is not None else sys.stdout
        self.prefix = prefix
        self.text, self.frac, self.frac_at = "starting", None, 0.0
        self.t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def line(self) -> str:
        el = time.perf_counter() - self.t0
        return (f"[{self.prefix} {self.stage}] {self.text} | elapsed {clock(el)} | "
                f"{eta_text(el, self.budget_s, self.frac, self.frac_at)}")

    def emit(self) -> None:
        print(self.line(), file=self.stream, flush=True)

    def step(self, text: str, frac: float | None = None, show: bool = True) -> None:
        """Set the current step (and, if known, the stage's fraction done); print it at once unless show=False
        (a loop updating its step often leaves the printing to the heartbeat)."""
        self.text, self.frac, self.frac_at = text, frac, time.perf_counter() - self.t0
        if show:
            self.emit()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.emit()

    def __enter__(self) -> Heartbeat:
        global _ACTIVE
        _ACTIVE = self
        self.t0 = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        global _ACTIVE
        self._stop.set()
        self._thread.join()
        if _ACTIVE is self:
            _ACTIVE = None


_ACTIVE: Heartbeat | None = None


def step(text: str, frac: float | None = None, show: bool = True) -> None:
    """Report the current step to the active heartbeat (no-op when none is running, e.g. in tests)."""
    if _ACTIVE is not None:
        _ACTIVE.step(text, frac, show)
