"""Driving policies that ship with the package, addressable by name as `pretrained:<name>`.

    ttlab drive eval --checkpoint pretrained:selfplay --scenarios my_scenes/
    ttlab drive render --checkpoint pretrained:selfplay --scene town.json

A pretrained policy is a checkpoint stem in this folder (`<name>.safetensors` + `<name>.json`) holding only what
evaluation needs (policy weights, its config, the env config it trained with, the training scene source and seed)
plus `provenance`: the command that trained it and what it reached (see `export`).

    python -m ttlab.drive.pretrained export runs/drive/RUN/checkpoints/latest selfplay --command "..." \
        --result benchmarks/results/drive_selfplay_real/drive_selfplay_real.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ttlab.common.checkpoint import load_checkpoint, save_checkpoint

HERE = Path(__file__).resolve().parent
PREFIX = "pretrained:"
KEEP = ("policy", "policy_config", "env_config", "scenarios", "seed", "horizon", "update", "agent_steps")


def available() -> list[str]:
    """Names of the shipped policies."""
    return sorted(p.stem for p in HERE.glob("*.safetensors") if (HERE / f"{p.stem}.json").is_file())


def resolve(checkpoint: str | Path) -> str:
    """`pretrained:<name>` -> the shipped stem's path; any other stem as given. An unknown name is an error that
    lists the shipped ones."""
    text = str(checkpoint)
    if not text.startswith(PREFIX):
        return text
    name = text[len(PREFIX):]
    if name not in available():
        raise ValueError(f"--checkpoint {text}: no pretrained policy {name!r}; shipped: {', '.join(available()) or 'none'}")
    return str(HERE / name)


def export(stem: str | Path, name: str, command: str, result: str | Path | None = None) -> Path:
    """Write the evaluation part of the training checkpoint `stem` as the pretrained policy `name` (no optimizer or
    rng state), with provenance: the training command and, if given, the result file's headline figures."""
    ck = load_checkpoint(stem, "cpu")
    missing = [k for k in ("policy", "policy_config", "env_config") if k not in ck]
    if missing:
        raise ValueError(f"{stem}: not a drive training checkpoint (missing {missing})")
    out = {k: ck[k] for k in KEEP if k in ck}
    prov = {"command": command, "source_checkpoint": str(stem)}
    if result is not None:
        r = json.loads(Path(result).read_text())
        prov["result_file"] = str(result)
        prov["result"] = {k: r[k] for k in ("commit", "train_minutes", "agent_steps", "threads", "claim_uses",
                                             "reached", "reached_sampled", "reached_greedy", "held_out",
                                             "held_out_greedy", "held_out_real") if k in r}
    out["provenance"] = prov
    return save_checkpoint(HERE / name, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ttlab.drive.pretrained", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="ship a training checkpoint as pretrained:<name>")
    ex.add_argument("stem")
    ex.add_argument("name")
    ex.add_argument("--command", required=True, help="the command that trained it")
    ex.add_argument("--result", default=None, help="the benchmark result file of that run")
    sub.add_parser("list", help="the shipped policies")
    a = ap.parse_args(argv)
    if a.cmd == "list":
        print("\n".join(available()))
        return 0
    print(f"wrote {export(a.stem, a.name, a.command, a.result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
