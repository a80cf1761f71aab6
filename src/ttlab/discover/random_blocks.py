"""A proposer with no model: programs that compose the `erdos_blocks` building blocks with random choices.

The baseline an LLM that writes block programs must beat. Each proposal is a complete program, the kind
an LLM could write from the blocks prompt (`prompts.BLOCKS_API`), drawn from a small grammar:

    start   the parent as is | the parent coarsened (block averages of 2-8 pieces) | random multistart at
            n0 pieces (rough or smooth profiles); optionally mirror-averaged
    stages  1-3 of: basin hopping (monotone or Metropolis, random window/sigma/symmetry), doubling then
            hopping, continuation from tau0, a converge at the fine temperatures, exact LP steps (n <= 300)
    finish  doublings up to max_n (re-converged while time lasts), then the exact feasibility repair

Programs print nothing but `eb.report` (the CPU accounting line): no stage logs its C5, which keeps a program
short (median ~190 tokens, at most ~320 with SmolLM2's tokenizer), the length a small model warm-started on
this grammar has to learn to write and to stop.

Every number (sizes, temperatures, move scales, the fraction of the budget each stage ends at) is drawn at
random; the structure (which start, how many and which stages, in what order) too. Nothing is tuned to a
parent: the proposer ignores the state it is asked to expand except to hand it to the program.
"""

from __future__ import annotations

import numpy as np

from ttlab.discover.proposers import Proposal, Proposer
from ttlab.discover.puct import Node

HEAD = ("import numpy as np\n"
        "import erdos_blocks as eb\n\n\n"
        "def solve(parent, budget_s, seed):\n"
        "    rng = np.random.default_rng(seed)\n"
        "    clock = eb.Clock(budget_s{wall})\n"
        "    h = eb.normalise(np.asarray(parent, dtype=float))\n")
TAIL = ("    h, c = eb.refine(h, clock.until(0.9), {max_n}, to_max=True)\n"
        "    eb.report(clock)\n"
        "    return eb.finish(h)\n")
STAGES = ("hop", "up_hop", "continuation", "converge", "lp")
MAX_N = (204, 408, 816, 1632)


def _logu(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _sig(x: float) -> str:
    return f"{x:.3g}"


def _stage(kind: str, end: float, rng: np.random.Generator, choices: dict) -> str:
    """One stage's source line(s), ending at fraction `end` of the budget."""
    until = f"clock.until({end:.3g})"
    if kind in ("hop", "up_hop"):
        temp = 0.0 if rng.uniform() < 0.5 else _logu(rng, 1e-6, 1e-4)
        sym = float(rng.choice([0.0, 0.0, 0.15, 0.5]))
        sigma, window = _logu(rng, 0.05, 0.6), float(rng.uniform(0.05, 0.5))
        choices.setdefault("stages", []).append({"kind": kind, "end": round(end, 3), "temperature": temp, "sym": sym,
                                                 "sigma": round(sigma, 3), "window": round(window, 3)})
        x = "eb.upsample(h, 2)" if kind == "up_hop" else "h"
        return (f"    h, c, hops = eb.hop({x}, {until}, rng, temperature={_sig(temp)}, sym={sym}, "
                f"sigma={_sig(sigma)}, window={_sig(window)})\n")
    if kind == "continuation":
        tau0 = _logu(rng, 1e-7, 1e-3)
        choices.setdefault("stages", []).append({"kind": kind, "end": round(end, 3), "tau0": tau0})
        return f"    h, c = eb.continuation(h, {until}, tau0={_sig(tau0)})\n"
    if kind == "converge":
        choices.setdefault("stages", []).append({"kind": kind, "end": round(end, 3)})
        return f"    h, c = eb.converge(h, {until}, eb.FINE_TAUS, \"scaled\", 1e-15)\n"
    delta = _logu(rng, 0.002, 0.05)
    choices.setdefault("stages", []).append({"kind": kind, "end": round(end, 3), "delta": delta})
    return (f"    if h.size <= 300:\n"
            f"        h, c, steps = eb.lp_polish(h, {until}, delta={_sig(delta)})\n")


def random_program(rng: np.random.Generator, wall_factor: float = 1.0) -> tuple[str, dict]:
    """(source, the choices it was drawn with)."""
    choices: dict = {}
    src = HEAD.format(wall="" if wall_factor == 1.0 else f", wall_factor={wall_factor:g}")
    start = str(rng.choice(["parent", "coarse", "multistart", "multistart"]))
    choices["start"] = start
    t = 0.0
    if start == "coarse":
        f = int(rng.choice([2, 4, 8]))
        choices["coarsen"] = f
        src += f"    h = eb.coarsen(h, {f})\n"
    elif start == "multistart":
        n0 = int(round(_logu(rng, 24, 128)))
        tau = _logu(rng, 1e-3, 0.05)
        shape = str(rng.choice(["random_start", "smooth_start"]))
        t = float(rng.uniform(0.03, 0.3))
        choices.update(n0=n0, tau=tau, shape=shape, start_end=round(t, 3))
        src += f"    h, c = eb.multistart({n0}, clock.until({t:.3g}), rng, tau={_sig(tau)}, start=eb.{shape})\n"
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


class RandomBlocksProposer(Proposer):
    """`n` random block programs per state (Erdős only: the blocks are Erdős blocks)."""

    def __init__(self, task: str = "erdos", seed: int = 0, wall_factor: float = 1.0) -> None:
        if task != "erdos":
            raise ValueError(f"--proposer random_blocks: the building blocks are for erdos, not {task!r}")
        self.rng = np.random.default_rng(seed)
        self.wall_factor = float(wall_factor)

    def propose(self, states: list[Node], n: int) -> list[Proposal]:
        out = []
        for s in states:
            for _ in range(n):
                code, choices = random_program(self.rng, self.wall_factor)
                out.append(Proposal(s.id, code, {"program": "random_blocks", "choices": choices}))
        return out
