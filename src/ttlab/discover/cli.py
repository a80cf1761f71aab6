"""`ttlab discover ...` command tree. Each command parses its own dataclass config."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ttlab.common.cli import dispatch
from ttlab.common.config import parse_config
from ttlab.common.errors import UserError
from ttlab.discover.config import PolishConfig, SearchConfig, TrainConfig, VerifyConfig
from ttlab.discover.constructions import load_constructions
from ttlab.discover.flags import check_polish, check_search, check_train
from ttlab.discover.llm.models import resolve_model
from ttlab.discover.llm.presets import TRAIN_PRESETS
from ttlab.discover.loop import run_search
from ttlab.discover.polish import run_polish
from ttlab.discover.presets import POLISH_PRESETS, SEARCH_PRESETS
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.erdos import exact_c5_bounded


def _as_number(v: object) -> float | None:
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def cmd_verify(argv: list[str]) -> int:
    cfg = parse_config(VerifyConfig, argv=argv, prog="ttlab discover verify")
    if cfg.file is None:
        raise UserError("FILE is required (usage: ttlab discover verify FILE [--task erdos])")
    task = get_task(cfg.task)
    items = load_constructions(cfg.file)
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
            c, feasible, msg = exact_c5_bounded(np.asarray(arr, dtype=np.float64), cfg.exact_timeout_s)
            if c is None:
                print(f"  exact check of claim {cfg.claim}: NOT DONE ({msg})")
                bad += 1
                continue
            ok = feasible and c <= Fraction(cfg.claim)
            print(f"  exact check of claim {cfg.claim}: {'HOLDS' if ok else 'FAILS'} (exact C5 = {float(c):.15f}; {msg})")
            bad += not ok
    return 1 if bad else 0


def cmd_search(argv: list[str]) -> int:
    cfg = parse_config(SearchConfig, SEARCH_PRESETS, argv=argv, prog="ttlab discover search")
    check_search(cfg)
    rec = run_search(cfg)
    return 0 if rec.get("valid") else 1


def cmd_polish(argv: list[str]) -> int:
    cfg = parse_config(PolishConfig, POLISH_PRESETS, argv=argv, prog="ttlab discover polish")
    if cfg.file is None:
        raise UserError("FILE is required (usage: ttlab discover polish FILE [--task erdos] [--time-limit 5m])")
    check_polish(cfg)
    rec = run_polish(cfg)
    claim = rec.get("exact", {}).get("claim")
    return 1 if claim is not None and not claim["holds"] else 0


def cmd_train(argv: list[str]) -> int:
    """`ttlab discover train --task erdos --model PATH --preset NAME [...]`."""
    cfg = parse_config(TrainConfig, TRAIN_PRESETS, argv=argv, prog="ttlab discover train")
    check_train(cfg)
    try:
        resolve_model(cfg.policy.model)
    except (OSError, ValueError, ImportError) as e:  # no such model, or a format whose optional reader is missing
        raise UserError(f"--model {cfg.policy.model}: {e}") from e
    # deferred on purpose: the trainer pulls in transformers and peft (~4 s of imports) that no other command needs
    from ttlab.discover.llm.trainer import train

    train(cfg)
    return 0


def cmd_warmstart(argv: list[str]) -> int:
    """`ttlab discover warmstart --preset NAME [--out DIR] [train flags]`: build the preset's warm-start adapter
    and write it as a shipped adapter (default `src/ttlab/discover/pretrained/NAME/`)."""
    argv = list(argv)
    out = None
    if "--out" in argv:
        i = argv.index("--out")
        if i + 1 >= len(argv):
            raise UserError("--out needs a directory")
        out = argv[i + 1]
        del argv[i:i + 2]
    if "--preset" not in argv and not {"-h", "--help"} & set(argv):
        raise UserError(f"--preset is required (one of {', '.join(sorted(TRAIN_PRESETS))})")
    i = argv.index("--preset") if "--preset" in argv else len(argv)
    name = argv[i + 1] if i + 1 < len(argv) else ""
    cfg = parse_config(TrainConfig, TRAIN_PRESETS, argv=argv, prog="ttlab discover warmstart")
    if not cfg.warm_start or cfg.task != "erdos":
        raise UserError(f"--preset {name}: no warm start to build (needs --warm-start and --task erdos)")
    check_train(cfg)
    try:
        resolve_model(cfg.policy.model)
    except (OSError, ValueError, ImportError) as e:
        raise UserError(f"--model {cfg.policy.model}: {e}") from e
    # deferred on purpose: the warm start pulls in transformers and peft (~4 s of imports)
    from ttlab.discover.llm.warmstart import PRETRAINED_DIR, build_shipped

    d = build_shipped(cfg, out or PRETRAINED_DIR / name, "ttlab discover warmstart " + " ".join(argv))
    print(f"warm start written to {d}")
    return 0


COMMANDS: dict = {
    "verify": (cmd_verify, "verify a construction file (every score recomputed; --claim for an exact record check)"),
    "search": (cmd_search, "PUCT discovery search with the offline program library or an HTTP LLM server (--proposer, --time-limit, --resume)"),
    "polish": (cmd_polish, "improve a given construction with a sandboxed optimiser, every round re-verified (--time-limit, --upsample, --claim)"),
    "warmstart": (cmd_warmstart, "build a preset's warm-start LoRA adapter and write it as a shipped adapter (--preset NAME, --out DIR)"),
    "train": (cmd_train, "test-time training of an LLM (LoRA, entropic GRPO) on a task (--model smollm2-135m | HF dir | .gguf, --preset cpu_smollm2, --resume)"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("ttlab discover", COMMANDS, argv)
