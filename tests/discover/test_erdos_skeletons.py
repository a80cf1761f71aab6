"""The skeleton study's measurements (`ttlab.discover.skeletons`, run by benchmarks/erdos_skeletons.py) on small
inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ttlab.discover import skeletons as m
from ttlab.discover.blocks import erdos_blocks as eb

ROOT = Path(__file__).resolve().parents[2]
ROUGH = np.array([0.0, 0.2, 0.9, 0.5, 1.0, 0.3, 0.8, 0.7, 0.1, 0.9, 0.6, 0.2, 1.0, 0.4, 0.0, 0.0])


def test_block_mean_of_a_split_profile_is_the_profile_and_a_non_divisor_is_refused():
    h = np.array([0.0, 0.5, 0.9, 0.7, 0.2, 0.0])
    assert np.array_equal(m.block_mean(np.repeat(h, 4), 6), h)
    with pytest.raises(ValueError, match="does not divide .* n = 24"):
        m.block_mean(np.repeat(h, 4), 5)


def test_the_coarse_optimum_of_a_rough_profile_is_lower_than_the_profile():
    h, c = m.coarse_optimum(ROUGH)
    assert h.size == ROUGH.size
    assert c == pytest.approx(eb.c5(h), abs=1e-12)
    assert c < eb.c5(ROUGH) - 1e-3


def test_ladder_doubles_each_level_and_reports_the_files_own_value():
    row = m.ladder(np.repeat(ROUGH, 2), 16, levels=2)
    assert row["n"] == 32 and row["c5"] == pytest.approx(eb.c5(np.repeat(ROUGH, 2)))
    assert [r["n"] for r in row["levels"]] == [16, 32, 64]
    assert row["levels"][0]["c5"] == pytest.approx(row["skeleton_c5"])


def test_keep_distinct_merges_near_copies_keeps_the_lower_and_caps_the_list():
    a, b = np.linspace(0.1, 0.9, 10), np.linspace(0.9, 0.1, 10)
    found: list = []
    m.keep_distinct(found, 0.5, a, top=2)
    m.keep_distinct(found, 0.4, a + 1e-6, top=2)  # the same skeleton, lower: replaces it
    assert len(found) == 1 and found[0][0] == 0.4
    m.keep_distinct(found, 0.45, b, top=2)
    m.keep_distinct(found, 0.3, np.full(10, 0.5), top=2)
    assert [f[0] for f in found] == [0.3, 0.4]


def test_search_returns_the_lowest_distinct_optima_refined_and_each_chains_counts():
    rng = np.random.default_rng(1)
    sources = {"a": eb.random_start(16, rng), "b": eb.random_start(16, rng)}
    res = m.search(sources, m.Chain(hops=4), seed=0, top=3, levels=1)
    assert set(res["chains"]) == {"a", "b"}
    assert all(1 <= ch["distinct"] <= 3 and 0 <= ch["accepted"] <= 4 for ch in res["chains"].values())
    hop = [r["hop_c5"] for r in res["top"]]
    # how many distinct optima two short chains reach depends on the CPU's float rounding; the union keeps at
    # least each chain's own, and at most `top`
    assert hop == sorted(hop) and max(ch["distinct"] for ch in res["chains"].values()) <= len(hop) <= 3
    assert all(r["h"].size == 32 and [lv["n"] for lv in r["levels"]] == [16, 32] for r in res["top"])
    assert hop[0] <= min(ch["best_c5"] for ch in res["chains"].values()) + 1e-15


def test_exact_check_of_a_refined_profile_is_feasible():
    out = m.exact_check(np.repeat(ROUGH, 2))
    assert out["feasible"] and out["c5_exact"] == pytest.approx(eb.c5(eb.normalise(np.repeat(ROUGH, 2))), abs=1e-12)


def test_the_benchmark_refuses_a_skeleton_without_its_coarse_n(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"h": ROUGH.tolist()}))
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "erdos_skeletons.py"), "--skeleton", str(f)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "expected FILE@N_C" in r.stderr


def test_the_benchmark_prints_a_skeletons_ladder_as_its_last_json_line(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"h": np.repeat(ROUGH, 2).tolist()}))
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "erdos_skeletons.py"), "--skeleton", f"{f}@16",
                        "--levels", "1"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    last = json.loads(r.stdout.strip().splitlines()[-1])
    assert last["benchmark"] == "erdos_skeletons" and last["skeletons"][0]["n_c"] == 16


def test_the_benchmark_redraws_its_plot_from_a_saved_result(tmp_path):
    res = {"skeletons": [{"file": "a.json", "levels": [{"n": 8, "c5": 0.3810}, {"n": 16, "c5": 0.3809}]}],
           "search": {"top": [{"chain": "a.json", "levels": [{"n": 8, "c5": 0.3811}, {"n": 16, "c5": 0.3808}]}]}}
    (tmp_path / "r.json").write_text(json.dumps(res))
    png = tmp_path / "r.png"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "erdos_skeletons.py"), "--replot",
                        str(tmp_path / "r.json"), "--png", str(png)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
