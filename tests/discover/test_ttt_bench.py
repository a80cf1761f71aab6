"""The TTT comparison: each arm's summary and the per-seed comparison (`ttlab.discover.llm.ttt_compare`) on
hand-made rows, and `benchmarks/discover_ttt.py` run as a user does with the tiny debug preset: three arms (TTT,
frozen, random blocks) at equal sandbox evaluations on the evaluation seeds (never the tuning seed), one JSON
line last, per-step best C5 against evaluations, valid rate, beta and the fraction of steps with beta at its cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ttlab.discover.llm.tiny import make_tiny_model
from ttlab.discover.llm.ttt_compare import arm_summary, comparison_targets

ROOT = Path(__file__).resolve().parents[2]


def _bench(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the benchmark script as a user does (it only wires and prints; its logic is in `llm.ttt_compare`)."""
    env = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "discover_ttt.py"), *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def _row(step: int, best: float | None, valid: float, reward: float | None = None, cap: float | None = None) -> dict:
    return {"step": step, "evals": 4 * step, "wall_s": 2.0 * step, "tree/best_score": best, "valid_rate": valid,
            "reward_mean": reward, "adv/beta_at_cap_frac": cap, "adv/beta_mean": None if cap is None else 10.0 * step,
            "time/step_s": 2.0, "time/generate_s": 1.0, "time/evaluate_s": 0.5, "time/learn_s": 0.5}


def test_arm_summary_best_is_lowest_windows_are_first_and_last_three_and_nan_is_skipped():
    rows = [_row(1, 0.40, 0.0, float("nan"), 0.0), _row(2, 0.39, 0.5, 0.1, 0.5), _row(3, 0.39, 1.0, 0.2, 0.0),
            _row(4, 0.385, 1.0, 0.4, 0.25)]
    s = arm_summary(rows)
    assert s["steps"] == 4 and s["evals"] == 16 and s["wall_s"] == 8.0 and s["best_c5"] == 0.385
    assert s["valid_all"] == pytest.approx(0.625) and s["valid_first3"] == pytest.approx(0.5)
    assert s["valid_last3"] == pytest.approx(2.5 / 3)
    assert s["reward_first3"] == pytest.approx(0.15)  # the NaN reward of step 1 is not averaged in
    assert s["reward_last3"] == pytest.approx(0.7 / 3)
    assert s["steps_beta_at_cap_frac"] == 0.5 and s["beta_mean"] == pytest.approx(25.0)
    assert s["learn_s_mean"] == 0.5
    empty = arm_summary([])
    assert empty["steps"] == 0 and empty["evals"] == 0 and empty["best_c5"] is None and empty["valid_all"] is None
    # a random-blocks arm has no beta: none rather than a fraction of nothing
    assert arm_summary([_row(1, 0.4, 1.0)])["steps_beta_at_cap_frac"] is None


def test_comparison_counts_a_seed_only_when_an_arm_is_strictly_below():
    summary = {"1": {"trained": {"best_c5": 0.381}, "frozen": {"best_c5": 0.382}, "random_blocks": {"best_c5": 0.383}},
               "2": {"trained": {"best_c5": 0.384}, "frozen": {"best_c5": 0.384}, "random_blocks": {"best_c5": 0.383}},
               "3": {"trained": {"best_c5": None}, "frozen": {"best_c5": 0.382}, "random_blocks": {"best_c5": 0.39}}}
    t = comparison_targets(summary)
    assert t["ttt_below_frozen"] == "1/3"  # a tie is not below; a seed where TTT found nothing is not below
    assert t["llm_arms_below_random"] == "1/3"
    assert t["per_seed"]["1"]["ttt_minus_frozen"] == pytest.approx(-0.001)
    assert t["per_seed"]["2"]["trained_minus_random_blocks"] == pytest.approx(0.001)
    assert t["per_seed"]["3"] == {"frozen_minus_random_blocks": pytest.approx(-0.008)}


