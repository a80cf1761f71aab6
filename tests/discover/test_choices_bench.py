"""benchmarks/discover_choices.py: the start each program makes, per half of a run, from its samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ttlab.discover.starts import start_of

ROOT = Path(__file__).resolve().parents[2]

RESTART = "    h, c = eb.multistart(19, clock.until(0.2), rng)\n    return eb.finish(h)\n```"
COARSEN = "    h = eb.coarsen(h, 8)\n    h, c = eb.refine(h, clock.until(0.9), 204)\n    return eb.finish(h)\n```"
PARENT = "    # keep it\n    h, c = eb.refine(h, clock.until(0.9), 204)\n    return eb.finish(h)\n```"


def test_start_read_from_the_program_text():
    assert start_of(RESTART) == "restart"
    assert start_of(COARSEN) == "coarsen"
    assert start_of(PARENT) == "parent"
    assert start_of("    h = eb.refine(h)\n    h = eb.coarsen(h, 2)\n    h, c = eb.multistart(4)") == "restart"
    assert start_of("    h = eb.refine(h)\n    h = eb.coarsen(h, 2)") == "parent"  # a later coarsen is not the start


def _row(step, parent, text, valid=True, message="C5 = 0.381"):
    return {"step": step, "parent": parent, "text": text, "valid": valid, "message": message}


def test_run_halves_split_child_starts_and_failures(tmp_path):
    d = tmp_path / "runs" / "discover" / "ttt_trained_t_s1"
    d.mkdir(parents=True)
    rows = [_row(1, "s0", RESTART), _row(1, "s0", PARENT, False, "no python code block"),
            _row(2, "s3", RESTART), _row(2, "s3", COARSEN),
            _row(3, "s5", PARENT), _row(3, "s5", PARENT, False, "error: ValueError: x"),
            _row(4, "s6", PARENT), _row(4, "s6", COARSEN)]
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = tmp_path / "c.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "discover_choices.py"), "--tag", "t", "--seeds", "1",
                        "--arms", "trained", "--runs", str(tmp_path / "runs"), "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert json.loads(out.read_text()) == res
    s = res["arms"]["trained"]["1"]
    assert s["steps"] == 4
    first, second = s["first_half"], s["second_half"]  # steps 1-2, 3-4
    assert first["child_programs"] == 2 and first["start_share"] == {"restart": 0.5, "coarsen": 0.5, "parent": 0.0}
    assert first["valid"] == 0.75 and first["failures"] == [["no python code block", 1]]
    assert second["start_share"] == {"restart": 0.0, "coarsen": 0.25, "parent": 0.75} and second["child_valid"] == 0.75
    assert s["root"] == {"programs": 2, "start_share": {"restart": 0.5, "coarsen": 0.0, "parent": 0.5}, "valid": 0.5}
    assert s["settings_spread"] == {}  # these programs write no numeric block setting
    assert res["grammar_spread"]["sigma"]["std"] > 0.2
    missing = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "discover_choices.py"), "--tag", "nope",
                              "--seeds", "1", "--runs", str(tmp_path / "runs")], env=env, capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode != 0 and "no such file" in missing.stderr and "Traceback" not in missing.stderr


def test_every_root_of_the_tree_counts_as_a_root_prompt(tmp_path):
    d = tmp_path / "runs" / "discover" / "ttt_frozen_t_s2"
    d.mkdir(parents=True)
    rows = [_row(1, "s1", RESTART), _row(1, "s1", RESTART), _row(2, "s2", COARSEN), _row(2, "s0", PARENT)]
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    nodes = [{"id": "s0", "parent_id": None}, {"id": "s1", "parent_id": None}, {"id": "s2", "parent_id": "s1"}]
    (d / "tree.json").write_text(json.dumps({"nodes": nodes}))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "discover_choices.py"), "--tag", "t", "--seeds", "2",
                        "--arms", "frozen", "--runs", str(tmp_path / "runs")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])["arms"]["frozen"]["2"]
    assert s["root"]["programs"] == 3  # s1's two and s0's one: both are roots
    assert s["root"]["start_share"]["restart"] == round(2 / 3, 3)
    assert s["first_half"]["child_programs"] == 0 and s["second_half"]["child_programs"] == 1  # only s2's
