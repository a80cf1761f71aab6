"""The partner-adaptation figure: its summary, memoryless ceiling and targets (`ttlab.drive.partner_adapt`) on
hand-made runs, one arm trained and evaluated in this process, and `benchmarks/drive_partner_adapt.py` run as a
user does on its tiny debug preset: every arm (core x privileged aux loss) trains and is evaluated on held-out
scenes against the training and the held-out partners, paired trials for every k < K, a learning-curve PNG, the
JSON file and one JSON line last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ttlab.drive.partner_adapt import (
    arm_config,
    memoryless_ceiling,
    partner_targets,
    run_arm,
    short_metrics,
    summarise,
)
from ttlab.drive.partners import HELD_OUT_PARTNERS, TRAIN_PARTNERS

ROOT = Path(__file__).resolve().parents[2]


def _bench(*argv: str) -> subprocess.CompletedProcess:
    """Run the benchmark script as a user does (it only wires and prints; its logic is in `drive.partner_adapt`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "drive_partner_adapt.py"), *argv], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)


def _ev(t0: float, t1: float, t2: float) -> dict:
    return {"trial_0_score": t0, "trial_1_score": t1, "trial_2_score": t2,
            "ada_delta_trial_1_minus_0": round(t1 - t0, 4), "ada_delta_trial_2_minus_0": round(t2 - t0, 4)}


def _scripted(memory_t1: float, go_t1: float, wait_t1: float, held_out_shift: float = 0.0) -> dict:
    return {name: {"train_partners": {"trial_1_score": t1}, "held_out_partners": {"trial_1_score": t1 + held_out_shift}}
            for name, t1 in (("memory", memory_t1), ("go_at_once", go_t1), ("wait_1.2s", wait_t1))}


def test_the_ceiling_is_the_best_memoryless_ego_and_ignores_the_one_with_memory():
    assert memoryless_ceiling(_scripted(0.95, 0.40, 0.55, -0.1)) == {"train_partners": 0.55,
                                                                    "held_out_partners": pytest.approx(0.45)}
    assert memoryless_ceiling(_scripted(0.10, 0.40, 0.30)) == {"train_partners": 0.40, "held_out_partners": 0.40}


def test_summary_deltas_ceiling_margins_wipes_and_targets():
    runs = [{"core": "transformer", "aux": False, "seed": s,
             "eval": {"train_partners": _ev(0.4, t1, 0.5), "held_out_partners": _ev(0.3, 0.35, 0.3),
                      "train_partners_wipe_content": _ev(0.4, 0.41, 0.42),
                      "train_partners_wipe_clock": _ev(0.4, 0.5, 0.5)}}
            for s, t1 in ((0, 0.6), (1, 0.7))]
    runs += [{"core": "mlp", "aux": False, "seed": 0,
              "eval": {"train_partners": _ev(0.5, 0.52, 0.5), "held_out_partners": _ev(0.5, 0.5, 0.5)}}]
    summary = summarise(runs, _scripted(0.9, 0.5, 0.55), ["transformer", "mlp"], [False], K=3)
    tr = summary["transformer"]
    assert tr["train_partners_delta_1_per_seed"] == [0.2, 0.3] and tr["train_partners_delta_1_mean"] == 0.25
    assert tr["train_partners_delta_2_mean"] == 0.1
    assert tr["train_partners_trial_1_score"] == [0.6, 0.7]
    assert tr["train_partners_trial_1_minus_memoryless_ceiling"] == [0.05, 0.15]  # ceiling 0.55 (not memory's 0.9)
    assert tr["train_partners_trial_2_minus_memoryless_ceiling"] == [-0.05, -0.05]
    assert tr["held_out_partners_trial_1_minus_memoryless_ceiling"] == [-0.2, -0.2]
    assert tr["wipe_content_trial_1_score"] == [0.41, 0.41] and tr["wipe_clock_trial_2_score"] == [0.5, 0.5]
    assert not any(k.startswith("wipe_") for k in summary["mlp"])  # no memory to wipe
    targets = partner_targets(summary)
    assert targets == {"transformer_no_aux_mean_delta_ge_0.15": True, "transformer_no_aux_every_seed_ge_0.10": True,
                       "transformer_no_aux_trial_1_above_memoryless_ceiling_every_seed": True,
                       "mlp_abs_delta_le_0.03": True}
    # one seed at the ceiling fails the memory target; an MLP that gains fails its own
    runs[1]["eval"]["train_partners"] = _ev(0.4, 0.55, 0.5)
    runs[2]["eval"]["train_partners"] = _ev(0.4, 0.5, 0.5)
    targets = partner_targets(summarise(runs, _scripted(0.9, 0.5, 0.55), ["transformer", "mlp"], [False], K=3))
    assert not targets["transformer_no_aux_trial_1_above_memoryless_ceiling_every_seed"]
    assert targets["transformer_no_aux_every_seed_ge_0.10"] and not targets["mlp_abs_delta_le_0.03"]


