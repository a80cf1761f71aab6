"""`ttlab drive train --preset debug` end to end, checkpoint + resume, population play, eval."""

from __future__ import annotations

import json

import pytest
import torch

from ttlab.common.checkpoint import CheckpointError, load_checkpoint
from ttlab.drive.cli import main as drive_main
from ttlab.drive.evaluate import EvalConfig, evaluate
from ttlab.drive.presets import debug
from ttlab.drive.train import coplayer_assignment, train


def test_debug_preset_trains_end_to_end_with_cleanrl_metric_names(tmp_path):
    cfg = debug()
    cfg.root, cfg.run_name = str(tmp_path), "dbg"
    out = train(cfg)
    assert out["update"] == 3
    for k in ("charts/SPS", "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl",
              "losses/clipfrac", "losses/explained_variance", "env/trial_0_score", "env/ada_delta_trial_1_minus_0"):
        assert k in out, k
    assert out["charts/SPS"] > 0
    assert (tmp_path / "drive" / "dbg" / "checkpoints" / "latest.safetensors").is_file()
    assert list((tmp_path / "drive" / "dbg" / "tb").iterdir())


def test_resume_continues_from_the_checkpoint(tmp_path):
    cfg = debug()
    cfg.root, cfg.run_name = str(tmp_path), "r"
    cfg.total_agent_steps = 2 * 128
    train(cfg)
    stem = tmp_path / "drive" / "r" / "checkpoints" / "latest"
    first = load_checkpoint(stem)
    cfg.resume = True
    out = train(cfg)  # budget already spent: nothing new, same weights saved back
    assert out["update"] == 2
    same = load_checkpoint(stem)
    assert all(torch.equal(first["policy"][k], same["policy"][k]) for k in first["policy"])
    cfg.total_agent_steps = 3 * 128
    out = train(cfg)
    assert out["update"] == 3 and out["agent_steps"] == 3 * 128
    later = load_checkpoint(stem)
    assert later["update"] == 3
    assert any(not torch.equal(first["policy"][k], later["policy"][k]) for k in first["policy"])


def test_population_play_with_frozen_coplayers(tmp_path):
    cfg = debug()
    cfg.root, cfg.run_name = str(tmp_path), "co"
    cfg.total_agent_steps = 128
    train(cfg)
    stem = tmp_path / "drive" / "co" / "checkpoints" / "latest"
    frozen = load_checkpoint(stem)["policy"]
    cfg2 = debug()
    cfg2.root, cfg2.run_name = str(tmp_path), "learner"
    cfg2.coplayers, cfg2.coplayer_envs = (str(stem),), 0.5
    out = train(cfg2)
    assert out["update"] == 3
    assert all(torch.equal(frozen[k], load_checkpoint(stem)["policy"][k]) for k in frozen)  # stayed frozen


def test_coplayer_assignment_is_per_env():
    a = coplayer_assignment(4, 3, 2, 0.5, torch.device("cpu")).view(4, 3)
    assert a.tolist() == [[-1, 0, 0], [-1, 1, 1], [-1, -1, -1], [-1, -1, -1]]


def test_cli_train_then_eval_writes_trial_metrics(tmp_path):
    assert drive_main(["train", "--preset", "debug", "--root", str(tmp_path), "--run-name", "c"]) == 0
    out = tmp_path / "eval.json"
    stem = tmp_path / "drive" / "c" / "checkpoints" / "latest"
    assert drive_main(["eval", "--mode", "trial", "--scenarios", "procedural:n=4,agents=4", "--num-envs", "2",
                       "--episodes", "1", "--device", "cpu", "--checkpoint", str(stem), "--out", str(out)]) == 0
    m = json.loads(out.read_text())
    assert {"trial_0_score", "trial_1_score", "ada_delta_trial_1_minus_0"} <= set(m)


def test_eval_missing_checkpoint_names_the_file(tmp_path):
    cfg = EvalConfig(mode="trial", scenarios="procedural:n=4,agents=4", num_envs=2, episodes=1, device="cpu",
                     checkpoint=str(tmp_path / "nope"), out=tmp_path / "e.json")
    with pytest.raises(CheckpointError, match="nope"):
        evaluate(cfg)
