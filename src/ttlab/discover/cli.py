"""`ttlab discover ...` command tree. Each command parses its own dataclass config."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from ttlab.common.cli import dispatch
from ttlab.common.config import parse_config


@dataclass
class VerifyConfig:
    """Verify a construction file: `ttlab discover verify TASK FILE`."""

    task: tyro.conf.Positional[str] = "erdos"
    """erdos | ac1 | ac2 | circle26 | circle32."""
    file: tyro.conf.Positional[Path] = Path("")
    """JSON (a list, {"h": [...]}, {"construction": [...]}, or an Erdős reference file) or .npy."""
    claim: str = ""
    """Erdős only: a claimed C5 (decimal) to check in exact rational arithmetic."""


def load_constructions(path: Path) -> list[tuple[str, object, float | None]]:
    """(name, array-like, published score or None) for every construction in the file."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix == ".npy":
        return [(path.name, np.load(path, allow_pickle=False), None)]
    try:
        d = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from e
    if isinstance(d, list):
        return [(path.name, d, None)]
    if isinstance(d, dict) and "constructions" in d:
        return [(c.get("name", f"#{i}"), c.get("h", c.get("construction")), c.get("c5", c.get("score")))
                for i, c in enumerate(d["constructions"])]
    if isinstance(d, dict):
        for key in ("construction", "h", "f", "circles"):
            if key in d:
                return [(path.name, d[key], d.get("score"))]
    raise ValueError(f"{path}: expected a list, or a dict with 'construction'/'h'/'f'/'circles'/'constructions'")


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
    for name, arr, published in items:
        res = task.verify(arr, published)
        line = f"{name}: {'VALID' if res.valid else 'INVALID'}  {res.message}"
        if published is not None and res.valid:
            line += f"  (published {published}, diff {res.score - float(published):+.3e})"
        print(line)
        bad += not res.valid
        if cfg.claim and task.name == "erdos" and res.valid:
            from ttlab.discover.tasks.erdos import check_record

            ok, _, msg = check_record(np.asarray(arr, dtype=np.float64), cfg.claim)
            print(f"  exact check of claim {cfg.claim}: {'HOLDS' if ok else 'FAILS'} ({msg})")
            bad += not ok
    return 1 if bad else 0


def cmd_search(argv: list[str]) -> int:
    from ttlab.discover.loop import PRESETS, SearchConfig, run_search

    cfg = parse_config(SearchConfig, PRESETS, argv=argv, prog="ttlab discover search")
    rec = run_search(cfg)
    return 0 if rec.get("valid") else 1


def cmd_train(argv: list[str]) -> int:
    from ttlab.discover.llm.trainer import main_train

    return main_train(argv)


COMMANDS: dict = {
    "verify": (cmd_verify, "verify a construction file (every score recomputed; --claim for an exact record check)"),
    "search": (cmd_search, "PUCT discovery search with the offline program library or an HTTP LLM server (--proposer, --budget, --resume)"),
    "train": (cmd_train, "test-time training of an LLM (LoRA, entropic GRPO) on a task (--model smollm2-135m | HF dir | .gguf, --preset cpu_smollm2, --resume)"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("ttlab discover", COMMANDS, argv)
