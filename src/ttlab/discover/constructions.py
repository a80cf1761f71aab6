"""Reading construction files: every layout `ttlab discover verify` and `polish` accept.

A file gives one or more (name, array-like, reported score, extra fields). A reported score (`score`, `c5`,
`c5_bound`) is only ever compared with the one the task recomputes; nothing here scores anything.
"""

from __future__ import annotations

import json
from pathlib import Path

from ttlab.discover.sandbox_npy import NpyError, parse_npy

MAX_FILE_BYTES = 64 * 2**20
"""Largest construction file read."""

MAX_NPY_ITEMS = 10_000_000
"""Largest .npy array read (elements)."""


def load_constructions(path: Path) -> list[tuple[str, object, float | None, dict]]:
    """(name, array-like, published/reported score or None, extra fields) for every construction in the file.

    JSON: a list; {"h": [...]}; {"construction": [...]} ("f", "circles" too); the seed/reference program
    output {"h_values": [...], "c5_bound": ..., "n_points": ...}; a reference file {"constructions": [...]}.
    Or a .npy array (parsed without pickle).
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path}: {path.stat().st_size} bytes, larger than the {MAX_FILE_BYTES} bytes verify reads")
    if path.suffix == ".npy":
        try:
            return [(path.name, parse_npy(path.read_bytes(), MAX_NPY_ITEMS), None, {})]
        except NpyError as e:
            raise ValueError(f"{path}: {e}") from e
    try:
        d = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from e
    if isinstance(d, list):
        return [(path.name, d, None, {})]
    if isinstance(d, dict) and "constructions" in d:
        return [(c.get("name", f"#{i}"), c.get("h", c.get("construction")), c.get("c5", c.get("score")), {})
                for i, c in enumerate(d["constructions"])]
    if isinstance(d, dict) and "h_values" in d:
        return [(path.name, d["h_values"], d.get("c5_bound"), {"n_points": d.get("n_points"), "reported_key": "c5_bound"})]
    if isinstance(d, dict):
        for key in ("construction", "h", "f", "circles"):
            if key in d:
                return [(path.name, d[key], d.get("score"), {})]
    raise ValueError(f"{path}: expected a list, or a dict with 'h_values'/'construction'/'h'/'f'/'circles'/'constructions'")
