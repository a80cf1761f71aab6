"""`ttlab discover train` end to end on CPU with the tiny random model (debug preset), then --resume."""

from __future__ import annotations

import json

from ttlab.discover.cli import main
from ttlab.discover.llm.tiny import make_tiny_model


def test_train_debug_preset_runs_end_to_end_and_resumes(tmp_path):
    model = make_tiny_model(tmp_path / "tiny")
    args = ["train", "--preset", "debug", "--model", str(model), "--root", str(tmp_path / "runs"),
            "--run-name", "cli", "--rollouts-per-state", "1", "--max-new-tokens", "8"]
    assert main(args + ["--steps", "1"]) == 0
    run = tmp_path / "runs" / "discover" / "cli"
    assert (run / "checkpoints" / "LATEST").read_text().strip() == "step_000001"
    assert main(args + ["--steps", "2", "--resume"]) == 0
    assert (run / "checkpoints" / "LATEST").read_text().strip() == "step_000002"
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    assert {"rollout/valid_rate", "time/generate_s", "perf/gen_tokens_per_s"} <= set(lines[0])
    assert json.loads((run / "best.json").read_text())["valid"] is True  # a root, re-verified


def test_train_help_and_missing_model(tmp_path, capsys):
    assert main(["train", "--help"]) == 0
    assert "--rollouts-per-state" in capsys.readouterr().out
    assert main(["train", "--preset", "debug"]) == 2
    assert "--model" in capsys.readouterr().out
    assert main(["train", "--preset", "debug", "--model", str(tmp_path / "nope")]) == 2
