"""The basin study's measurements (`ttlab.discover.basins`, run by benchmarks/erdos_basins.py) on small inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ttlab.discover import basins as m
from ttlab.discover.library import erdos_lse


def test_symmetry_of_a_mirror_symmetric_profile_changes_nothing_and_an_asymmetric_one_does():
    u = np.array([0.0, 0.3, 0.9, 0.6, 0.8, 1.0])
    sym = m.symmetry(np.concatenate([u, u[::-1]]))
    assert sym["max_abs_h_minus_mirror"] == 0.0 and sym["c5_symmetrised"] == pytest.approx(sym["c5"], abs=1e-15)
    asym = m.symmetry(np.array([0.0, 0.2, 1.0, 0.9, 0.7, 0.1, 0.0, 0.0]))
    assert asym["max_abs_h_minus_mirror"] > 0.5 and asym["c5_symmetrised"] != pytest.approx(asym["c5"])


def test_refine_doubles_the_resolution_and_never_reports_worse_than_its_start(tmp_path):
    f = tmp_path / "best.json"
    f.write_text(json.dumps({"construction": [0.0, 0.5, 0.9, 0.8, 0.6, 0.9, 0.4, 0.0]}))
    rows = m.refine(m.load(str(f), tmp_path / "unused.json"), rounds=2, round_s=1.0)
    assert [r["n"] for r in rows] == [8, 16, 32]
    assert rows[1]["c5"] <= rows[0]["c5"] + 1e-12 and rows[2]["c5"] <= rows[1]["c5"] + 1e-12


def test_load_names_the_missing_field(tmp_path):
    f = tmp_path / "x.json"
    f.write_text(json.dumps({"score": 0.4}))
    with pytest.raises(ValueError, match="no 'construction'"):
        m.load(str(f), tmp_path / "unused.json")


def test_refine_leaves_the_library_settings_as_it_found_them(tmp_path):
    before = dict(erdos_lse.SETTINGS)
    m.refine(np.array([0.0, 0.5, 0.9, 0.8, 0.6, 0.9, 0.4, 0.0]), rounds=1, round_s=0.5)
    assert erdos_lse.SETTINGS == before


def test_reference_finds_a_construction_by_name_and_names_the_choices_when_absent(tmp_path):
    f = tmp_path / "ref.json"
    f.write_text(json.dumps({"constructions": [{"name": "toy_2020", "h": [0.0, 0.6, 1.0, 0.8, 0.4, 0.0]}]}))
    out = m.reference(str(f), "toy", seconds=0.5)
    assert out["name"] == "toy_2020" and out["n"] == 6
    assert out["basin_n6"] <= out["c5"] + 1e-12 and "basin_n12" in out
    with pytest.raises(ValueError, match="toy_2020"):
        m.reference(str(f), "haugland")


def test_load_reads_a_published_construction_by_ref_prefix(tmp_path):
    f = tmp_path / "ref.json"
    f.write_text(json.dumps({"constructions": [{"name": "toy_2020", "h": [0.0, 0.6, 1.0, 0.8, 0.4, 0.0]}]}))
    assert m.load("ref:toy", str(f)).tolist() == [0.0, 0.6, 1.0, 0.8, 0.4, 0.0]
    with pytest.raises(ValueError, match="toy_2020"):
        m.load("ref:haugland", str(f))


def test_coarsen_block_averages_and_reports_a_local_optimum_no_worse_than_the_coarse_profile():
    h = np.array([0.0, 0.0, 0.5, 0.7, 0.9, 1.0, 0.8, 0.9, 0.6, 0.4, 0.0, 0.0])
    rows = m.coarsen(h, [2, 3], seconds=0.5)
    assert [r["n"] for r in rows] == [6, 4]
    assert all(r["c5_local_optimum"] <= r["c5_block_mean"] + 1e-12 for r in rows)
    with pytest.raises(ValueError, match="does not divide"):
        m.coarsen(h, [5], seconds=0.5)


def test_ladder_writes_an_exactly_checked_construction_and_restores_the_settings(tmp_path):
    before = dict(erdos_lse.SETTINGS)
    out = m.ladder(4.0, {"n0": 24, "levels": 1, "max_n": 96}, 0, str(tmp_path / "lad.json"))
    assert erdos_lse.SETTINGS == before
    saved = json.loads((tmp_path / "lad.json").read_text())
    assert out["feasible"] and out["n"] == len(saved["h"]) and saved["c5"] == out["c5_exact"] < 0.3835
    assert out["settings"]["n0"] == 24 and not out["below_record"]


def test_chains_report_each_chain_at_n0_and_count_the_levels():
    before = dict(erdos_lse.SETTINGS)
    rows = []
    out = m.chains(2, 1.0, {"n0": 24}, 0, on_row=rows.append)
    assert erdos_lse.SETTINGS == before and rows == out["rows"]
    assert out["count"] == 2 and [r["n"] for r in rows] == [24, 24] and all(0.38 < r["c5"] < 0.40 for r in rows)
    assert sum(out["levels"].values()) == 2 and out["lower"] == sum(r["lower"] for r in rows)
    assert all(r["cpu_s"] <= 1.5 and r["hops"] > 0 for r in rows)  # each chain hops, and stops at its CPU budget
