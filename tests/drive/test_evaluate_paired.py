"""`ttlab drive eval`: exactly N episodes per env, trial k paired with trial 0, env config from the checkpoint."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ttlab.drive.cli import main as drive_main
from ttlab.drive.config import EnvConfig
from ttlab.drive.evaluate import EvalConfig, PairedTrials, env_config, held_out
from ttlab.drive.trials import TrialMetrics


def _add(p: PairedTrials, ended, trial, goal):
    E, A = goal.shape
    z = torch.zeros(E, A)
    p.add(torch.tensor(ended), torch.zeros(E, dtype=torch.bool), torch.tensor(trial), torch.ones(E, A, dtype=torch.bool),
          goal.float(), z, z, z)


def test_a_fast_env_counts_exactly_as_many_episodes_as_a_slow_one():
    """Env 0 runs three 2-trial episodes while env 1 runs one: with episodes=1 only each env's first counts."""
    p = PairedTrials(TrialMetrics(2, torch.device("cpu")), num_envs=2, num_agents=1, k_trials=2, episodes=1, device="cpu")
    # env 0: ep0 (0 then 1), ep1 (1 then 1), ep2 (1 then 1); env 1: ep0 (0 then 0)
    _add(p, [True, False], [0, 0], torch.tensor([[0.0], [0.0]]))
    _add(p, [True, False], [1, 0], torch.tensor([[1.0], [0.0]]))
    assert not p.complete()
    for _ in range(2):
        _add(p, [True, False], [0, 0], torch.tensor([[1.0], [0.0]]))
        _add(p, [True, False], [1, 0], torch.tensor([[1.0], [0.0]]))
    _add(p, [False, True], [0, 0], torch.tensor([[1.0], [0.0]]))
    _add(p, [False, True], [0, 1], torch.tensor([[1.0], [0.0]]))
    assert p.complete()
    s = p.summary()
    assert s["episodes"] == 2 and s["ego_trials"] == 4
    assert s["trial_0_goal_rate"] == 0.0  # not 3/4: env 0's later episodes are not counted
    assert s["trial_1_goal_rate"] == 0.5
    assert s["ada_delta_trial_1_minus_0_goal_rate"] == 0.5 and s["ada_delta_trial_1_minus_0_pairs"] == 2


def test_trial_k_is_paired_with_trial_0_of_the_same_episode_and_agent():
    p = PairedTrials(TrialMetrics(2, torch.device("cpu")), num_envs=1, num_agents=4, k_trials=2, episodes=1, device="cpu")
    g0, g1 = torch.tensor([[1.0, 0.0, 1.0, 0.0]]), torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    _add(p, [True], [0], g0)
    _add(p, [True], [1], g1)
    s = p.summary()
    d = (g1 - g0).flatten()
    assert s["ada_delta_trial_1_minus_0_goal_rate"] == pytest.approx(float(d.mean()))
    assert s["ada_delta_trial_1_minus_0_goal_rate_stderr"] == pytest.approx(float(d.std() / math.sqrt(4)))
    assert s["ada_delta_trial_1_minus_0"] == pytest.approx(0.5)  # score = goal here (no collisions)


def test_eval_env_takes_the_checkpoint_config_and_warns_on_an_override():
    trained = EnvConfig(goal_behavior="trial", k_trials=3, trial_length=40, partner_slots=8, road_slots=64,
                        reward_collision=-0.3)
    env = env_config(EvalConfig(mode="trial", num_envs=4), trained)
    assert (env.k_trials, env.trial_length, env.partner_slots, env.road_slots) == (3, 40, 8, 64)
    assert env.reward_collision == -0.3 and env.num_envs == 4
    with pytest.warns(UserWarning, match="trial_length=40"):
        env = env_config(EvalConfig(mode="trial", trial_length=50), trained)
    assert env.trial_length == 50
    assert env_config(EvalConfig(mode="self_play"), trained).k_trials == 1
    assert held_out("procedural:n=8,seed=3,families=merge", 3) == "procedural:n=8,families=merge,seed=1003"


def test_cli_eval_runs_exactly_n_episodes_per_env_with_the_trained_layout(tmp_path):
    assert drive_main(["train", "--preset", "debug", "--root", str(tmp_path), "--run-name", "e"]) == 0
    stem = tmp_path / "drive" / "e" / "checkpoints" / "latest"
    out = tmp_path / "eval.json"
    # no slot flags: the debug preset's 8 partner / 32 road slots come from the checkpoint
    assert drive_main(["eval", "--checkpoint", str(stem), "--mode", "trial", "--num-envs", "3", "--episodes", "2",
                       "--device", "cpu", "--out", str(out)]) == 0
    m = json.loads(out.read_text())
    assert m["episodes"] == 3 * 2 and m["k_trials"] == 2 and m["trial_length"] == 8
    assert m["scenarios"].endswith("seed=1000")
    assert m["ada_delta_trial_1_minus_0_pairs"] > 0
    assert {"trial_0_goal_rate", "trial_1_goal_rate", "ada_delta_trial_1_minus_0_goal_rate_stderr"} <= set(m)
