"""benchmarks/wm_action_probe.py end to end at a tiny size: the overfit's target and width reach the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_probe(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "wm_action_probe.py"), *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_overfit_runs_the_asked_target_at_the_asked_width(tmp_path):
    out = tmp_path / "probe.json"
    r = run_probe("--overfit", "--seeds", "101", "--branches", "2", "--batch", "2", "--max-steps", "2",
                  "--eval-every", "2", "--target", "eps", "--hidden", "16", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert json.loads(out.read_text()) == res
    assert (res["target"], res["schedule"], res["hidden"], res["steps"]) == ("eps", "linear", 16, 2)
    assert len(res["curve"]) == 1 and res["curve"][0]["step"] == 2 and res["x0_clip"] == 1.0


def test_a_target_that_does_not_exist_is_one_line():
    r = run_probe("--overfit", "--target", "z")
    assert r.returncode == 2 and "--target" in r.stderr and "Traceback" not in r.stderr
