"""Start a search from an earlier run's tree, every state re-verified (a tree file is input like any other)."""

from __future__ import annotations

import math
from pathlib import Path

from ttlab.discover.puct import PUCTTree
from ttlab.discover.tasks.base import Task


def load_verified_tree(path: str | Path, task: Task, c: float, keep_children: int, max_roots: int,
                       flag: str = "--init-tree") -> PUCTTree:
    """The tree at `path` with this run's PUCT settings; every node is re-verified by `task` and must match its
    stored reward (ValueError / FileNotFoundError naming `flag` otherwise)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{flag} {path}: no such file")
    tree = PUCTTree.load(path)
    if not tree.nodes:
        raise ValueError(f"{flag} {path}: the tree has no states")
    tree.c, tree.keep_children, tree.max_roots = c, keep_children, max_roots
    for node in tree.nodes.values():
        r = task.verify(node.array())
        if not r.valid:
            raise ValueError(f"{flag} {path}: state {node.id} is not a valid {task.name} construction ({r.message})")
        if not math.isclose(float(r.reward), node.reward, rel_tol=1e-9, abs_tol=1e-12):
            raise ValueError(f"{flag} {path}: state {node.id} stores reward {node.reward!r} but verifies to "
                             f"{r.reward!r}")
    return tree
