"""`benchmarks/drive_partner_adapt.py` on its tiny debug preset: every arm (core x privileged aux loss) trains and
is evaluated on held-out scenes against the training and the held-out partners, paired trials for every k < K,
a learning-curve PNG, the JSON file and one JSON line last."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from ttlab.drive.partners import HELD_OUT_PARTNERS, TRAIN_PARTNERS


def _bench():
    spec = importlib.util.spec_from_file_location(
        "drive_partner_adapt", Path(__file__).resolve().parents[2] / "benchmarks" / "drive_partner_adapt.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_smoke_every_arm_with_k3(tmp_path, monkeypatch, capsys):
    out, png = tmp_path / "p.json", tmp_path / "p.png"
    monkeypatch.setattr(sys, "argv", ["drive_partner_adapt.py", "--preset", "partner_adapt_debug", "--seeds", "1",
                                      "--first-seed", "3", "--cores", "transformer,lstm", "--aux", "both",
                                      "--eval-envs", "4",
                                      "--eval-episodes", "1", "--jobs", "1", "--set", "env.k_trials=3",
                                      "--out", str(out), "--png", str(png)])
    assert _bench().main() == 0
    res = json.loads(out.read_text())
    assert set(res["summary"]) == {"transformer", "transformer_aux", "lstm", "lstm_aux"}
    assert res["config"]["seeds"] == [3] and {r["seed"] for r in res["runs"]} == {3}
    assert res["config"]["K"] == 3 and {"commit", "nproc", "loadavg_start", "wall_s"} <= set(res)
    for r in res["runs"]:
        for where, names in (("train_partners", TRAIN_PARTNERS), ("held_out_partners", HELD_OUT_PARTNERS)):
            ev = r["eval"][where]
            assert {"ada_delta_trial_1_minus_0", "ada_delta_trial_2_minus_0", "trial_2_score"} <= set(ev)
            assert set(ev["per_partner"]) == set(names)
        assert r["curve"] and "trial_0_score" in r["curve"][-1]
        wipes = {"transformer": {"content", "clock"}, "lstm": {"content"}}[r["core"]]
        assert {k for k in r["eval"] if k.startswith("train_partners_wipe_")} == {f"train_partners_wipe_{w}" for w in wipes}
        assert "ada_delta_trial_2_minus_0" in r["eval"]["train_partners_wipe_content"]
        if r["aux"]:
            assert "task_accuracy" in r["curve"][-1], "the privileged arm trains the task head"
    assert "train_partners_delta_2_mean" in res["summary"]["lstm"]
    assert len(res["summary"]["transformer"]["wipe_clock_trial_2_score"]) == 1
    ceil = res["memoryless_ceiling_trial_1"]["train_partners"]
    sc = res["scripted_held_out"]
    assert ceil == max(sc[n]["train_partners"]["trial_1_score"] for n in sc if n != "memory")
    t1 = res["summary"]["lstm"]["train_partners_trial_1_score"][0]
    assert res["summary"]["lstm"]["train_partners_trial_1_minus_memoryless_ceiling"] == [round(t1 - ceil, 4)]
    t2 = res["summary"]["lstm"]["train_partners_trial_2_score"][0]
    assert res["summary"]["lstm"]["train_partners_trial_2_minus_memoryless_ceiling"] == [round(t2 - ceil, 4)]
    assert "transformer_no_aux_trial_1_above_memoryless_ceiling_every_seed" in res["targets"]
    assert res["scripted_held_out"]["memory"]["train_partners"]["ada_delta_trial_1_minus_0"] > 0.2
    assert png.is_file()
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["benchmark"] == "drive_partner_adapt" and "targets" in line


def test_bad_core_and_override_are_refused(tmp_path, monkeypatch, capsys):
    bench = _bench()
    monkeypatch.setattr(sys, "argv", ["drive_partner_adapt.py", "--cores", "gru", "--out", str(tmp_path / "x.json")])
    assert bench.main() == 2
    monkeypatch.setattr(sys, "argv", ["drive_partner_adapt.py", "--set", "env.nope=1", "--out", str(tmp_path / "x.json")])
    assert bench.main() == 2
    assert "unknown override 'env.nope'" in capsys.readouterr().out
