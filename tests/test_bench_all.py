"""`make bench` covers every committed figure with a quick mode that names a real script."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAME_SCRIPT = {"drive_selfplay_real": "drive_selfplay"}
"""Result folders whose figure is another folder's script with other settings."""


def test_every_result_folder_has_a_quick_mode_in_make_bench():
    out = subprocess.run([sys.executable, "benchmarks/bench_all.py", "--list"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    quick = json.loads(out.splitlines()[-1])
    for script in quick.values():
        assert (ROOT / script).is_file(), script
    folders = {p.name for p in (ROOT / "benchmarks" / "results").iterdir() if p.is_dir() and p.name != "archive"}
    missing = sorted(f for f in folders if SAME_SCRIPT.get(f, f) not in quick)
    assert not missing, f"result folders without a quick mode in benchmarks/bench_all.py: {missing}"


def test_an_unknown_figure_is_one_line_and_exit_2():
    p = subprocess.run([sys.executable, "benchmarks/bench_all.py", "--only", "nope"], cwd=ROOT, capture_output=True,
                       text=True)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and "unknown figure" in p.stderr
