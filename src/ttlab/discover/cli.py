"""`ttlab discover ...` command tree. Each command parses its own dataclass config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from ttlab.common.cli import dispatch
from ttlab.common.config import parse_config
from ttlab.discover.constructions import load_constructions


@dataclass
class VerifyConfig:
    """Verify a construction file: `ttlab discover verify TASK FILE`."""

    task: tyro.conf.Positional[str] = "erdos"
    """erdos | ac1 | ac2 | circle26 | circle32."""
    file: tyro.conf.Positional[Path] = Path("")
    """JSON (a list; {"h": [...]}; {"construction": [...]}; the seed/reference program output
    {"h_values": [...], "c5_bound": ..., "n_points": ...}; an Erdős reference file) or .npy."""
    claim: str = ""
    """Erdős only: a claimed C5 (decimal) to check in exact rational arithmetic."""
    exact_timeout_s: float = 60.0
    """Deadline of the exact check (--claim), run in a worker process."""


def _as_number(v: object) -> float | None:
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def cmd_verify(argv: list[str]) -> int:
    from ttlab.discover.tasks import get_task

    cfg = parse_config(VerifyConfig, argv=argv, prog="ttlab discover verify")
    if not str(cfg.file) or str(cfg.file) == ".":
        print("ttlab discover verify: FILE is required (usage: ttlab discover verify TASK FILE)")
        return 2
    try:
        task = get_task(cfg.task)
        items = load_constructions(cfg.file)
    except (ValueError, OSError) as e:
        print(f"ttlab discover verify: {e}")
        return 2
    bad = 0
    for name, arr, published, extra in items:
        n_points = extra.get("n_points")
        if n_points is not None and (_as_number(n_points) is None or np.ndim(arr) != 1 or len(arr) != _as_number(n_points)):
            print(f"{name}: INVALID  n_points={n_points!r} does not match h_values ({np.shape(arr)})")
            bad += 1
            continue
        res = task.verify(arr, _as_number(published))
        line = f"{name}: {'VALID' if res.valid else 'INVALID'}  {res.message}"
        claimed = _as_number(published)
        if published is not None and res.valid:
            what = "reported" if extra.get("reported_key") else "published"
            line += (f"  ({what} {extra.get('reported_key', 'score')} {published} (not trusted), recomputed "
                     f"{res.score:.12g}, diff {claimed - res.score:+.3e})" if claimed is not None
                     else f"  ({what} score {published!r} is not a number)")
        print(line)
        bad += not res.valid
        if cfg.claim and task.name == "erdos" and res.valid:
            from ttlab.discover.tasks.erdos import exact_c5_bounded

            c, feasible, msg = exact_c5_bounded(np.asarray(arr, dtype=np.float64), cfg.exact_timeout_s)
            if c is None:
                print(f"  exact check of claim {cfg.claim}: NOT DONE ({msg})")
                bad += 1
                continue
            from fractions import Fraction

            ok = feasible and c <= Fraction(cfg.claim)
            print(f"  exact check of claim {cfg.claim}: {'HOLDS' if ok else 'FAILS'} (exact C5 = {float(c):.15f}; {msg})")
            bad += not ok
    return 1 if bad else 0


def cmd_search(argv: list[str]) -> int:
    from ttlab.discover.loop import PRESETS, SearchConfig, run_search

    cfg = parse_config(SearchConfig, PRESETS, argv=argv, prog="ttlab discover search")
    try:
        rec = run_search(cfg)
    except ValueError as e:
        print(f"ttlab discover search: {e}")
        return 2
    return 0 if rec.get("valid") else 1


def cmd_train(argv: list[str]) -> int:
    from ttlab.discover.llm.trainer import main_train

    return main_train(argv)


def cmd_polish(argv: list[str]) -> int:
    from ttlab.discover.polish import main as polish_main

    return polish_main(argv)


COMMANDS: dict = {
    "verify": (cmd_verify, "verify a construction file (every score recomputed; --claim for an exact record check)"),
    "search": (cmd_search, "PUCT discovery search with the offline program library or an HTTP LLM server (--proposer, --budget, --resume)"),
    "polish": (cmd_polish, "improve a given construction with a sandboxed optimiser, every round re-verified (--budget, --upsample, --claim)"),
    "train": (cmd_train, "test-time training of an LLM (LoRA, entropic GRPO) on a task (--model smollm2-135m | HF dir | .gguf, --preset cpu_smollm2, --resume)"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("ttlab discover", COMMANDS, argv)
