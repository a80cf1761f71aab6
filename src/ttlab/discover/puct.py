"""PUCT state tree (TTT-Discover's state reuse): which constructions to expand next.

    score(s) = Q(s) + c * scale * P(s) * sqrt(1 + T) / (1 + n(s))

Q(s): best reward among s's children (s's own reward before it has any child); P(s): linear rank prior,
P = (N - rank) / (N (N + 1) / 2) with rank 0 for the highest Q; scale = max R - min R over the tree (1 when
all equal); n(s): expansions of s or of any descendant (an expansion counts on the parent and on every
ancestor, failed ones included); T: total expansions. Rewards are higher-is-better.

`select(k)` is deterministic: highest score first, and each pick blocks its whole lineage (ancestors and
descendants) so one batch explores k different branches. `flush()` keeps the `keep_children` best children
per parent (ranked by best reward in their subtree) and the `max_roots` best roots. JSON save/load resumes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Node:
    """One state: a verified construction and where it came from."""

    id: str
    construction: list[float]
    reward: float
    score: float
    parent_id: str | None = None
    code: str = ""
    stdout: str = ""
    depth: int = 0
    n: int = 0
    best_child: float | None = None
    children: list[str] = field(default_factory=list)
    created: int = 0
    shape: list[int] = field(default_factory=list)
    program: str = ""
    """Hash of the program that produced it (`provenance.program_hash`; '' for a root)."""

    def array(self) -> np.ndarray:
        return np.asarray(self.construction, dtype=np.float64).reshape(self.shape or [-1])


def construction_key(x: np.ndarray) -> str:
    """Dedup key: hash of the shape and the values rounded to 12 significant digits."""
    a = np.asarray(x, dtype=np.float64)
    r = np.array([float(f"{v:.12g}") for v in a.ravel()]) if a.size < 4096 else np.round(a.ravel(), 12)
    return hashlib.sha1(repr(a.shape).encode() + r.tobytes()).hexdigest()[:20]


def puct_score(q: float, prior: float, n: int, total: int, c: float, scale: float) -> float:
    """Q + c * scale * P * sqrt(1 + T) / (1 + n)."""
    return q + c * scale * prior * math.sqrt(1.0 + total) / (1.0 + n)


def rank_priors(values: list[float]) -> list[float]:
    """Linear rank prior: best value gets N, worst 1, normalised to sum 1 (ties broken by order)."""
    n = len(values)
    order = sorted(range(n), key=lambda i: -values[i])
    z = n * (n + 1) / 2
    pri = [0.0] * n
    for rank, i in enumerate(order):
        pri[i] = (n - rank) / z
    return pri


class PUCTTree:
    """The state tree. Node ids are strings `s<k>`; all bookkeeping is plain JSON."""

    def __init__(self, c: float = 1.0, keep_children: int = 8, max_roots: int = 16) -> None:
        self.c, self.keep_children, self.max_roots = c, keep_children, max_roots
        self.nodes: dict[str, Node] = {}
        self.keys: dict[str, str] = {}
        self.total = 0
        self.counter = 0
        self.step = 0

    # ---- building ----
    def _new(self, x: np.ndarray, reward: float, score: float, parent: Node | None, code: str, stdout: str,
             program: str = "") -> Node | None:
        key = construction_key(x)
        if key in self.keys:
            return None
        nid = f"s{self.counter}"
        self.counter += 1
        a = np.asarray(x, dtype=np.float64)
        node = Node(nid, a.ravel().tolist(), float(reward), float(score), parent.id if parent else None, code,
                    stdout[-2000:], parent.depth + 1 if parent else 0, created=self.step, shape=list(a.shape),
                    program=program)
        self.nodes[nid] = node
        self.keys[key] = nid
        return node

    def add_root(self, x: np.ndarray, reward: float, score: float, code: str = "") -> Node | None:
        return self._new(x, reward, score, None, code, "")

    def lineage(self, nid: str) -> list[str]:
        """nid and its ancestors, nearest first."""
        out = []
        cur: str | None = nid
        while cur is not None and cur in self.nodes:
            out.append(cur)
            cur = self.nodes[cur].parent_id
        return out

    def record_expansion(self, parent_id: str) -> None:
        """One expansion of parent_id (valid or failed): n += 1 on it and every ancestor, T += 1."""
        for a in self.lineage(parent_id):
            self.nodes[a].n += 1
        self.total += 1

    def credit(self, parent_id: str, reward: float) -> None:
        """A valid child's reward reaches its parent's Q (also when the child is not kept as a new state)."""
        parent = self.nodes[parent_id]
        pb = parent.best_child
        parent.best_child = float(reward) if pb is None else max(pb, float(reward))

    def add_child(self, parent_id: str, x: np.ndarray, reward: float, score: float, code: str = "",
                  stdout: str = "", program: str = "") -> Node | None:
        """Add a verified child (None when it duplicates a known state). Call `record_expansion` too."""
        parent = self.nodes[parent_id]
        self.credit(parent_id, reward)
        node = self._new(x, reward, score, parent, code, stdout, program)
        if node is not None:
            parent.children.append(node.id)
        return node

    # ---- scoring and selection ----
    def q(self, node: Node) -> float:
        return node.reward if node.best_child is None else node.best_child

    def scores(self) -> dict[str, float]:
        ids = list(self.nodes)
        if not ids:
            return {}
        qs = [self.q(self.nodes[i]) for i in ids]
        rs = [self.nodes[i].reward for i in ids]
        scale = (max(rs) - min(rs)) or 1.0
        pri = rank_priors(qs)
        return {i: puct_score(qs[k], pri[k], self.nodes[i].n, self.total, self.c, scale) for k, i in enumerate(ids)}

    def descendants(self, nid: str) -> list[str]:
        out, stack = [], list(self.nodes[nid].children)
        while stack:
            c = stack.pop()
            if c in self.nodes:
                out.append(c)
                stack.extend(self.nodes[c].children)
        return out

    def select(self, k: int, roots_first: bool = False) -> list[Node]:
        """Top-k by PUCT score, each pick blocking its ancestors and descendants (may return fewer). With
        `roots_first`, roots never expanded come first, oldest first (independent tries from every start)."""
        if roots_first:
            fresh = sorted((n for n in self.nodes.values() if n.parent_id is None and n.n == 0),
                           key=lambda n: (n.created, int(n.id[1:])))
            if fresh:
                return fresh[:k]
        sc = self.scores()
        order = sorted(sc, key=lambda i: (-sc[i], self.nodes[i].created, int(i[1:])))
        blocked: set[str] = set()
        out: list[Node] = []
        for i in order:
            if len(out) >= k:
                break
            if i in blocked:
                continue
            out.append(self.nodes[i])
            blocked.update(self.lineage(i))
            blocked.update(self.descendants(i))
        return out

    def best(self) -> Node | None:
        return max(self.nodes.values(), key=lambda n: (n.reward, -n.created), default=None)

    # ---- pruning ----
    def _subtree_best(self, nid: str) -> float:
        return max([self.nodes[nid].reward] + [self.nodes[d].reward for d in self.descendants(nid)])

    def _drop(self, nid: str) -> None:
        for d in [nid] + self.descendants(nid):
            node = self.nodes.pop(d, None)
            if node is not None:
                self.keys.pop(construction_key(node.array()), None)

    def flush(self) -> int:
        """End of a step: keep top children per parent and top roots. Returns how many nodes were dropped."""
        before = len(self.nodes)
        for node in list(self.nodes.values()):
            if node.id not in self.nodes:
                continue
            kids = [c for c in node.children if c in self.nodes]
            kids.sort(key=lambda c: -self._subtree_best(c))
            for c in kids[self.keep_children:]:
                self._drop(c)
            node.children = kids[: self.keep_children]
        roots = sorted((n.id for n in self.nodes.values() if n.parent_id is None), key=lambda r: -self._subtree_best(r))
        for r in roots[self.max_roots:]:
            self._drop(r)
        self.step += 1
        return before - len(self.nodes)

    # ---- persistence ----
    def to_json(self) -> dict:
        return {"c": self.c, "keep_children": self.keep_children, "max_roots": self.max_roots, "total": self.total,
                "counter": self.counter, "step": self.step, "nodes": [asdict(n) for n in self.nodes.values()]}

    @classmethod
    def from_json(cls, d: dict) -> PUCTTree:
        t = cls(float(d["c"]), int(d["keep_children"]), int(d["max_roots"]))
        t.total, t.counter, t.step = int(d["total"]), int(d["counter"]), int(d["step"])
        for nd in d["nodes"]:
            node = Node(**nd)
            t.nodes[node.id] = node
            t.keys[construction_key(node.array())] = node.id
        return t

    def save(self, path: str | Path) -> None:
        path = Path(path)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_json()))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> PUCTTree:
        try:
            return cls.from_json(json.loads(Path(path).read_text()))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a PUCT tree file ({type(e).__name__}: {e})") from e
