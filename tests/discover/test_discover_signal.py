"""benchmarks/discover_signal.py: program features read from the text, the cross-validated AUC / Spearman helpers
on planted signals and their shuffled controls, and the script end to end on tiny fake runs."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from ttlab.discover.provenance import program_hash
from ttlab.discover.random_blocks import random_program

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import discover_signal as sig  # noqa: E402  (a benchmark script, importable for its pure functions)

RESTART = ("    h, c = eb.multistart(64, clock.until(0.1), rng, tau=0.01, start=eb.smooth_start)\n"
           "    h, c, hops = eb.hop(h, clock.until(0.5), rng, temperature=0, sym=0.0, sigma=0.1, window=0.2)\n"
           "    h, c, hops = eb.hop(h, clock.until(0.4), rng, temperature=1e-05, sym=0.5, sigma=0.001, window=0.4)\n"
           "    h, c = eb.refine(h, clock.until(0.9), 408, to_max=True)\n    eb.report(clock)\n"
           "    return eb.finish(h)\n```")
COARSEN = ("    h = eb.coarsen(h, 8)\n    h, c = eb.continuation(h, clock.until(0.3), tau0=1e-06)\n"
           "    h, c = eb.refine(h, clock.until(0.9), 1632, to_max=True)\n    return eb.finish(h)\n```")
PARENT = ("    h = eb.frobnicate(h)\n    if h.size <= 300:\n        h, c, steps = eb.lp_polish(h, clock.until(0.6), delta=0.01)\n"
          "    h, c = eb.refine(h, clock.until(0.9), 204, to_max=True)\n    return eb.finish(h)\n```")
START_OF = {"multistart": "restart", "coarse": "coarsen", "parent": "parent"}


def test_features_read_from_a_hand_written_program():
    f = sig.program_features(RESTART)
    assert (f["start_restart"], f["start_coarsen"], f["start_parent"]) == (1.0, 0.0, 0.0)
    assert f["stage_hop"] == 1.0 and f["stage_continuation"] == 0.0 and f["n_stages"] == 2.0
    assert f["n0"] == pytest.approx(6.0) and f["max_n"] == pytest.approx(math.log2(408))
    assert f["sigma"] == pytest.approx(-2.0)  # mean of log10 0.1 and log10 0.001
    assert f["temperature"] == pytest.approx(-5.0)  # the zero temperature is left out ...
    assert f["monotone_share"] == pytest.approx(0.5)  # ... and counted here
    assert f["window"] == pytest.approx(0.3) and f["sym"] == pytest.approx(0.25) and f["tau"] == pytest.approx(-2.0)
    assert f["smooth_start"] == 1.0 and f["start_end"] == pytest.approx(0.1)
    assert f["first_end"] == pytest.approx(0.5) and f["last_end"] == pytest.approx(0.5)
    assert f["stalled_stages"] == 1.0  # the second hop ends (0.4) before the first (0.5): no time of its own
    assert math.isnan(f["coarsen"]) and math.isnan(f["tau0"]) and math.isnan(f["delta"])
    p = sig.program_features(PARENT)
    assert p["start_parent"] == 1.0 and p["unknown_calls"] == 1.0 and p["stage_lp_polish"] == 1.0
    assert p["delta"] == pytest.approx(-2.0) and math.isnan(p["n0"]) and math.isnan(p["sigma"])
    c = sig.program_features(COARSEN)
    assert c["start_coarsen"] == 1.0 and c["coarsen"] == pytest.approx(3.0) and c["tau0"] == pytest.approx(-6.0)


def test_features_agree_with_the_random_grammar_choices():
    rng = np.random.default_rng(5)
    for _ in range(60):
        code, ch = random_program(rng)
        f = sig.program_features(code)  # the full program: the shared head is cut off first
        assert f[f"start_{START_OF[ch['start']]}"] == 1.0 and sum(f[c] for c in sig.START_COLS) == 1.0
        assert f["max_n"] == pytest.approx(math.log2(ch["max_n"]))
        assert f["n_stages"] == len(ch["stages"])
        assert f["stage_symmetrise"] == float(ch.get("symmetrise", False))
        for kind in ("hop", "up_hop", "continuation", "converge"):
            assert f[f"stage_{kind}"] == float(any(s["kind"] == kind for s in ch["stages"]))
        if ch["start"] == "multistart":
            assert f["n0"] == pytest.approx(math.log2(ch["n0"]))
            assert f["tau"] == pytest.approx(math.log10(ch["tau"]), abs=3e-3)
            assert f["start_end"] == pytest.approx(ch["start_end"], abs=1e-3)
            assert f["smooth_start"] == float(ch["shape"] == "smooth_start")
        else:
            assert math.isnan(f["n0"]) and math.isnan(f["start_end"])
        if ch["start"] == "coarse":
            assert f["coarsen"] == pytest.approx(math.log2(ch["coarsen"]))
        hops = [s for s in ch["stages"] if s["kind"] in ("hop", "up_hop")]
        if hops:
            assert f["sigma"] == pytest.approx(np.mean([math.log10(s["sigma"]) for s in hops]), abs=1e-2)  # choices: 3 decimals
            assert f["monotone_share"] == pytest.approx(np.mean([s["temperature"] == 0 for s in hops]))
        else:
            assert math.isnan(f["sigma"]) and math.isnan(f["window"])


def test_feature_table_fills_the_median_and_marks_the_missing():
    X, names = sig.feature_table([RESTART, COARSEN, PARENT, RESTART.replace("multistart(64", "multistart(16")])
    assert names[:3] == list(sig.START_COLS)
    assert X.shape == (4, len(names)) and not np.isnan(X).any()
    n0, miss = names.index("n0"), names.index("n0_missing")
    assert list(X[:, miss]) == [0.0, 1.0, 1.0, 0.0]
    assert list(X[:, n0]) == [6.0, 5.0, 5.0, 4.0]  # median of log2 64 and log2 16
    assert "max_n_missing" not in names  # every program writes a max_n
    assert list(X[:, names.index("start_coarsen")]) == [0.0, 1.0, 0.0, 0.0]


def test_auc_spearman_r2_on_known_cases():
    assert sig.auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert sig.auc([0, 0, 1, 1], [0.4, 0.3, 0.2, 0.1]) == 0.0
    assert sig.auc([0, 1, 0, 1], [1, 1, 1, 1]) == 0.5
    assert sig.auc([1, 1, 1], [0.1, 0.2, 0.3]) is None
    rng = np.random.default_rng(0)
    y, s = rng.integers(0, 2, 200), rng.integers(0, 5, 200).astype(float)  # many ties
    pairs = [(a, b) for a in s[y == 1] for b in s[y == 0]]
    assert sig.auc(y, s) == pytest.approx(np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs]))
    x = rng.normal(size=50)
    assert sig.spearman(x, np.exp(x)) == pytest.approx(1.0) and sig.spearman(x, -x) == pytest.approx(-1.0)
    assert sig.r2(x, x) == 1.0 and sig.r2(x, np.full(50, x.mean())) == pytest.approx(0.0)


def test_group_folds_keep_each_group_whole():
    rng = np.random.default_rng(1)
    groups = [f"run{i % 13}" for i in range(1000)]
    folds = sig.group_folds(groups, 5, rng)
    assert set(folds) == set(range(5))
    for g in set(groups):
        assert len({int(f) for f, h in zip(folds, groups, strict=True) if h == g}) == 1
    sizes = np.bincount(folds)
    assert sizes.max() - sizes.min() <= 100
    assert len(set(sig.group_folds(["a", "b", "a"], 5, rng))) == 2  # fewer groups than folds


def _planted(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    groups = [f"run{i % 12}" for i in range(n)]
    return rng, X, groups


def test_cv_finds_a_planted_binary_signal_and_not_a_shuffled_one():
    rng, X, groups = _planted()
    y = (X[:, 0] + 0.7 * rng.normal(size=len(X)) > 0).astype(float)
    folds = sig.group_folds(groups, 5, rng)
    res = sig.evaluate(X, y, y, folds, True, rng, perms=8)
    for model in ("linear", "knn"):
        r = res[model]
        assert r["auc"] > 0.75, model
        assert abs(r["shuffled"]["auc"]["mean"] - 0.5) < 0.05 and r["shuffled"]["auc"]["p"] < 0.2
        assert r["oracle_pick"]["gain"] > 0.25  # the top 10% beat the fold's rate by far
        assert abs(r["shuffled"]["oracle_gain"]["mean"]) < 0.1
    noise = sig.evaluate(X, rng.integers(0, 2, len(X)).astype(float), y, folds, True, rng, perms=4)
    assert abs(noise["linear"]["auc"] - 0.5) < 0.08


def test_grouped_folds_do_not_credit_a_run_level_signal():
    # the label depends only on the run, and one feature names the run: plain folds learn the run's rate from its
    # own other rows, folds grouped by run cannot, and the within-run shuffle keeps the runs' rates
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(10), 40)
    rate = rng.random(10)
    y = (rng.random(len(groups)) < rate[groups]).astype(float)
    code = rng.normal(size=(10, 3))  # a run's own mark, unrelated to its rate
    X = code[groups] + 0.01 * rng.normal(size=(len(groups), 3))
    plain = sig.evaluate(X, y, y, sig.kfold(len(y), 5, rng), True, rng, perms=2)
    grouped = sig.group_folds([str(g) for g in groups], 5, rng)
    res = sig.evaluate(X, y, y, grouped, True, rng, perms=2)
    assert plain["knn"]["auc"] > 0.7
    assert abs(res["knn"]["auc"] - 0.5) < 0.15
    p = sig.permute_within(groups, rng)
    assert sorted(p.tolist()) == list(range(len(groups))) and (groups[p] == groups).all()
    assert (p != np.arange(len(groups))).any()


def test_oracle_pick_breaks_ties_at_random_not_by_row_order():
    # one prediction for all rows: the pick must be a random 10%, not the first rows (which carry the target here)
    y = np.r_[np.ones(100), np.zeros(900)]
    pred = np.zeros(1000)
    folds = np.zeros(1000, int)
    r = sig.oracle_pick(y, pred, folds)
    assert r["top_mean"] < 0.4  # the first 100 rows would give 1.0


def test_cv_finds_a_planted_continuous_signal():
    rng, X, groups = _planted(seed=2)
    y = X[:, 1] + rng.normal(size=len(X))
    folds = sig.kfold(len(y), 5, rng)
    res = sig.evaluate(X, y, y, folds, False, rng, perms=6)
    assert res["linear"]["spearman"] > 0.55 and res["linear"]["r2"] > 0.3
    assert res["knn"]["spearman"] > 0.4
    assert abs(res["linear"]["shuffled"]["spearman"]["mean"]) < 0.1
    assert res["linear"]["shuffled"]["spearman"]["z"] > 5
    pos = res["linear"]["oracle_pick_positive"]
    assert 0 < pos["gain"] < res["linear"]["oracle_pick"]["gain"] and pos["mean"] > 0
    assert res["linear"]["oracle_pick"]["gain"] > 1.0  # the top 10% of a unit-variance signal: ~1.75 x 0.7
    assert abs(res["linear"]["shuffled"]["oracle_gain"]["mean"]) < 0.3


def test_within_start_control_separates_a_setting_signal_from_a_start_signal():
    rng = np.random.default_rng(3)
    n = 800
    start = rng.integers(0, 2, n)
    setting = rng.normal(size=n)
    X = np.column_stack([start, 1 - start, setting, rng.normal(size=n)])
    folds = sig.kfold(n, 5, rng)
    free = np.array([2, 3])
    y_start = (start + 0.3 * rng.normal(size=n) > 0.5).astype(float)  # the start decides
    r = sig.evaluate(X, y_start, y_start, folds, True, rng, perms=5, strata=start, free_cols=free)["linear"]
    assert r["auc"] > 0.8 and abs(r["within_start"]["auc"]["mean"] - r["auc"]) < 0.03
    y_set = (setting + 0.5 * rng.normal(size=n) > 0).astype(float)  # a setting decides, not the start
    r = sig.evaluate(X, y_set, y_set, folds, True, rng, perms=5, strata=start, free_cols=free)["linear"]
    assert r["auc"] > 0.8 and r["within_start"]["auc"]["mean"] < 0.6 and r["within_start"]["auc"]["p"] < 0.2


# ------------------------------------------------------------------------------------------------ end to end

def _write_rows(d: Path, name: str, rows: list[dict]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _tree(d: Path) -> None:
    nodes = [{"id": "s0", "parent_id": None, "score": 0.40, "code": "", "created": -1},
             {"id": "s1", "parent_id": "s0", "score": 0.382, "code": RESTART, "created": 0},
             {"id": "s2", "parent_id": "s1", "score": 0.381, "code": PARENT, "created": 1}]
    (d / "tree.json").write_text(json.dumps({"nodes": nodes}))


def _llm_run(d: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = [{"step": 1, "parent": "s0", "text": PARENT, "valid": True, "score": 0.39}]  # a root's: not a child
    for i in range(40):
        parent, pscore = ("s1", 0.382) if i % 2 else ("s2", 0.381)
        step = 2 + i // 10
        if i % 4 == 0:  # restarts: beat their parent
            text = RESTART.replace("sigma=0.1", f"sigma={rng.uniform(0.05, 0.5):.3g}")
            rows.append({"step": step, "parent": parent, "text": text, "valid": True, "score": pscore - 1e-4})
        elif i % 4 == 1:  # coarsen: worse
            rows.append({"step": step, "parent": parent, "text": COARSEN, "valid": True, "score": pscore + 2e-4})
        elif i % 8 == 2:
            rows.append({"step": step, "parent": parent, "text": PARENT, "valid": False, "score": None})
        else:
            rows.append({"step": step, "parent": parent, "text": PARENT, "valid": True, "score": pscore + 1e-5})
    _write_rows(d, "samples.jsonl", rows)
    (d / "config.json").write_text(json.dumps({"seed": seed}))
    _tree(d)


def _random_run(d: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(24):
        code, ch = random_program(rng)
        score = 0.381 - (1e-4 if ch["start"] == "multistart" else -1e-4)  # s2 is at 0.381
        rows.append({"step": i // 8, "program": program_hash(code), "parent": "s2" if i >= 8 else "s0",
                     "valid": True, "score": score, "status": "ok"})
    _write_rows(d, "results.jsonl", rows)
    (d / "config.json").write_text(json.dumps({"seed": seed, "program_wall_factor": 1.0}))
    _tree(d)


def test_end_to_end_on_fake_runs(tmp_path, capsys):
    root = tmp_path / "runs" / "discover"
    for s in (1, 2, 3):
        _llm_run(root / f"ttt_trained_t_s{s}", 10 + s)
        _random_run(root / f"ttt_random_blocks_t_s{s}", s)
    shutil.copytree(root / "ttt_trained_t_s1", root / "ttt_trained_u_s1")  # a rerun under another tag
    shutil.copytree(root / "ttt_trained_t_s1", root / "ttt_trained_t_s1.cut-20260101_000000")  # never read
    progs = []
    for i in range(60):
        code, ch = random_program(np.random.default_rng(100 + i))
        c5 = 0.381 + (0.0 if ch["start"] == "multistart" else 5e-4) + 1e-5 * (i % 7)
        progs.append({"code": code, "choices": ch, "c5": c5, "status": "ok"})
    pool = tmp_path / "pool.json"
    pool.write_text(json.dumps({"programs": progs, "rescore": [
        {"index": 0, "tail": "top", "c5_first": 0.381, "c5": 0.3812, "status": "ok"}]}))
    out = tmp_path / "res" / "signal.json"
    sig.main(["--tags", "t", "u", "--seeds", "1", "2", "3", "--arms", "trained", "random_blocks", "--root",
              str(root), "--pool", str(pool), "--folds", "5", "--perms", "3", "--out", str(out)])
    captured = capsys.readouterr()
    res = json.loads(captured.out.strip().splitlines()[-1])
    assert json.loads(out.read_text()) == res
    assert res["runs"]["duplicates"] == {"ttt_trained_u_s1": "ttt_trained_t_s1"}
    assert sorted(res["runs"]["missing"]) == ["ttt_random_blocks_u_s1", "ttt_random_blocks_u_s2",
                                              "ttt_random_blocks_u_s3", "ttt_trained_u_s2", "ttt_trained_u_s3"]
    assert "no run folder" in captured.err and "same rows" in captured.err
    assert res["runs"]["unknown_text"] == {}
    tr = res["children"]["trained"]
    assert tr["programs"] == 120 and tr["runs"] == 3  # the root's programs left out
    assert tr["valid_by_start"] == {"restart": {"programs": 30, "valid": 1.0},
                                    "coarsen": {"programs": 30, "valid": 1.0},
                                    "parent": {"programs": 60, "valid": 0.75}}
    bp = tr["targets"]["beat_parent"]
    # 5 folds asked, 3 runs: folds are whole runs
    assert bp["n"] == 105 and bp["folds"] == 3 and bp["rate"] == pytest.approx(30 / 105)
    assert bp["start"]["linear"]["auc"] == 1.0 and bp["all"]["linear"]["auc"] > 0.95
    assert bp["start"]["linear"]["oracle_pick"]["top_mean"] == 1.0
    assert tr["targets"]["gain"]["start"]["linear"]["spearman"] > 0.8
    assert len(bp["coef"]) == 8 and bp["coef"]["start_restart"] > 0  # the restarts beat their parent here
    assert "valid" in tr["targets"] and "valid" not in res["children"]["random_blocks"]["targets"]
    rb = res["children"]["random_blocks"]
    assert rb["programs"] == 48 and rb["targets"]["beat_parent"]["start"]["linear"]["auc"] == 1.0
    assert res["children"]["all"]["programs"] == 168 and res["children"]["all"]["runs"] == 6
    p = res["pool"]
    assert p["programs"] == 60 and p["targets"]["best_quarter"]["start"]["linear"]["auc"] > 0.75
    assert p["targets"]["c5_gain"]["all"]["linear"]["spearman"] > 0.5
    assert p["top_tail_rerun"]["n"] == 1
    assert "within_start" in p["targets"]["c5_gain"]["all"]["knn"] and "within_start" not in (
        p["targets"]["c5_gain"]["start"]["knn"])


def test_no_runs_and_no_pool_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="no run found"):
        sig.main(["--tags", "t", "--seeds", "1", "--root", str(tmp_path)])
