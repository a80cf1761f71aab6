"""benchmarks/discover_ladder_levels.py: ladders read from run directories and result files, grouped by their level
at n0, on hand-made outputs in the exact formats the search writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "discover_ladder_levels.py"


def ladder_out(n0: float, final: float) -> str:
    return (f"lse ladder: n=51 C5={n0:.12f} after 900 hops (T=5e-06)\nlse ladder: n=102 C5=0.380900000000 after 90 hops\n"
            f"lse ladder: refined to n=816 C5={final:.12f}\nlse: n=816 C5={final:.12f}\nprogram_meta {{\"cpu_s\": 400}}\n")


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=ROOT)


def test_levels_group_ladders_from_a_run_dir_and_a_result_file_counting_each_once(tmp_path):
    run_dir = tmp_path / "bench_search_1_seed7"
    run_dir.mkdir()
    nodes = [{"id": "s0", "score": None, "stdout": ""},  # a root: no program
             {"id": "s3", "score": "0.3808717", "stdout": ladder_out(0.3809216, 0.3808717)},
             {"id": "s4", "score": "0.3809230", "stdout": ladder_out(0.3809708, 0.3809230)},
             {"id": "s5", "score": "0.3808900", "stdout": "lse hop: n=204 C5=0.3809\nlse: n=816 C5=0.3808900\n"}]
    (run_dir / "tree.json").write_text(json.dumps({"nodes": nodes}))
    tail = lambda s: [ln for ln in s.splitlines() if not ln.startswith("program_meta")]  # noqa: E731
    res_file = tmp_path / "res.json"
    res_file.write_text(json.dumps({"seeds": [{"seed": 7, "programs": [
        {"score": 0.3808717, "log": tail(ladder_out(0.3809216, 0.3808717))},  # the same ladder as s3
        {"score": 0.3808730, "log": tail(ladder_out(0.3809216, 0.3808730))}]}]}))
    out = tmp_path / "levels.json"
    p = run(run_dir, res_file, "--out", out)
    assert p.returncode == 0, p.stderr
    res = json.loads(out.read_text())
    assert res["ladders"] == 3 and res["below_record"] == 2  # s3 counted once; s5 is not a ladder
    assert [(g["level_at_n0"], g["ladders"], g["below_record"]) for g in res["levels"]] == [
        ("0.3809216", 2, 2), ("0.3809708", 1, 0)]
    assert json.loads(p.stdout.strip().splitlines()[-1])["ladders"] == 3


def test_levels_name_a_path_that_is_neither(tmp_path):
    p = run(tmp_path)
    assert p.returncode != 0 and "neither a result file nor a run directory" in p.stderr


def test_a_screened_ladder_takes_its_lowest_chain_as_its_level_and_every_chain_is_counted(tmp_path):
    log = ["lse ladder: chain 1/3 n=51 C5=0.380970768548 after 1610 hops (T=5e-05)",
           "lse ladder: chain 2/3 n=51 C5=0.380921566028 after 1631 hops (T=5e-05)",
           "lse ladder: chain 3/3 n=51 C5=0.380970770691 after 1624 hops (T=5e-05)",
           "lse ladder: n=102 C5=0.380880546778 after 162 hops",
           "lse ladder: refined to n=816 C5=0.380871646635", "lse: n=816 C5=0.380871646635"]
    res_file = tmp_path / "res.json"
    res_file.write_text(json.dumps({"seeds": [{"seed": 28, "programs": [{"score": 0.3808716466, "log": log}]}]}))
    out = tmp_path / "levels.json"
    assert run(res_file, "--out", out).returncode == 0
    res = json.loads(out.read_text())
    assert [(g["level_at_n0"], g["ladders"], g["below_record"]) for g in res["levels"]] == [("0.3809216", 1, 1)]
    assert [(g["level_at_n0"], g["chains"], g["hops_min"]) for g in res["chain_levels"]] == [
        ("0.3809216", 1, 1631), ("0.3809708", 2, 1610)]
