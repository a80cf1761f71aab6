"""`benchmarks/wm_ablation.py`: every arm is the evidence configuration with one axis changed, a tiny arm runs end to
end and is scored, a rerun skips finished arms, `inj_additive` is the `pred_x` run (trained once), and a bad arm is
a one-line error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from ttlab.worldmodel.data.pusht import generate_pusht
from ttlab.worldmodel.presets import pusht_cpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import wm_ablation as abl  # noqa: E402  (a benchmark script, importable for its pure functions)


def _bench(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "SDL_VIDEODRIVER": "dummy"}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "wm_ablation.py"), *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def test_each_arm_changes_one_axis_of_the_evidence_configuration():
    ev = pusht_cpu()
    x = abl.arm_config("pred_x", 0, 100, "d")
    assert x.diffusion == ev.diffusion and x.injection == ev.injection and x.hidden == ev.hidden
    assert x.depth == ev.depth and x.batch_size == ev.batch_size and x.sample_steps == ev.sample_steps
    assert not x.relative_actions and x.action_map == "gaussian" and x.split_seed == 0
    eps = abl.arm_config("pred_eps", 1, 100, "d").diffusion
    assert (eps.target, eps.schedule, eps.zero_terminal_snr) == ("eps", "linear", False)
    assert eps.delta and eps.timestep_sampling == "uniform" and eps.context_frames == 2
    flow = abl.arm_config("pred_flow", 0, 100, "d").diffusion
    assert (flow.target, flow.zero_terminal_snr, flow.snr_gamma) == ("flow", False, 0.0)
    film = abl.arm_config("inj_film", 1, 100, "d")
    assert film.injection == "film" and film.diffusion == ev.diffusion and film.seed == 1 and film.split_seed == 0
    assert abl.arm_config("inj_additive", 0, 100, "d") == x  # the same run
    with pytest.raises(ValueError, match="unknown arm"):
        abl.arm_config("pred_z", 0, 100, "d")
    wide = abl.arm_config("pred_eps", 1, 100, "d", hidden=256)
    assert wide.hidden == 256 and wide.run_name == "abl_pred_eps_s1_h256"
    assert replace(wide, hidden=ev.hidden, run_name="abl_pred_eps_s1") == abl.arm_config("pred_eps", 1, 100, "d")


def test_jobs_run_target_arms_per_seed_first_and_the_additive_arm_once():
    j = abl.jobs(["pred_x", "inj_additive", "inj_film", "pred_v"], [0, 1], [0])
    assert j == [("pred_v", 0), ("pred_x", 0), ("pred_v", 1), ("pred_x", 1), ("inj_film", 0)]


def test_tail_slope_of_a_line_and_a_resumed_curve():
    steps = list(range(0, 1001, 10))
    t = abl.tail_slope(steps, [1.0 - 2e-4 * s for s in steps])
    assert t["per_1000_steps"] == pytest.approx(-0.2) and t["from_step"] == 800
    assert t["relative_over_window"] == pytest.approx(-0.2 * 0.2 / (1.0 - 2e-4 * 900), rel=1e-3)
    assert abl.tail_slope(list(range(0, 200, 10)), [1.0] * 20)["per_1000_steps"] == pytest.approx(0.0, abs=1e-12)
    assert abl.tail_slope([0, 5, 10], [3.0, 2.0, 1.0])["per_1000_steps"] is None  # too few points to fit
    assert abl.merged_curve([[0, 3.0], [5, 2.0], [10, 1.5]], [[10, 1.4], [15, 1.0]]) == [[0, 3.0], [5, 2.0], [10, 1.4],
                                                                                         [15, 1.0]]


def test_save_arm_keeps_the_arms_another_process_wrote(tmp_path):
    out, protocol = tmp_path / "abl.json", {"steps": 3}
    abl.save_arm(out, {"protocol": protocol, "runs": {"pred_v@0": {"a": 1}}}, "pred_v@0", protocol)
    mine = {"protocol": protocol, "runs": {"pred_x@0": {"a": 2}}}  # read before pred_v@0 was written
    kept = abl.save_arm(out, mine, "pred_x@0", protocol)
    assert json.loads(out.read_text())["runs"] == {"pred_v@0": {"a": 1}, "pred_x@0": {"a": 2}} == kept["runs"]
    assert not list(tmp_path.glob("*.tmp"))


def test_save_arm_from_two_writers_at_once_keeps_every_arm(tmp_path):
    out, protocol = tmp_path / "abl.json", {"steps": 3}

    def writer(name: str) -> None:
        for i in range(40):
            k = f"{name}@{i}"
            abl.save_arm(out, {"protocol": protocol, "runs": {k: {"a": i}}}, k, protocol)

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("pred_x", "pred_v")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(json.loads(out.read_text())["runs"]) == 80


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pusht") / "pusht32"
    generate_pusht(d, num_episodes=16, resolution=32, max_steps=40, workers=1, seed=0, show_progress=False)
    return d


def test_a_tiny_arm_runs_end_to_end_and_a_rerun_skips_it(data, tmp_path):
    out = tmp_path / "res" / "abl.json"
    argv = ["--preset", "pusht_cpu_debug", "--arms", "pred_x,inj_additive,pred_flow", "--seeds", "0", "--steps", "3",
            "--data", str(data), "--eval-windows", "4", "--rollout-episodes", "2", "--rollout-horizon", "6",
            "--root", str(tmp_path / "runs"), "--out", str(out)]
    p = _bench(*argv)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["done"] == ["pred_flow@0", "pred_x@0"] and summary["missing"] == []
    res = json.loads(out.read_text())
    r = res["runs"]["pred_x@0"]
    assert r["train"]["steps"] == 3 and r["also"] == ["inj_additive"] and r["config"]["target"] == "x"
    assert r["train"]["precision"] in {"32-true", "bf16-mixed"}  # what the arm trained in, on this CPU
    assert res["runs"]["pred_flow@0"]["config"]["target"] == "flow"
    w = r["score"]["windows"]
    assert w["count"] == 4 and len(w["psnr/by_lag"]) == 3 and len(w["tee_px_ratio_to_copy_last/by_lag"]) == 3
    assert 0 < w["psnr"] < 60 and r["score"]["rollouts"]["episodes"] == 2
    assert set(res["baselines"]["windows"]) == {"copy_last", "mean_frame", "blend"}
    assert [s for s, _ in r["loss"]["curve"]] == [0, 1, 2]
    assert (out.parent / "loss_curves.png").stat().st_size > 0 and (out.parent / "metrics.png").stat().st_size > 0
    assert (out.parent / r["strip"]).is_file()
    again = _bench(*argv)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "pred_x@0: done, skipped" in again.stdout and "pred_flow@0: done, skipped" in again.stdout
    assert "training" not in again.stdout.split("runs:")[1]
    (out.parent / r["strip"]).unlink()
    redrawn = _bench("--strips", "--root", str(tmp_path / "runs"), "--out", str(out))
    assert redrawn.returncode == 0, redrawn.stderr[-3000:]
    assert json.loads(redrawn.stdout.strip().splitlines()[-1])["strips"] == ["strips/pred_flow_s0.png",
                                                                             "strips/pred_x_s0.png"]
    assert (out.parent / r["strip"]).is_file()
    table = _bench("--table", "--out", str(out))
    assert "| pred_x |" in table.stdout and "| inj_additive (= pred_x) |" in table.stdout
    assert "| pred_v | not run |" in table.stdout


def test_a_bad_arm_is_one_line_and_nonzero(tmp_path):
    p = _bench("--arms", "pred_x,pred_z", "--out", str(tmp_path / "x.json"))
    assert p.returncode != 0
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and "unknown arm" in p.stderr and "pred_z" in p.stderr
