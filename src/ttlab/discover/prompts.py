"""Prompt builder and code extractor shared by every proposer that talks to a language model.

The prompt shows: the problem statement (with the program contract), the parent state's program (head and
tail when long), its score and the score of its own parent (before -> after), the tail of its stdout, and
the instructions. `extract_code` takes the LAST fenced python block of a reply and is robust to garbage
(no fence, unterminated fence, think blocks, non-python fences): it returns None rather than raising.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ttlab.discover.tasks.base import Task


@dataclass(frozen=True)
class PromptState:
    """What the prompt needs to know about the parent state."""

    code: str = ""
    score: float | None = None
    parent_score: float | None = None
    stdout: str = ""


def head_tail(text: str, max_lines: int = 120, head: int = 80) -> str:
    """The first `head` and last `max_lines - head` lines, with a marker for what was cut."""
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return text
    cut = len(lines) - max_lines
    return "\n".join(lines[:head] + [f"# ... {cut} lines omitted ..."] + lines[-(max_lines - head):])


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.9g}"


def build_prompt(task: Task, state: PromptState, max_code_lines: int = 120, stdout_chars: int = 1500) -> str:
    direction = "higher" if task.higher_is_better else "lower"
    parts = [task.problem_statement(), ""]
    if state.code.strip():
        parts += ["## Current program", "", "```python", head_tail(state.code.rstrip(), max_code_lines), "```", ""]
    if state.score is not None:
        parts += [f"Score of the current construction: {_fmt(state.parent_score)} -> {_fmt(state.score)} "
                  f"({direction} is better; the arrow is its parent's score -> its own).", ""]
    if state.stdout.strip():
        tail = state.stdout[-stdout_chars:]
        parts += ["## Tail of its output", "", "```", tail.rstrip(), "```", ""]
    parts += [
        "## Instructions",
        f"Improve on the current construction ({direction} score is better). `parent` will be the current "
        "construction. Think briefly, then give ONE complete program in a single ```python block that "
        "defines `solve(parent, budget_s, seed)` and returns the construction. Stay within budget_s seconds.",
    ]
    return "\n".join(parts)


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.S)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except (SyntaxError, ValueError):
        return False


def extract_code(text: str | None) -> str | None:
    """The last python code block in `text` that parses, or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    text = _THINK.sub("", text.replace("\r\n", "\n"))
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    py = [b for lang, b in blocks if lang in ("python", "py", "python3")]
    others = [b for lang, b in blocks if lang == ""]
    for body in reversed(py) or []:
        if body.strip() and _parses(body):
            return body.strip() + "\n"
    for body in reversed(others):
        if body.strip() and _parses(body) and "def " in body:
            return body.strip() + "\n"
    if not blocks and "def " in text and _parses(text):
        return text.strip() + "\n"
    return None


# ---- the compact prompt (small models, CPU) ---------------------------------------------------------
SHORT_STATEMENTS = {
    "erdos": ("Erdős minimum overlap: find h, a numpy array of n floats in [0, 1] with sum(h) = n / 2, "
              "minimising C5 = max(np.correlate(h, 1 - h, \"full\")) * 2 / n. Lower is better."),
}


ANSWER_HEAD = ("import time\n"
               "import numpy as np\n\n\n"
               "def solve(parent, budget_s, seed):\n"
               "    rng = np.random.default_rng(seed)\n"
               "    h = np.array(parent, dtype=float)\n")
"""Compact format: the answer starts with these lines (given to the model after the chat template's
assistant turn opens); the model writes the rest of `solve` - transforms, search loop, return."""


def answer_prefix(task: Task) -> str:
    """The text the assistant's answer starts with in the compact format (the model continues it)."""
    del task
    return "```python\n" + ANSWER_HEAD


def root_program(task: Task) -> str:
    """The program shown for a tree root (a construction no program wrote): return the parent unchanged."""
    del task
    return ANSWER_HEAD + "    return h\n"