def test_three_arms_get_equal_evaluations_and_the_result_reports_each_seed(tmp_path):
    model = make_tiny_model(tmp_path / "tiny")
    out, png = tmp_path / "new" / "r.json", tmp_path / "new" / "r.png"  # no --png: the figure goes beside --out
    p = _bench("--preset", "debug_blocks", "--model", str(model), "--arms", "trained,frozen,random_blocks",
               "--seeds", "1,2", "--tuning-seed", "0", "--steps", "2", "--jobs", "0", "--runs", str(tmp_path / "runs"),
               "--tag", "t", "--out", str(out), env={"TTLAB_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr[-2000:]
    last = json.loads(p.stdout.strip().splitlines()[-1])
    assert last["benchmark"] == "discover_ttt" and last["seeds"] == [1, 2]
    res = json.loads(out.read_text())
    assert png.is_file() and res["tuning_seed"] == 0 and res["temperature"] == 1.0
    for seed in ("1", "2"):
        evals = {arm: [r["evals"] for r in res["runs"][seed][arm]["steps"]] for arm in res["arms"]}
        assert evals["trained"] == evals["frozen"] == evals["random_blocks"] == [4, 8]  # 1 state x 4 programs
        summ = res["summary"][seed]
        assert summ == {arm: arm_summary(res["runs"][seed][arm]["steps"]) for arm in res["arms"]}
        assert summ["random_blocks"]["valid_all"] > 0  # the grammar's programs run and verify
        assert summ["random_blocks"]["best_c5"] is not None
        for arm in ("trained", "frozen"):
            rows = res["runs"][seed][arm]["steps"]
            assert all("adv/beta_at_cap_frac" in r and "time/learn_s" in r for r in rows)
        assert res["summary"][seed]["frozen"]["learn_s_mean"] < 0.05  # the frozen arm never learns
    assert res["targets"] == comparison_targets(res["summary"])
    assert str(ROOT) not in out.read_text()  # no path of this checkout


def test_the_tuning_seed_and_an_unknown_arm_are_refused():
    p = _bench("--seeds", "0,1", "--tuning-seed", "0")
    assert p.returncode != 0 and "tuning seed 0" in p.stderr
    p = _bench("--arms", "trained,nope")
    assert p.returncode != 0 and "nope" in p.stderr


def test_no_solved_beta_reports_no_cap_fraction():
    rows = [_row(1, 0.48, 0.0, 0.0, 0.0), _row(2, 0.48, 0.0, 0.0, 0.0)]
    for r in rows:
        r["adv/beta_at_cap_frac"] = float("nan")  # every reward equal: no advantage, no beta solved
    assert arm_summary(rows)["steps_beta_at_cap_frac"] is None


def test_resume_keeps_complete_arms_and_collect_labels_a_cut_run_partial_at_equal_evaluations(tmp_path):
    """A run cut by a deadline can be finished: `--resume` keeps the arm/seed pairs already complete in --out and
    reruns only the rest; `--collect` writes the arm files as they are, marked partial, with each seed's arms
    compared over the steps all of them reached."""
    model = make_tiny_model(tmp_path / "tiny")
    out, runs, env = tmp_path / "r.json", tmp_path / "runs", {"TTLAB_CACHE": str(tmp_path / "cache")}
    common = ("--preset", "debug_blocks", "--model", str(model), "--arms", "frozen,random_blocks", "--seeds", "1",
              "--tuning-seed", "0", "--steps", "2", "--runs", str(runs), "--png", str(tmp_path / "r.png"))
    p = _bench(*common, "--jobs", "0", "--tag", "t", "--out", str(out), env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["partial"] is False and res["incomplete"] == []
    frozen_rows = res["runs"]["1"]["frozen"]["steps"]
    res["runs"]["1"]["frozen"] = {"arm": "frozen", "seed": 1, "steps": frozen_rows[:1]}  # cut after one step
    res["runs"]["1"]["random_blocks"]["marker"] = "kept"
    out.write_text(json.dumps(res))

    p = _bench(*common, "--jobs", "0", "--tag", "t", "--out", str(out), "--resume", env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "keeping random_blocks s1" in p.stdout and "frozen s1" not in p.stdout.split("keeping")[1].splitlines()[0]
    res = json.loads(out.read_text())
    assert res["runs"]["1"]["random_blocks"]["marker"] == "kept"  # not rerun
    assert res["runs"]["1"]["frozen"]["complete"] and len(res["runs"]["1"]["frozen"]["steps"]) == 2  # rerun in full
    assert res["partial"] is False

    # arm files as a killed run leaves them: random_blocks complete, frozen one step in
    rb = {**res["runs"]["1"]["random_blocks"], "complete": True}
    (runs / "ttt_random_blocks_c_s1.json").write_text(json.dumps(rb))
    (runs / "ttt_frozen_c_s1.json").write_text(json.dumps({"arm": "frozen", "seed": 1, "steps": frozen_rows[:1]}))
    out2 = tmp_path / "partial.json"
    p = _bench(*common, "--jobs", "1", "--tag", "c", "--out", str(out2), "--collect", env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    res2 = json.loads(out2.read_text())
    assert res2["partial"] is True and res2["incomplete"] == ["frozen s1"]
    assert res2["summary"]["1"]["random_blocks"]["steps"] == res2["summary"]["1"]["frozen"]["steps"] == 1
    assert res2["summary"]["1"]["random_blocks"] == arm_summary(rb["steps"][:1])
    assert len(res2["runs"]["1"]["random_blocks"]["steps"]) == 2  # the rows themselves are all kept


def test_resume_and_collect_need_the_runs_tag():
    p = _bench("--resume")
    assert p.returncode != 0 and "--tag" in p.stderr


def test_shared_start_tree_is_every_arms_first_tree(tmp_path):
    """`--start-steps 1`: one random-blocks step per seed, run once; every arm's tree holds its states, and no arm
    ends above the start's best (the start's states are in every arm's tree)."""
    model = make_tiny_model(tmp_path / "tiny")
    out = tmp_path / "r.json"
    common = ("--preset", "debug_blocks", "--model", str(model), "--arms", "frozen,random_blocks", "--seeds", "1",
              "--tuning-seed", "0", "--steps", "1", "--jobs", "0", "--runs", str(tmp_path / "runs"), "--tag", "st",
              "--start-steps", "1", "--out", str(out), "--png", str(tmp_path / "r.png"))
    p = _bench(*common, env={"TTLAB_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())
    start = res["start"]["by_seed"]["1"]
    assert res["start"]["steps"] == 1 and start["tree"].endswith("ttt_start_st_s1/tree.json")
    start_ids = {n["id"] for n in json.loads((tmp_path / "runs" / "discover" / "ttt_start_st_s1" / "tree.json")
                                             .read_text())["nodes"]}
    for arm in ("frozen", "random_blocks"):
        tree = json.loads((tmp_path / "runs" / "discover" / f"ttt_{arm}_st_s1" / "tree.json").read_text())
        assert start_ids & {n["id"] for n in tree["nodes"]}  # the arm grew the shared tree
        assert res["summary"]["1"][arm]["best_c5"] <= start["best_c5"] + 1e-15
    both = _bench(*common, "--bootstrap-steps", "1")
    assert both.returncode != 0 and "use one" in both.stderr
