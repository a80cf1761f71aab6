"""The drive demo's pieces that need no training: the paired-trials table row states gap, SE and their ratio;
the live learning curve is drawn from the training rows; a checkout without the shipped T-maze weights is
told which are missing and the command that makes them (nothing is evaluated in their place)."""

from __future__ import annotations

from PIL import Image

import ttlab.drive.demo as drive_demo


def _ev(d: float, se: float) -> dict:
    return {"trial_0_goal_rate": 0.5, "trial_1_goal_rate": 0.5 + d, "ada_delta_trial_1_minus_0": d,
            "ada_delta_trial_1_minus_0_se": se, "trial_1_goal_rate_after_wrong_0": 0.9, "ego_episodes": 512.0}


def test_paired_row_states_gap_se_and_ratio():
    row = drive_demo.paired_row("p", _ev(0.4, 0.025))
    assert row == "| p | 0.500 | 0.900 | **+0.400 +- 0.025** | 16.0 | 0.900 | 512 |"
    assert row.count("|") == drive_demo.TABLE_HEAD.splitlines()[0].count("|")


def test_plot_curve_draws_rows(tmp_path):
    curve = [{"agent_steps": 12800 * (i + 1), "trial_0_goal_rate": 0.1 * i, "trial_1_goal_rate": 0.12 * i}
             for i in range(6)]
    p = drive_demo.plot_curve(curve, tmp_path / "c.png")
    img = Image.open(p).convert("RGB")
    assert img.size == (720, 340)
    blue = sum(1 for px in img.getdata() if px == (31, 119, 180))
    assert blue > 100  # the trial lines were drawn


def test_missing_shipped_weights_are_named_not_replaced(tmp_path, monkeypatch):
    monkeypatch.setattr(drive_demo, "available", lambda: [])
    lines, results = drive_demo.shipped(tmp_path, tmp_path)
    assert results == {}
    assert "not available" in lines[0] and "--preset hidden_exit " in lines[0] and "hidden_exit_mlp" in lines[0]


def test_shipped_tmaze_transformer_adapts_and_the_mlp_does_not():
    """The shipped weights the demo evaluates: on 64 held-out paired episodes the transformer's trial-1 goal rate
    gains beyond twice its SE (full run: +0.40 +- 0.03), the memoryless MLP's stays within 0.1 of zero."""
    import torch

    from ttlab.drive.adapt import held_out_env
    from ttlab.drive.adapt_eval import run_policy
    from ttlab.drive.policy_io import load_policy
    from ttlab.drive.pretrained import resolve

    torch.manual_seed(0)
    out = {}
    for core, name in drive_demo.SHIPPED.items():
        env = held_out_env(seed=drive_demo.HELD_OUT_SEED)
        policy = load_policy(resolve(f"pretrained:{name}"), env, torch.device("cpu")).eval()
        out[core] = run_policy(env, policy, 1)
    tr, ml = out["transformer"], out["mlp"]
    assert tr["ada_delta_trial_1_minus_0"] > 2 * tr["ada_delta_trial_1_minus_0_se"] > 0
    assert abs(ml["ada_delta_trial_1_minus_0"]) < 0.1
