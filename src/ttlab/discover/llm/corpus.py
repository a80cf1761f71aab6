"""Short Erdős programs for the supervised warm start, drawn from a small grammar.

The program library (`ttlab/discover/library/erdos_*.py`) holds three 50-70 line optimisers (~600-900
tokens each): too long for a 135M model to reproduce and too slow to train on with 2 CPU cores. The
warm-start corpus keeps their ideas (mass-preserving moves with first-improvement acceptance, annealed
acceptance, a smooth-max gradient step with projection back to sum n/2, up-sampling and smoothing of the
parent) as short programs (~100-250 tokens) composed from parts:

    PROGRAM_HEAD (imports, rng, copy of the parent)  +  0-2 pre-transforms (upsample / smooth / symmetrise)
    +  one search loop (pair move / block move / annealing / window noise / smooth-max gradient)
    +  return

with every numeric setting drawn at random (log-uniform around a sensible value) and the loop bound
either by wall time or by an iteration count. Not every draw is a good program: some settings make the
search stall, some transforms lose feasibility (the verifier then rejects the construction) - on
purpose, so the warm-started model still has something to learn from the verifier.
"""

from __future__ import annotations

import numpy as np

C5_FN = "    c5 = lambda x: np.max(np.correlate(x, 1 - x, \"full\"))\n"

PRE = {
    "upsample": "    h = np.repeat(h, 2)\n",
    "smooth": "    h = np.convolve(h, np.ones({k}) / {k}, \"same\")\n",
    "symmetrise": "    h = (h + h[::-1]) / 2\n",
}

LOOPS = {
    "pair": (
        "    best = c5(h)\n"
        "{head}"
        "        i, j = rng.integers(n, size=2)\n"
        "        d = {step} * rng.standard_normal()\n"
        "        g = h.copy()\n"
        "        g[i] += d\n"
        "        g[j] -= d\n"
        "        if g.min() < 0 or g.max() > 1:\n"
        "            continue\n"
        "        v = c5(g)\n"
        "        if v < best:\n"
        "            h, best = g, v\n"
    ),
    "block": (
        "    best = c5(h)\n"
        "{head}"
        "        i, j = rng.integers(n - {w}, size=2)\n"
        "        d = {step} * rng.standard_normal()\n"
        "        g = h.copy()\n"
        "        g[i:i + {w}] += d\n"
        "        g[j:j + {w}] -= d\n"
        "        if g.min() < 0 or g.max() > 1:\n"
        "            continue\n"
        "        v = c5(g)\n"
        "        if v < best:\n"
        "            h, best = g, v\n"
    ),
    "anneal": (
        "    cur = c5(h)\n"
        "    temp = {temp}\n"
        "{head}"
        "        i, j = rng.integers(n, size=2)\n"
        "        d = {step} * rng.standard_normal()\n"
        "        g = h.copy()\n"
        "        g[i] += d\n"
        "        g[j] -= d\n"
        "        if g.min() < 0 or g.max() > 1:\n"
        "            continue\n"
        "        v = c5(g)\n"
        "        if v < cur or rng.random() < np.exp((cur - v) / temp):\n"
        "            h, cur = g, v\n"
        "        temp *= {decay}\n"
    ),
    "noise": (
        "    best = c5(h)\n"
        "{head}"
        "        i = rng.integers(n - {w})\n"
        "        g = h.copy()\n"
        "        g[i:i + {w}] += {step} * rng.standard_normal({w})\n"
        "        g = np.clip(g, 0, 1)\n"
        "        g = g * h.sum() / g.sum()\n"
        "        if g.max() > 1:\n"
        "            continue\n"
        "        v = c5(g)\n"
        "        if v < best:\n"
        "            h, best = g, v\n"
    ),
    "gradient": (
        "{head}"
        "        c = np.correlate(h, 1 - h, \"full\") * 2 / n\n"
        "        w = np.exp((c - c.max()) / {tau})\n"
        "        w /= w.sum()\n"
        "        grad = np.convolve(w, 1 - h)[n - 1:2 * n - 1] - np.correlate(w, h, \"full\")[n - 1:2 * n - 1][::-1]\n"
        "        h = np.clip(h - {lr} * grad / (np.abs(grad).max() + 1e-12), 0, 1)\n"
        "        h = h * (n / 2) / h.sum()\n"
    ),
}

HEADS = {
    "time": ("    end = time.time() + {frac} * budget_s\n"
             "    while time.time() < end:\n"),
    "iters": "    for _ in range({iters}):\n",
}


PROGRAM_HEAD = ("import time\n"
                "import numpy as np\n\n\n"
                "def solve(parent, budget_s, seed):\n"
                "    rng = np.random.default_rng(seed)\n"
                "    h = np.array(parent, dtype=float)\n")
"""The first lines every grammar program shares; the compact format gives them as the answer's prefix."""


def _logu(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def sample_program(rng: np.random.Generator, family: str | None = None) -> tuple[str, dict]:
    """One program and its recipe ({'loop', 'head', 'pre', settings...})."""
    loop = family or str(rng.choice(list(LOOPS)))
    if loop not in LOOPS:
        raise ValueError(f"unknown program family {loop!r}; expected one of {sorted(LOOPS)}")
    head = "time" if rng.random() < 0.7 else "iters"
    pre = [p for p in ("upsample", "smooth", "symmetrise") if rng.random() < 0.15]
    s = {"step": _fmt(_logu(rng, 0.005, 0.1)), "w": int(rng.integers(2, 9)), "temp": _fmt(_logu(rng, 1e-6, 1e-4)),
         "decay": _fmt(1 - _logu(rng, 1e-5, 1e-3)), "tau": _fmt(_logu(rng, 1e-4, 3e-3)),
         "lr": _fmt(_logu(rng, 1e-3, 3e-2)), "frac": _fmt(rng.uniform(0.5, 0.9)),
         "iters": int(_logu(rng, 200, 3000)), "k": int(rng.integers(2, 6))}
    if loop == "gradient":
        s["iters"] = int(_logu(rng, 50, 800))
    body = LOOPS[loop].replace("{head}", HEADS[head])
    lines = [PROGRAM_HEAD]
    lines += [PRE[p] for p in pre]
    if pre:
        lines.append("    h = np.clip(h, 0, 1)\n")
    lines += ["    n = h.size\n", "" if loop == "gradient" else C5_FN, body, "    return h\n"]
    code = "".join(lines).format(**s)
    return code, {"loop": loop, "head": head, "pre": pre, **s}


def mutate_program(rng: np.random.Generator, recipe: dict) -> tuple[str, dict]:
    """A program of the same loop family as `recipe` with fresh settings (the copy-and-edit move)."""
    return sample_program(rng, recipe["loop"])
