"""The shipped pretrained driver: addressable by name, loads, and drives."""

from __future__ import annotations

import json

import pytest

from ttlab.drive.cli import main as drive_main
from ttlab.drive.evaluate import EvalConfig, evaluate
from ttlab.drive.pretrained import available, resolve


def test_pretrained_selfplay_is_shipped_and_unknown_names_are_refused():
    assert "selfplay" in available()
    assert resolve("runs/x/latest") == "runs/x/latest"
    with pytest.raises(ValueError, match="no pretrained policy 'nope'; shipped: .*selfplay"):
        resolve("pretrained:nope")


def test_pretrained_selfplay_drives_a_procedural_scene_to_its_goals(tmp_path):
    """Every vehicle of one held-out procedural scene (seed 1000, never trained on) driven by the shipped policy,
    greedy, over 8 episodes: at least 0.9 of them reach their goal."""
    m = evaluate(EvalConfig(checkpoint="pretrained:selfplay", mode="self_play", scenarios="procedural:n=1,agents=8,seed=1000",
                            num_envs=8, episodes=1, greedy=True, device="cpu", out=tmp_path / "e.json"))
    assert m["ego_trials"] >= 8 * 4
    assert m["trial_0_goal_rate"] >= 0.9


def test_cli_eval_and_render_take_the_pretrained_name(tmp_path):
    out = tmp_path / "e.json"
    assert drive_main(["eval", "--checkpoint", "pretrained:selfplay", "--scenarios", "procedural:n=2,agents=4,seed=7",
                       "--num-envs", "2", "--episodes", "1", "--device", "cpu", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["ego_trials"] > 0
    gif = tmp_path / "r.gif"
    assert drive_main(["render", "--checkpoint", "pretrained:selfplay", "--out", str(gif), "--device", "cpu"]) == 0
    assert gif.is_file() and gif.with_suffix(".json").is_file()
    assert drive_main(["eval", "--checkpoint", "pretrained:nope", "--out", str(out)]) == 2
