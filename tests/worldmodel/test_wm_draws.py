"""`benchmarks/wm_draws.py`: several scorings of one run that differ only in their noise seed, summarised."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("wm_draws", ROOT / "benchmarks" / "wm_draws.py")
wm_draws = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wm_draws)


def _scoring(noise_seed: int, ro_ssim: float, kept: float, eta: float = 1.0, steps: int = 100,
             guide: dict | None = None) -> dict:
    scores = {"psnr": 26.0, "ssim": ro_ssim, "tee_kept": kept}
    base = {"psnr": 24.0, "ssim": 0.89, "tee_kept": 0.0}
    targets = {"windows_psnr_beats_all_baselines": {"met": True}, "windows_ssim_beats_all_baselines": {"met": True},
               "rollouts_psnr_beats_all_baselines": {"met": True},
               "rollouts_ssim_beats_all_baselines": {"met": ro_ssim > 0.89},
               "tee_ink_at_rollout_frame_8_at_least_0.8": {"kept": kept, "met": kept >= 0.8}}
    return {"benchmark": "wm_evidence", "train": {"steps": steps, "run_config": {"seed": 4}},
            "model": {"params_M": 2.4, "hidden": 128, "depth": 6, "refiner": 32, "sample_steps": 10,
                      "sampler": {"mode": "full_sequence", "eta": eta, "noise_seed": noise_seed, **(guide or {})}},
            "windows": {"model": {**scores, "ssim": 0.94}, "copy_last": base, "mean_frame": base, "blend": base},
            "rollouts": {"model": scores, "copy_last": base, "mean_frame": base, "blend": base}, "targets": targets}


def test_draws_report_spread_and_the_verdict_of_each_draw_and_of_the_mean(tmp_path):
    paths = []
    for n, (ssim, kept) in enumerate([(0.886, 0.79), (0.896, 0.81), (0.893, 0.78)]):
        d = tmp_path / f"n{n}"
        d.mkdir()
        (d / "wm_evidence.json").write_text(json.dumps(_scoring(n, ssim, kept)))
        paths.append(str(d))
    out = tmp_path / "draws.json"
    assert wm_draws.main([*paths, "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    ro = res["rollouts"]["model"]["ssim"]
    assert ro["mean"] == pytest.approx(0.8917, abs=1e-4) and ro["min"] == 0.886 and ro["max"] == 0.896
    assert ro["sd"] == pytest.approx(0.0051, abs=1e-4)
    t = res["targets"]["rollouts_ssim_beats_all_baselines"]
    assert (t["met_in_draws"], t["of"], t["met_by_mean"]) == (2, 3, True)
    f8 = res["targets"]["tee_ink_at_rollout_frame_8_at_least_0.8"]
    assert (f8["met_in_draws"], f8["met_by_mean"]) == (1, False) and f8["kept"]["mean"] == pytest.approx(0.7933, abs=1e-4)
    assert res["noise_seeds"] == [0, 1, 2] and res["rollouts"]["blend"]["ssim"] == 0.89


@pytest.mark.parametrize("other,needle", [
    (_scoring(1, 0.89, 0.8, eta=0.0), "another run or sampler"),
    (_scoring(1, 0.89, 0.8, steps=200), "another run or sampler"),
    (_scoring(0, 0.89, 0.8), "noise seeds repeat"),
    (_scoring(1, 0.89, 0.8, guide={"guide": "run/checkpoints/step=1000.ckpt", "guidance": 1.5}),
     "another run or sampler"),
], ids=["other-sampler", "other-step", "same-noise", "guided"])
def test_draws_refuse_scorings_that_differ_in_more_than_the_noise(tmp_path, capsys, other, needle):
    (tmp_path / "a.json").write_text(json.dumps(_scoring(0, 0.89, 0.8)))
    (tmp_path / "b.json").write_text(json.dumps(other))
    assert wm_draws.main([str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("wm_draws: error: ") and needle in err and "\n" not in err
    assert not (tmp_path / "o.json").exists()


def test_a_scoring_recorded_before_guidance_is_an_unguided_one(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(_scoring(0, 0.89, 0.8)))
    (tmp_path / "b.json").write_text(json.dumps(_scoring(1, 0.89, 0.8, guide={"guide": None, "guidance": 1.0})))
    assert wm_draws.main([str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(tmp_path / "o.json")]) == 0
