"""Where each verified construction came from, and whether it is a copy of a known one.

Every result a search, a training step or a polish round verifies is recorded with the hash of the
program that produced it and the state it was given (its parent). Before a valid construction may become a
state, it is compared with what is already known, after the task's normalisation (`Task.normal_forms`: the
construction as the verifier normalises it, and its images under the symmetries that leave the score
unchanged; for Erdős the rescale to sum n/2, the fewest equal pieces, reversal and complement):

- a published reference of the task (`Task.references`, e.g. the three Erdős constructions of the shared
  data) or a construction from a file the run was told about (`known`);
- a state already in the tree. From another lineage (neither the parent, an ancestor of it, nor one of its
  descendants) it is a copy; from its own lineage it is a rediscovery (`same`: no new state, as the tree's
  dedup, and the reward counts as before).

Equal means the same normalised shape and a largest absolute difference <= COPY_TOL. A copy is recorded as
such (`copy_of` names what it equals), earns the reward of a failed sample and never becomes a state, so
it can never be a new best.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ttlab.discover.constructions import load_constructions
from ttlab.discover.puct import Node, PUCTTree
from ttlab.discover.tasks.base import COPY_TOL, Task

PREFILTER = 1e-9
"""Mean squares of two normal forms further apart than this cannot be within COPY_TOL (values are O(1));
only the survivors are compared element by element."""


def program_hash(code: str) -> str:
    """First 16 hex digits of the sha256 of a program's source ('' for no program)."""
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()[:16] if code else ""


@dataclass(frozen=True)
class Provenance:
    """Where one result came from and what the search may do with it."""

    program: str
    """program_hash of the source that produced it."""
    parent: str | None
    """Id of the state the program was given (None outside a tree)."""
    verdict: str = "new"
    """new | same (equals a state of its own lineage) | copy (equals a known construction or a state of
    another lineage) | failed (not a valid construction)."""
    copy_of: str = ""
    """What it equals: `reference:<name>`, `known:<file>:<name>`, `tree:<state id>`, `start:<name>`."""

    @property
    def counted(self) -> bool:
        """Does its reward count (a new construction or a rediscovery in its own lineage)?"""
        return self.verdict in ("new", "same")

    def record(self) -> dict:
        return {**asdict(self), "counted": self.counted}


def _msq(g: np.ndarray) -> float:
    return float(np.mean(np.square(g)))


def _same(f: np.ndarray, f_msq: float, g: np.ndarray, g_msq: float, tol: float) -> bool:
    return f.shape == g.shape and abs(f_msq - g_msq) <= PREFILTER and float(np.max(np.abs(f - g))) <= tol


class Known:
    """Known constructions of a task, kept in normal form (`Task.normal_forms(x)[0]`), grouped by shape."""

    def __init__(self, task: Task, tol: float = COPY_TOL) -> None:
        self.task, self.tol = task, tol
        self._by_shape: dict[tuple[int, ...], list[tuple[str, np.ndarray, float]]] = {}

    def add(self, label: str, construction: np.ndarray) -> None:
        g = self.task.normal_forms(construction)[0]
        self._by_shape.setdefault(g.shape, []).append((label, g, _msq(g)))

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_shape.values())

    def labels(self) -> list[str]:
        return [label for v in self._by_shape.values() for label, _, _ in v]

    def match(self, forms: list[np.ndarray]) -> str | None:
        """Label of the known construction equal to one of `forms` (a construction's normal forms), or None."""
        for f in forms:
            fm = _msq(f)
            for label, g, m in self._by_shape.get(f.shape, []):
                if _same(f, fm, g, m, self.tol):
                    return label
        return None

    @classmethod
    def for_task(cls, task: Task, files: tuple[str, ...] | list[str] = ()) -> Known:
        """The task's published references plus every valid construction in `files` (any format
        `ttlab discover verify` reads). A file that cannot be read raises ValueError naming it."""
        known = cls(task)
        for name, x in task.references():
            known.add(f"reference:{name}", x)
        for path in files:
            try:
                items = load_constructions(Path(path))
            except (OSError, ValueError) as e:
                raise ValueError(f"--known {path}: {e}") from e
            for name, arr, *_ in items:
                res = task.verify(arr)
                if res.valid:
                    known.add(f"known:{Path(path).name}:{name}", res.construction)
        return known


class Judge:
    """Provenance of every verified result of one run: its known constructions and its tree."""

    def __init__(self, task: Task, known: Known) -> None:
        self.task, self.known = task, known
        self._forms: dict[str, tuple[np.ndarray, float]] = {}  # state id -> (normal form, mean square); ids never reused

    def _form(self, node: Node) -> tuple[np.ndarray, float]:
        if node.id not in self._forms:
            g = self.task.normal_forms(node.array())[0]
            self._forms[node.id] = (g, _msq(g))
        return self._forms[node.id]

    def judge(self, tree: PUCTTree, parent_id: str | None, construction: np.ndarray, code: str) -> Provenance:
        """The provenance of a VALID construction a program returned from state `parent_id`."""
        prog = program_hash(code)
        forms = self.task.normal_forms(construction)
        hit = self.known.match(forms)
        if hit is not None:
            return Provenance(prog, parent_id, "copy", hit)
        near: set[str] = set()
        if parent_id in tree.nodes:
            near = set(tree.lineage(parent_id)) | set(tree.descendants(parent_id))
        same = ""
        shapes = {f.shape for f in forms}
        fms = [(f, _msq(f)) for f in forms]
        for nid, node in tree.nodes.items():
            g, m = self._form(node)
            if g.shape not in shapes or not any(_same(f, fm, g, m, self.known.tol) for f, fm in fms):
                continue
            if nid not in near:
                return Provenance(prog, parent_id, "copy", f"tree:{nid}")
            same = same or f"tree:{nid}"
        return Provenance(prog, parent_id, "same", same) if same else Provenance(prog, parent_id, "new")

    def failed(self, parent_id: str | None, code: str) -> Provenance:
        """The provenance of a result that did not verify."""
        return Provenance(program_hash(code), parent_id, "failed")
