"""The start a composed Erdős block program makes, read from its text.

`restart`: it calls `eb.multistart` (a fresh start, whatever else it does); `coarsen`: its first line of code
coarsens the parent; `parent`: it works on the parent as it is. A program that uses no blocks reads as `parent`.
"""

from __future__ import annotations

STARTS = ("restart", "coarsen", "parent")


def start_of(text: str) -> str:
    """The start a composed program makes (see the module docstring)."""
    if "eb.multistart(" in text:
        return "restart"
    code = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("#", "```"))]
    return "coarsen" if code and "eb.coarsen(" in code[0] else "parent"
