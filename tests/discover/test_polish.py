"""`ttlab discover polish`: rounds in the sandbox, every kept construction re-verified, exact check at the end."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ttlab.common.data import shared_data_file
from ttlab.discover.config import PolishConfig
from ttlab.discover.polish import run_polish
from ttlab.discover.tasks.erdos import ErdosTask, exact_c5

REF = shared_data_file("erdos_reference.json", required=False)  # None when absent


def _start_file(tmp_path, h):
    p = tmp_path / "start.json"
    p.write_text(json.dumps({"h": list(map(float, h))}))
    return p


def test_polish_improves_a_rough_construction_and_checks_it_exactly(tmp_path):
    rng = np.random.default_rng(0)
    x = np.linspace(-1, 1, 40)
    h = np.clip(0.5 + 0.4 * np.cos(np.pi * x / 2) + 0.05 * rng.standard_normal(40), 0, 1)
    start = ErdosTask().verify(h).score
    out = tmp_path / "best.json"
    rec = run_polish(PolishConfig(file=_start_file(tmp_path, h), time_limit="12s", round_s=5.0, out=out,
                                  claim=str(round(start, 6))), log=lambda *_: None)
    saved = json.loads(out.read_text())
    assert saved["score"] == rec["score"] < start - 1e-4  # the SLP makes real progress on a rough start
    again = ErdosTask().verify(saved["construction"])
    assert again.valid and again.score == pytest.approx(saved["score"], abs=1e-15)
    c, ok, _ = exact_c5(np.asarray(saved["construction"]))
    assert ok and float(c) == pytest.approx(saved["score"], abs=1e-12)
    assert saved["exact"]["claim"]["holds"]
    assert saved["history"][0]["status"] == "start" and any(e["kept"] for e in saved["history"][1:])


def test_polish_refuses_bad_input(tmp_path):
    from ttlab.discover.cli import cmd_polish as main

    p = _start_file(tmp_path, [0.5] * 10)
    with pytest.raises(ValueError, match="nope"):
        main([str(p), "--program", "nope", "--time-limit", "3s"])
    with pytest.raises(FileNotFoundError):
        main([str(tmp_path / "missing.json")])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"h": [2.0, -1.0]}))
    with pytest.raises(ValueError):
        main([str(bad), "--time-limit", "3s"])


@pytest.mark.skipif(REF is None, reason="shared reference constructions not present")
def test_polish_picks_the_named_or_best_reference(tmp_path):
    from ttlab.discover.constructions import load_constructions
    from ttlab.discover.polish import pick

    items = load_constructions(REF)
    name, h, score = pick(ErdosTask(), items, "")
    assert name == "ttt_discover_2026" and h.size == 600 and score == pytest.approx(0.3808753232, abs=1e-9)
    assert pick(ErdosTask(), items, "haugland_2016")[1].size == 51
    with pytest.raises(ValueError, match="no construction named"):
        pick(ErdosTask(), items, "nobody")


def test_exactly_feasible_repairs_float_rounding_above_one():
    from ttlab.discover.polish import exactly_feasible

    h = np.array([1.0, 0.3, 0.7 - 2.0**-52, 0.0])  # float sum rounds to n/2, the exact sum is an ulp short
    assert not exact_c5(h)[1]
    fixed = exactly_feasible(h)
    c, ok, _ = exact_c5(fixed)
    assert ok and fixed.max() == 1.0 and np.abs(fixed - h).max() < 1e-14
    assert float(c) == pytest.approx(ErdosTask().verify(h).score, abs=1e-13)


def test_exactly_feasible_repairs_a_larger_shortfall_with_pieces_at_one():
    # a polished construction with pieces at 1 whose sum is 1e-11 short of n/2 (more than ulps can repair)
    from ttlab.discover.polish import exactly_feasible

    rng = np.random.default_rng(0)
    h = rng.uniform(0.2, 0.8, 600)
    h[100:110] = 1.0
    h[200:] *= (300 - h[:200].sum()) / h[200:].sum()
    h[300] -= 1e-11
    assert not exact_c5(h)[1]
    fixed = exactly_feasible(h)
    assert exact_c5(fixed)[1] and fixed.max() == 1.0 and np.abs(fixed - h).max() < 1e-10


def test_polish_benchmark_bad_name_is_one_line_error(tmp_path):
    """A construction name the file does not hold: a one-line usage error and exit 2, no traceback."""
    root = Path(__file__).resolve().parents[2]
    ref = root / "benchmarks" / "results" / "discover_polish" / "hop_s2.json"
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "discover_polish.py"), "--ref", str(ref),
                        "--name", "nope", "--budget", "5s", "--out", str(tmp_path / "x.json")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "no construction named 'nope'" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "x.json").exists()
