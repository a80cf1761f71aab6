"""benchmarks/discover_gap.py: an arm's best split into its first step's best-of-N and what later steps add."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GAP = ROOT / "benchmarks" / "discover_gap.py"
RESTART = "    h, c = eb.multistart(19, clock.until(0.2), rng)\n    return eb.finish(h)\n```"
PARENT = "    h, c = eb.refine(h, clock.until(0.9), 204)\n    return eb.finish(h)\n```"


def _write(d: Path, name: str, rows: list[dict]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT / 'benchmarks'}"}
    return subprocess.run([sys.executable, str(GAP), "--tag", "t", "--seeds", "1", "--runs", str(tmp_path / "runs"),
                           *args], env=env, capture_output=True, text=True, timeout=120)


def test_first_step_and_later_gain_and_lineage(tmp_path):
    llm = tmp_path / "runs" / "discover" / "ttt_trained_t_s1"
    _write(llm, "samples.jsonl", [
        {"step": 1, "valid": True, "score": 0.3812}, {"step": 1, "valid": False, "score": None},
        {"step": 1, "valid": True, "score": 0.3816}, {"step": 2, "valid": True, "score": 0.3810},
        {"step": 2, "valid": True, "score": 0.3811}])
    tree = {"nodes": [{"id": "s0", "score": 0.40, "parent_id": None, "code": ""},
                      {"id": "s1", "score": 0.3812, "parent_id": "s0", "code": RESTART, "created": 0},
                      {"id": "s2", "score": 0.3810, "parent_id": "s1", "code": PARENT, "created": 1}]}
    (llm / "tree.json").write_text(json.dumps(tree))
    rnd = tmp_path / "runs" / "discover" / "ttt_random_blocks_t_s1"
    _write(rnd, "results.jsonl", [{"step": 0, "valid": True, "score": 0.3811},
                                  {"step": 1, "valid": True, "score": 0.38105}])
    out = tmp_path / "g.json"
    r = _run(tmp_path, "--arms", "trained", "random_blocks", "--out", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert json.loads(out.read_text()) == res
    t = res["arms"]["trained"]["1"]
    assert t["first"]["programs"] == 3 and t["first"]["valid"] == 0.667 and t["first"]["best_c5"] == 0.3812
    assert abs(t["first"]["median_c5"] - 0.3814) < 1e-12
    assert t["final_c5"] == 0.3810 and abs(t["later_gain"] - 0.0002) < 1e-12
    assert t["lineage"] == [[1, "parent"], [0, "restart"]]
    rb = res["arms"]["random_blocks"]["1"]
    assert rb["first"]["best_c5"] == 0.3811 and rb["lineage"] == [] and abs(rb["later_gain"] - 0.00005) < 1e-12
    assert abs(res["mean"]["trained"]["first_best_c5"] - 0.3812) < 1e-12


def test_missing_run_is_one_line(tmp_path):
    r = _run(tmp_path, "--arms", "frozen")
    assert r.returncode != 0 and "no samples.jsonl or results.jsonl" in r.stderr and "Traceback" not in r.stderr


def test_children_split_by_start_and_scored_against_their_parent(tmp_path):
    import numpy as np

    from ttlab.discover.provenance import program_hash
    from ttlab.discover.random_blocks import random_program

    tree = {"nodes": [{"id": "s0", "score": 0.40, "parent_id": None, "code": ""},
                      {"id": "s1", "score": 0.3812, "parent_id": "s0", "code": RESTART, "created": 0}]}
    llm = tmp_path / "runs" / "discover" / "ttt_trained_t_s1"
    _write(llm, "samples.jsonl", [
        {"step": 1, "parent": "s0", "valid": True, "score": 0.3812, "text": RESTART},  # a root's: not a child
        {"step": 2, "parent": "s1", "valid": True, "score": 0.3815, "text": RESTART},
        {"step": 2, "parent": "s1", "valid": True, "score": 0.3811, "text": PARENT},
        {"step": 2, "parent": "s1", "valid": True, "score": 0.3813, "text": PARENT},
        {"step": 2, "parent": "s1", "valid": False, "score": None, "text": PARENT}])
    (llm / "tree.json").write_text(json.dumps(tree))
    # the random proposer's texts are regenerated from its seed and matched by hash
    rnd = tmp_path / "runs" / "discover" / "ttt_random_blocks_t_s1"
    rnd.mkdir(parents=True)
    (rnd / "config.json").write_text(json.dumps({"seed": 5}))
    (rnd / "tree.json").write_text(json.dumps(tree))
    rng = np.random.default_rng(5)
    codes = [random_program(rng)[0] for _ in range(3)]
    _write(rnd, "results.jsonl", [{"step": 1, "parent": "s0", "valid": True, "score": 0.3812,
                                   "program": program_hash(codes[0])}] +
           [{"step": 2, "parent": "s1", "valid": True, "score": 0.3810, "program": program_hash(c)}
            for c in codes[1:]] + [{"step": 2, "parent": "s1", "valid": True, "score": 0.3810, "program": "x"}])
    r = _run(tmp_path, "--arms", "trained", "random_blocks")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    ch = res["arms"]["trained"]["1"]["children"]
    assert ch["restart"]["programs"] == 1 and ch["restart"]["beat_parent"] == 0.0
    assert abs(ch["restart"]["max_gain"] + 0.0003) < 1e-12
    assert ch["parent"]["programs"] == 3 and ch["parent"]["valid"] == 0.667 and ch["parent"]["beat_parent"] == 0.5
    assert abs(ch["parent"]["max_gain"] - 0.0001) < 1e-12
    assert res["children_pooled"]["trained"] == ch
    rc = res["arms"]["random_blocks"]["1"]["children"]
    want = {}
    for c in codes[1:]:
        body = c.split("eb.normalise(", 1)[1].split("\n", 1)[1]
        k = "restart" if "eb.multistart(" in body else ("coarsen" if body.lstrip().startswith("h = eb.coarsen(")
                                                        else "parent")
        want[k] = want.get(k, 0) + 1
    assert {k: v["programs"] for k, v in rc.items() if k != "unknown"} == want
    assert rc["unknown"]["programs"] == 1  # a hash the seeded stream never drew