def test_short_metrics_keeps_every_trial_and_partner():
    m = {"trial_0_score": 0.123456, "trial_1_score": 0.5, "trial_2_score": 0.7, "ada_delta_trial_2_minus_0": 0.57,
         "losses": 3.0, "ego_trials": 40, "per_partner": {"yield": {"trial_1_score": 0.25, "other": 1.0}}}
    out = short_metrics(m, K=3)
    assert out == {"trial_0_score": 0.1235, "trial_1_score": 0.5, "trial_2_score": 0.7,
                   "ada_delta_trial_2_minus_0": 0.57, "ego_trials": 40, "per_partner": {"yield": {"trial_1_score": 0.25}}}


def test_arm_config_sets_the_core_and_the_privileged_loss_and_refuses_an_unknown_override():
    cfg = arm_config("partner_adapt_debug", "lstm", True, {"env.k_trials": "3"})
    assert cfg.policy.core == "lstm" and cfg.env.k_trials == 3
    assert cfg.policy.task_classes == len(cfg.partners) and cfg.ppo.aux_task_coef == 1.0
    off = arm_config("partner_adapt_debug", "mlp", False, {})
    assert off.policy.task_classes == 0 and off.ppo.aux_task_coef == 0.0
    with pytest.raises(ValueError, match="unknown override 'env.nope'"):
        arm_config("partner_adapt_debug", "mlp", False, {"env.nope": "1"})


def test_one_lstm_arm_trains_and_is_evaluated_with_its_memory_wiped():
    r = run_arm("partner_adapt_debug", "lstm", True, 3, 1, None, 4, 1, 1, time.perf_counter(), {})  # one update
    assert r["core"] == "lstm" and r["aux"] and r["seed"] == 3 and r["curve"]
    assert set(r["eval"]) == {"train_partners", "held_out_partners", "train_partners_wipe_content"}
    assert set(r["eval"]["held_out_partners"]["per_partner"]) == set(HELD_OUT_PARTNERS)
    assert "task_accuracy" in r["curve"][-1], "the privileged arm trains the task head"


def test_smoke_every_arm_with_k3(tmp_path):
    out, png = tmp_path / "p.json", tmp_path / "p.png"
    p = _bench("--preset", "partner_adapt_debug", "--seeds", "1", "--first-seed", "3", "--cores", "transformer,lstm",
               "--aux", "both", "--eval-envs", "4", "--eval-episodes", "1", "--jobs", "1", "--set", "env.k_trials=3",
               "--out", str(out), "--png", str(png))
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())
    assert set(res["summary"]) == {"transformer", "transformer_aux", "lstm", "lstm_aux"}
    assert res["config"]["seeds"] == [3] and {r["seed"] for r in res["runs"]} == {3}
    assert res["config"]["K"] == 3 and {"commit", "nproc", "loadavg_start", "wall_s"} <= set(res)
    for r in res["runs"]:
        for where, names in (("train_partners", TRAIN_PARTNERS), ("held_out_partners", HELD_OUT_PARTNERS)):
            ev = r["eval"][where]
            assert {"ada_delta_trial_1_minus_0", "ada_delta_trial_2_minus_0", "trial_2_score"} <= set(ev)
            assert set(ev["per_partner"]) == set(names)
        assert r["curve"] and "trial_0_score" in r["curve"][-1]
        wipes = {"transformer": {"content", "clock"}, "lstm": {"content"}}[r["core"]]
        assert {k for k in r["eval"] if k.startswith("train_partners_wipe_")} == {f"train_partners_wipe_{w}" for w in wipes}
        assert "ada_delta_trial_2_minus_0" in r["eval"]["train_partners_wipe_content"]
        if r["aux"]:
            assert "task_accuracy" in r["curve"][-1], "the privileged arm trains the task head"
    assert res["memoryless_ceiling_trial_1"] == memoryless_ceiling(res["scripted_held_out"])
    assert res["summary"] == summarise(res["runs"], res["scripted_held_out"], ["transformer", "lstm"], [False, True], 3)
    assert res["targets"] == partner_targets(res["summary"])
    assert res["scripted_held_out"]["memory"]["train_partners"]["ada_delta_trial_1_minus_0"] > 0.2
    assert png.is_file()
    line = json.loads(p.stdout.strip().splitlines()[-1])
    assert line["benchmark"] == "drive_partner_adapt" and "targets" in line


def test_bad_core_and_override_are_refused(tmp_path):
    p = _bench("--cores", "gru", "--out", str(tmp_path / "x.json"))
    assert p.returncode == 2 and "--cores gru: unknown ['gru']" in p.stdout
    p = _bench("--set", "env.nope=1", "--out", str(tmp_path / "x.json"))
    assert p.returncode == 2 and "unknown override 'env.nope'" in p.stdout
    assert not (tmp_path / "x.json").exists()
