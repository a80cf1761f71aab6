"""`benchmarks/drive_adapt.py`: `--set` overrides reach the held-out evaluation and the scripted references, not
only training (a K = 3 run is evaluated at K = 3), and the JSON reports `ada_delta_trial_{k}_minus_0` for every
k < K with the M and K that ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ttlab.drive.adapt import held_out_env, held_out_source
from ttlab.drive.presets import HIDDEN_EXIT_HELD_OUT, hidden_exit

ROOT = Path(__file__).resolve().parents[2]


def _bench(*argv: str) -> subprocess.CompletedProcess:
    """Run the benchmark script as a user does (it only wires and prints; its logic is in `drive.adapt`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "drive_adapt.py"), *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def test_held_out_env_follows_the_overrides():
    assert held_out_env(num_envs=2).k == 2
    assert held_out_env(num_envs=2, overrides={"env.k_trials": "3"}).k == 3
    assert held_out_source(hidden_exit()) == HIDDEN_EXIT_HELD_OUT
    cfg = hidden_exit()
    cfg.scenarios = "procedural:n=8,families=hidden_exit,agents=1,exits=3"
    src = held_out_source(cfg)
    assert "seed=1000" in src and "exits=3" in src and "n=64" in src
    env = held_out_env(num_envs=2, overrides={"scenarios": cfg.scenarios})
    assert env.view.candidates.shape[2] == 3
    with pytest.raises(ValueError, match="unknown override 'env.nope'"):
        held_out_env(num_envs=2, overrides={"env.nope": "1"})


def test_a_k3_override_trains_and_evaluates_at_k3_and_reports_every_k(tmp_path):
    out, png = tmp_path / "a.json", tmp_path / "a.png"
    p = _bench("--seeds", "1", "--steps", "800", "--cores", "mlp", "--eval-episodes", "1", "--jobs", "1",
               "--out", str(out), "--png", str(png), "--set", "env.k_trials=3", "env.num_envs=8")
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["config"]["K"] == 3 and res["config"]["M"] == 2
    run = res["runs"][0]
    assert {"ada_delta_trial_1_minus_0", "ada_delta_trial_2_minus_0", "trial_2_goal_rate"} <= set(run["eval"])
    assert "ada_delta_trial_2_minus_0" in res["scripted_held_out"]["memory"]
    mlp = res["summary"]["mlp"]
    assert mlp["ada_delta_trial_2_minus_0_per_seed"] == [run["eval"]["ada_delta_trial_2_minus_0"]]
    assert "trial_2_goal_rate" in mlp and png.is_file()
    line = json.loads(p.stdout.strip().splitlines()[-1])
    assert line["K"] == 3 and "mlp_ada_delta_trial_2_minus_0_mean" in line


def test_a_bad_override_is_refused_before_training(tmp_path):
    p = _bench("--out", str(tmp_path / "x.json"), "--set", "ppo.nope=1")
    assert p.returncode == 2
    assert "unknown override 'ppo.nope'" in p.stdout + p.stderr and not (tmp_path / "x.json").exists()


def test_an_unknown_core_is_refused_before_training(tmp_path):
    p = _bench("--out", str(tmp_path / "x.json"), "--cores", "transformer,gru")
    assert p.returncode == 2
    assert "unknown ['gru']" in p.stdout + p.stderr and not (tmp_path / "x.json").exists()
