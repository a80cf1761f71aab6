"""`benchmarks/discover_ttt.py`: three arms (TTT, frozen, random blocks) at equal sandbox evaluations on the
evaluation seeds (never the tuning seed), one JSON line last, per-step best C5 against evaluations, valid rate,
beta and the fraction of steps with beta at its cap; run with the tiny debug preset in this process."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from ttlab.discover.llm.tiny import make_tiny_model


def _bench():
    spec = importlib.util.spec_from_file_location(
        "discover_ttt", Path(__file__).resolve().parents[2] / "benchmarks" / "discover_ttt.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_three_arms_get_equal_evaluations_and_the_result_reports_each_seed(tmp_path, monkeypatch, capsys):
    bench = _bench()
    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path / "cache"))
    model = make_tiny_model(tmp_path / "tiny")
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    monkeypatch.setattr(sys, "argv", [
        "discover_ttt.py", "--preset", "debug_blocks", "--model", str(model), "--arms", "trained,frozen,random_blocks",
        "--seeds", "1,2", "--tuning-seed", "0", "--steps", "2", "--jobs", "0", "--runs", str(tmp_path / "runs"),
        "--tag", "t", "--out", str(out), "--png", str(png)])
    bench.main()
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["benchmark"] == "discover_ttt" and last["seeds"] == [1, 2]
    res = json.loads(out.read_text())
    assert png.is_file() and res["tuning_seed"] == 0 and res["temperature"] == 1.0
    for seed in ("1", "2"):
        evals = {arm: [r["evals"] for r in res["runs"][seed][arm]["steps"]] for arm in res["arms"]}
        assert evals["trained"] == evals["frozen"] == evals["random_blocks"] == [4, 8]  # 1 state x 4 programs
        summ = res["summary"][seed]
        assert set(summ) == {"trained", "frozen", "random_blocks"}
        assert summ["random_blocks"]["valid_all"] > 0  # the grammar's programs run and verify
        assert summ["random_blocks"]["best_c5"] is not None
        for arm in ("trained", "frozen"):
            rows = res["runs"][seed][arm]["steps"]
            assert all("adv/beta_at_cap_frac" in r and "time/learn_s" in r for r in rows)
        assert res["summary"][seed]["frozen"]["learn_s_mean"] < 0.05  # the frozen arm never learns
    assert set(res["targets"]) >= {"ttt_below_frozen", "llm_arms_below_random", "per_seed"}
    assert str(Path(__file__).resolve().parents[2]) not in out.read_text()  # no path of this checkout


def test_the_tuning_seed_is_refused_as_an_evaluation_seed(monkeypatch):
    bench = _bench()
    monkeypatch.setattr(sys, "argv", ["discover_ttt.py", "--seeds", "0,1", "--tuning-seed", "0"])
    with pytest.raises(SystemExit, match="tuning seed 0"):
        bench.main()
    monkeypatch.setattr(sys, "argv", ["discover_ttt.py", "--arms", "trained,nope"])
    with pytest.raises(SystemExit, match="nope"):
        bench.main()
