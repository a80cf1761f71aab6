"""`ttlab drive train | eval | render` range checks: every preset passes them, and a flag out of range is one line
naming it, exit 2, before a scene is loaded or a run directory made."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ttlab.common.data import SharedDataMissing
from ttlab.common.errors import UserError
from ttlab.drive.cli import main as drive_main
from ttlab.drive.flags import check_train
from ttlab.drive.presets import TRAIN_PRESETS


@pytest.mark.parametrize("name", sorted(TRAIN_PRESETS))
def test_every_train_preset_is_in_range(name):
    try:
        cfg = TRAIN_PRESETS[name]()
    except SharedDataMissing as e:  # a preset on the shared CARLA scene, on a machine without it
        pytest.skip(str(e))
    check_train(cfg)


def test_edges_and_nan():
    cfg = TRAIN_PRESETS["debug"]()
    check_train(replace(cfg, ppo=replace(cfg.ppo, gamma=1.0, gae_lambda=0.0, ent_coef=0.0, lr_end=0.0)))
    for ppo, needle in [(replace(cfg.ppo, lr=float("nan")), "--ppo.lr nan: must be > 0"),
                        (replace(cfg.ppo, target_kl=0.0), "--ppo.target-kl 0.0: must be > 0"),
                        (replace(cfg.ppo, gamma=-0.1), "--ppo.gamma -0.1: must be in [0, 1]")]:
        with pytest.raises(UserError) as e:
            check_train(replace(cfg, ppo=ppo))
        assert str(e.value) == needle
    with pytest.raises(UserError, match="--policy.hidden 30: must be a multiple of --policy.n-heads 4"):
        check_train(replace(cfg, policy=replace(cfg.policy, core="transformer", hidden=30, n_heads=4)))


@pytest.mark.parametrize("flags,needle", [
    (["--rollout-steps", "0"], "--rollout-steps 0: must be >= 1"),  # was: ZeroDivisionError
    (["--checkpoint-every", "0"], "--checkpoint-every 0: must be >= 1"),  # was: ZeroDivisionError
    (["--ppo.update-epochs", "0"], "--ppo.update-epochs 0: must be >= 1"),  # was: RuntimeError from torch.stack
    (["--ppo.num-minibatches", "0"], "--ppo.num-minibatches 0: must be >= 1"),  # was: trained as 1
    (["--ppo.lr", "-1"], "--ppo.lr -1.0: must be > 0"),  # was: torch's "Invalid learning rate"
    (["--ppo.gamma", "2"], "--ppo.gamma 2.0: must be in [0, 1]"),  # was: trained
    (["--total-agent-steps", "0"], "--total-agent-steps 0: must be >= 1"),  # was: exit 0 after an update
    (["--policy.hidden", "0"], "--policy.hidden 0: must be >= 1"),  # was: trained a width-0 core
    (["--env.num-envs", "0"], "--env.num-envs 0: must be >= 1"),
    (["--partners", "yield", "--coplayers", "x"], "--partners and --coplayers are exclusive"),  # was: after the run dir
])
def test_train_flag_out_of_range_is_one_line_before_a_run_directory(tmp_path, capsys, flags, needle):
    assert drive_main(["train", "--preset", "debug", "--root", str(tmp_path / "runs"), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ttlab drive train: error: ") and needle in err and "\n" not in err, err
    assert not (tmp_path / "runs").exists()


def test_eval_and_render_name_an_empty_source_and_a_bad_step_count(tmp_path, capsys):
    out = tmp_path / "out"
    assert drive_main(["eval", "--checkpoint", "pretrained:selfplay", "--scenarios", "procedural:n=0",
                       "--out", str(out / "e.json")]) == 2
    assert "scenario source 'procedural:n=0': no scenes" in capsys.readouterr().err
    assert drive_main(["render", "--steps", "-3", "--out", str(out / "r.mp4")]) == 2  # was: a 1-frame video
    assert "--steps -3: must be >= 1" in capsys.readouterr().err
    assert not out.exists()
