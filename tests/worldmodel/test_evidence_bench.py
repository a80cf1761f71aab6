"""`benchmarks/wm_evidence.py` end to end on a tiny dataset and model: over 2 DDP processes the global batch is the
preset's, the steps and the JSON line are rank 0's alone, and a --devices that does not divide the batch is a
one-line error.

Not marked slow on purpose: the DDP path of the evidence command runs in `make test` (about a minute)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ttlab.worldmodel.presets import pusht_cpu

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OMP_NUM_THREADS": "1", "SDL_VIDEODRIVER": "dummy"}


def _evidence(run: Callable, tmp: Path, *argv: str) -> subprocess.CompletedProcess:
    return run([sys.executable, str(ROOT / "benchmarks" / "wm_evidence.py"), *argv], cwd=tmp, env=_env())


def test_evidence_over_two_processes_keeps_the_global_batch_and_reports_once(tmp_path, run_group):
    out = _evidence(run_group, tmp_path, "--data", str(tmp_path / "data"), "--episodes", "24", "--episode-steps", "150",
                    "--abs-actions", "--action-map", "gaussian", "--hidden", "32", "--depth", "2",
                    "--devices", "2", "--max-steps", "4", "--eval-windows", "4", "--rollout-episodes", "2",
                    "--run-name", "ddp", "--root", str(tmp_path / "runs"), "--out-dir", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1  # rank 1 trains and exits without scoring or printing
    res = json.loads(lines[0])
    assert res == json.loads((tmp_path / "out" / "wm_evidence.json").read_text())
    assert res["devices"] == 2 and res["train"]["steps"] == 4
    assert res["train"]["batch"] == pusht_cpu().batch_size and res["train"]["batch_per_process"] == pusht_cpu().batch_size // 2
    curve = json.loads((tmp_path / "runs" / "wm" / "ddp" / "loss_curve.json").read_text())
    assert curve["world_size"] == 2 and curve["global_batch"] == pusht_cpu().batch_size
    # the training rate counts both processes' steps
    trained = "bf16" if res["speed"]["training_precision"].startswith("bf16") else "fp32"
    per_step, minutes = res["speed"][f"step_{trained}"]["gflop_per_step"], res["train"]["minutes"]
    assert res["speed"]["training_achieved_gflops"] == pytest.approx(per_step * 4 * 2 / (minutes * 60), rel=0.1)
    record = json.loads((tmp_path / "runs" / "wm" / "ddp" / "evidence_train.json").read_text())
    assert (record["devices"], record["batch_per_process"]) == (2, pusht_cpu().batch_size // 2)
    assert (tmp_path / "out" / "strip.png").stat().st_size > 0
    # a rescoring with other sampling noise: the same windows and episodes (baselines equal), other draws
    again = _evidence(run_group, tmp_path, "--data", str(tmp_path / "data"), "--abs-actions", "--action-map", "gaussian",
                      "--eval-only", "--eta", "1.0", "--noise-seed", "1", "--eval-windows", "4",
                      "--guide", str(tmp_path / "runs" / "wm" / "ddp" / "checkpoints" / "last.ckpt"), "--guidance", "2",
                      "--rollout-episodes", "2", "--run-name", "ddp", "--root", str(tmp_path / "runs"),
                      "--out-dir", str(tmp_path / "out_n1"))
    assert again.returncode == 0, again.stderr[-3000:]
    res1 = json.loads(again.stdout.splitlines()[-1])
    assert res1["model"]["sampler"]["eta"] == 1.0 and res1["model"]["sampler"]["noise_seed"] == 1
    assert "step_bf16" not in res1["speed"] and "not measured" in res1["speed"]["note"]  # speed is a training's
    assert res1["model"]["sampler"]["guidance"] == 2.0 and res1["model"]["sampler"]["guide"].endswith("last.ckpt")
    for part in ("windows", "rollouts"):
        assert res1[part]["copy_last"] == res[part]["copy_last"] and res1[part]["blend"] == res[part]["blend"]
    # the sampler is chosen on other episodes than the evidence's, and the choice is one the evidence accepts
    sweep = run_group([sys.executable, str(ROOT / "benchmarks" / "wm_sampler_sweep.py"), "--run",
                       str(tmp_path / "runs" / "wm" / "ddp"), "--data", str(tmp_path / "tune"), "--episodes", "4",
                       "--configs", "full_sequence:0,pyramid:1:steps=3:hist=0.05,full_sequence:0:guide=last:w=2",
                       "--eval-windows", "4",
                       "--rollout-episodes", "2",
                       "--out", str(tmp_path / "sweep.json")], cwd=tmp_path, env=_env())
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    chosen = json.loads(sweep.stdout.splitlines()[-1])
    assert [(c["mode"], c["keep"]) for c in chosen["configs"]] == [("full_sequence", 0), ("pyramid", 1),
                                                                   ("full_sequence", 0)]
    # options left out are the run's; given ones are used and recorded
    run_steps = json.loads((tmp_path / "runs" / "wm" / "ddp" / "config.json").read_text())["sample_steps"]
    assert [(c["steps"], c["hist"], c["eta"], c["guide"], c["w"]) for c in chosen["configs"]] == [
        (run_steps, 0.0, 0.0, None, 1.0), (3, 0.05, 0.0, None, 1.0), (run_steps, 0.0, 0.0, "last", 2.0)]
    assert chosen["tuning_data"]["seed"] != 0 and chosen["tuning_data"]["episodes"] == 4
    ssims = {(c["mode"], c["keep"], c["w"]): c["rollouts"]["model"]["ssim"] for c in chosen["configs"]}
    assert ssims[(chosen["chosen"]["mode"], chosen["chosen"]["keep"], chosen["chosen"]["w"])] == max(ssims.values())
    # the generalisation check scores the same model on held-out and on trained-on episodes, baselines beside it
    gen = run_group([sys.executable, str(ROOT / "benchmarks" / "wm_generalisation.py"), "--run",
                     str(tmp_path / "runs" / "wm" / "ddp"), "--data", str(tmp_path / "data"), "--windows", "4",
                     "--rollout-episodes", "2"], cwd=tmp_path, env=_env())
    assert gen.returncode == 0, gen.stderr[-3000:]
    g = json.loads(gen.stdout.splitlines()[-1])
    held, seen = set(g["heldout_episodes"]), set(g["trained_on_episodes"])
    assert held and len(seen) == len(held) and not held & seen and seen <= set(range(24))
    for part in ("windows", "rollouts"):
        assert {"model", "copy_last", "mean_frame", "blend"} <= set(g["heldout"][part])
        assert g["gap_trained_on_minus_heldout"][f"{part}_psnr"]["model"] == pytest.approx(
            g["trained_on"][part]["model"]["psnr"] - g["heldout"][part]["model"]["psnr"], abs=1e-3)
    bad = run_group([sys.executable, str(ROOT / "benchmarks" / "wm_generalisation.py"), "--run",
                     str(tmp_path / "nope")], cwd=tmp_path, env=_env())
    assert bad.returncode == 2 and "--run" in bad.stderr.strip().splitlines()[-1]


def test_devices_that_do_not_divide_the_batch_are_a_one_line_error(tmp_path, run_group):
    for argv, name in ((("--devices", "3"), "--devices 3"), (("--batch", "-4"), "--batch -4"),
                       (("--history-noise", "1"), "--history-noise 1"), (("--sample-steps", "-1"), "--sample-steps -1"),
                       (("--eta", "-0.5"), "--eta -0.5"), (("--refiner", "-1"), "--refiner -1"),
                       (("--heldout-of", "-1"), "--heldout-of -1"), (("--guidance", "0.5"), "--guidance 0.5"),
                       (("--guidance", "2"), "--guidance 2"),
                       (("--eval-only", "--guide", "nope.ckpt"), "--guide nope.ckpt")):
        out = _evidence(run_group, tmp_path, *argv, "--data", str(tmp_path / "none"))
        assert out.returncode == 2
        assert name in out.stderr.strip().splitlines()[-1]
        assert not (tmp_path / "none").exists()


def test_sampler_sweep_refuses_bad_settings_and_the_evidence_seed(tmp_path, run_group):
    sweep = [sys.executable, str(ROOT / "benchmarks" / "wm_sampler_sweep.py"), "--run", str(tmp_path)]
    for extra, words in ((["--configs", "pyramid:x"], "--configs"), (["--configs", "spiral:0"], "--configs"),
                         (["--configs", "pyramid:0:steps=0"], "--configs"), (["--configs", "pyramid:0:seed=1"], "--configs"),
                         (["--configs", "pyramid:0:w=2"], "--configs"), (["--configs", "pyramid:0:guide=x:w=2"], "--configs"),
                         ([], "no checkpoints"), (["--data-seed", "0"], "--data-seed 0")):
        out = run_group(sweep + extra, cwd=tmp_path, env=_env())
        assert out.returncode == 2 and words in out.stderr.strip().splitlines()[-1], out.stderr


def test_the_headline_flags_train_the_pusht_map_preset():
    """`ttlab wm train --preset pusht_map --devices 2` is the model of the README's headline command."""
    import importlib.util
    from dataclasses import replace

    from ttlab.worldmodel.presets import pusht_map

    spec = importlib.util.spec_from_file_location("wm_evidence", ROOT / "benchmarks" / "wm_evidence.py")
    ev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ev)
    args = ev.build_parser().parse_args(["--abs-actions", "--action-map", "gaussian", "--compile", "--devices", "2",
                                         "--batch", "32", "--train-minutes", "83", "--refiner", "32"])
    cfg = ev.train_config(args, Path("data/pusht64_smooth"), 32)
    preset = replace(pusht_map(), devices=2, split_seed=0, seed=args.seed, run_name=args.run_name, root=args.root)
    assert cfg == preset
    assert cfg.batch_size * cfg.devices == 32 and cfg.refiner == 32 and not cfg.relative_actions
    no_refiner = ev.build_parser().parse_args(["--abs-actions", "--action-map", "gaussian", "--compile",
                                               "--devices", "2", "--batch", "32", "--train-minutes", "83"])
    assert ev.train_config(no_refiner, Path("data/pusht64_smooth"), 32) != preset  # the comparison sees the model
