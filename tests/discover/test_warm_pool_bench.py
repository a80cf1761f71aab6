"""The pool and gate benchmarks as a user runs them: the pool benchmark scores a small pool, re-runs both tails
with new program seeds and prints one JSON line last; the gate refuses what it cannot compare before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_pool_benchmark_rescores_both_tails_with_new_seeds(tmp_path):
    out, png = tmp_path / "pool.json", tmp_path / "pool.png"
    p = _run("discover_warm_pool.py", "--pool", "10", "--tail", "0.2", "--budget-s", "0.3", "--out", str(out),
             "--png", str(png), env={"TTLAB_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr[-2000:]
    last = json.loads(p.stdout.strip().splitlines()[-1])
    res = json.loads(out.read_text())
    assert last["benchmark"] == "discover_warm_pool" and png.is_file()
    assert len(res["programs"]) == 10 and len(res["rescore"]) == 4  # 2 from each end
    assert [r["tail"] for r in res["rescore"]] == ["top", "top", "bottom", "bottom"]
    firsts = [r["c5_first"] for r in res["rescore"]]
    assert firsts[0] <= firsts[1] <= firsts[2] <= firsts[3]  # the ends of the pool, best first
    assert all(r["c5_first"] == res["programs"][r["index"]]["c5"] for r in res["rescore"])
    assert "start" in res["choices"] and str(ROOT) not in out.read_text()

    # the same pool again from a refined parent: the pool's best construction, rebuilt bitwise by its program
    p = _run("discover_warm_pool.py", "--pool", "10", "--tail", "0", "--refined", "--budget-s", "0.3", "--out",
             str(out), env={"TTLAB_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr[-2000:]
    ref = json.loads(out.read_text())["refined"]
    assert ref["parent_c5"] == min(x["c5"] for x in res["programs"] if x["c5"] is not None)
    assert 0 <= ref["top_quartile_overlap"] <= 1 and "start" in ref["choices"]

    # graded parents: the same pool from the programs at two quantiles of the root pool, on top of the cached pools
    p = _run("discover_warm_pool.py", "--pool", "10", "--tail", "0", "--parents", "0.5,1", "--budget-s", "0.3",
             "--out", str(out), env={"TTLAB_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr[-2000:]
    graded = json.loads(out.read_text())["graded"]
    valid = sorted(x["c5"] for x in res["programs"] if x["c5"] is not None)
    assert [g["quantile"] for g in graded] == [0.5, 1.0] and graded[1]["parent_c5"] == valid[-1]
    assert all(abs(sum(g["top_quarter_start_share"].values()) - 1) < 1e-9 for g in graded)
    p = _run("discover_warm_pool.py", "--pool", "10", "--parents", "0.5,x", env={"TTLAB_CACHE": str(tmp_path / "cache")})
    assert p.returncode != 0 and "--parents" in p.stderr.strip().splitlines()[-1]


def test_the_gate_refuses_an_unknown_or_unbuilt_or_non_blocks_preset_before_any_work(tmp_path):
    env = {"TTLAB_CACHE": str(tmp_path / "cache")}
    p = _run("discover_warm_gate.py", "--presets", "nope", env=env)
    assert p.returncode != 0 and "nope" in p.stderr
    p = _run("discover_warm_gate.py", "--presets", "debug", env=env)
    assert p.returncode != 0 and "blocks preset" in p.stderr
    p = _run("discover_warm_gate.py", "--programs", "0", env=env)
    assert p.returncode != 0 and "--programs" in p.stderr
    p = _run("discover_warm_gate.py", "--contexts", "root,leaf", env=env)
    assert p.returncode != 0 and "--contexts" in p.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "cache" / "warmpool").exists()  # nothing was scored


def test_the_gate_counts_each_start_among_the_programs_that_parsed():
    import importlib.util

    spec = importlib.util.spec_from_file_location("discover_warm_gate", ROOT / "benchmarks" / "discover_warm_gate.py")
    gate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gate)
    restart = "h, c = eb.multistart(600, clock, rng)\nreturn h"
    coarsen = "h = eb.coarsen(h, 2)\nh = eb.refine(h, clock, 400)"
    parent = "h, c = eb.refine(h, clock, 400)"
    s = gate.start_shares([restart, restart, coarsen, None, parent])
    assert s == {"parsed": 4, "restart": 0.5, "coarsen": 0.25, "parent": 0.25}
    assert gate.start_shares([None])["parsed"] == 0