def build_compact_prompt(task: Task, state: PromptState, max_code_lines: int = 40) -> str:
    """A short prompt (~100 tokens + the parent program) for small models: one-paragraph problem, the
    parent's program and score, one instruction. Roots show `root_program` (the identity)."""
    statement = SHORT_STATEMENTS.get(task.name) or task.problem_statement().split("\n\n")[0]
    code = state.code.strip() or root_program(task).strip()
    score = "n/a" if state.score is None else f"{state.score:.6g}"
    return (f"{statement}\n\nCurrent program (score {score}):\n```python\n"
            f"{head_tail(code, max_code_lines, max_code_lines // 2)}\n```\n\n"
            "Write a new solve(parent, budget_s, seed) that improves the parent h within budget_s seconds "
            "and returns the new h. Answer with one ```python block.")


# ---- the blocks prompt: compose the sandbox's building blocks (Erdős) ---------------------------------
BLOCKS_API = """\
Blocks (import erdos_blocks as eb; h: array of n pieces in [0, 1]; c5: its score):
clock = eb.Clock(budget_s)  the time; clock.until(f): up to fraction f of it; clock.sub(s): next s seconds
eb.random_start(n, rng), eb.smooth_start(n, rng)  random h of n pieces (n 30-120)
eb.multistart(n, clock, rng, tau=0.01) -> h, c5  best solved random start
eb.coarsen(h, f), eb.upsample(h, 2), eb.symmetrise(h)  fewer pieces, more pieces (same c5), mirror
eb.continuation(h, clock, tau0=1e-6) -> h, c5  smoothed minimax from temperature tau0
eb.hop(h, clock, rng, temperature=0.0, sym=0.0, sigma=0.3, window=0.15) -> h, c5, hops
  basin hopping; temperature > 0 (e.g. 5e-6) also takes uphill hops; fast at n <= 200
eb.lp_polish(h, clock) -> h, c5, steps  exact minimax LP steps (slow above n = 300)
eb.refine(h, clock, max_n) -> h, c5  double and re-solve up to max_n pieces (more pieces: lower c5)
eb.normalise(h), eb.finish(h), eb.c5(h)  feasible h; the h to return; its score"""

BLOCKS_HEAD = ("import numpy as np\n"
               "import erdos_blocks as eb\n\n\n"
               "def solve(parent, budget_s, seed):\n"
               "    rng = np.random.default_rng(seed)\n"
               "    clock = eb.Clock(budget_s)\n"
               "    h = eb.normalise(np.asarray(parent, dtype=float))\n")
"""Blocks format: the answer starts with these lines; the model composes and tunes the blocks after them."""


def blocks_answer_prefix(task: Task) -> str:
    del task
    return "```python\n" + BLOCKS_HEAD


def blocks_root_program(task: Task) -> str:
    """The program shown for a tree root in the blocks format: return the parent, finished."""
    del task
    return BLOCKS_HEAD + "    return eb.finish(h)\n"


def build_blocks_prompt(task: Task, state: PromptState, max_code_lines: int = 40) -> str:
    """The compact prompt plus the blocks API (~400 tokens with SmolLM2's tokenizer): the model writes a program that imports
    `erdos_blocks` and composes its blocks (still free code: anything else numpy/scipy allow works too).
    Erdős only (the blocks are Erdős blocks); the sandbox must be able to import them (`blocks.with_blocks`)."""
    if task.name != "erdos":
        raise ValueError(f"prompt format 'blocks': the building blocks are for erdos, not {task.name!r}")
    code = state.code.strip() or blocks_root_program(task).strip()
    score = "n/a" if state.score is None else f"{state.score:.6g}"
    return (f"{SHORT_STATEMENTS['erdos']}\n\n{BLOCKS_API}\n\nCurrent program (score {score}):\n```python\n"
            f"{head_tail(code, max_code_lines, max_code_lines // 2)}\n```\n\n"
            "Write a new solve(parent, budget_s, seed) that composes the blocks to improve the parent h within "
            "budget_s seconds and returns eb.finish(h). Answer with one ```python block.")


PROMPT_FORMATS = {"full": build_prompt, "compact": build_compact_prompt, "blocks": build_blocks_prompt}
ANSWER_PREFIXES = {"full": lambda task: "", "compact": answer_prefix, "blocks": blocks_answer_prefix}
