"""Bad input to `ttlab wm ...` is one line `ttlab wm <cmd>: error: <what is wrong>` on stderr with exit 2, never a
traceback, on tiny fixtures written in the upstream layouts."""

from __future__ import annotations

import json
import re

import pytest
from test_data_dino_wm import write_pusht
from test_data_lerobot import write_v21

from ttlab.cli import main


def _one_line_error(capsys, argv, prog, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{prog}: error: "), err
    assert "\n" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


@pytest.mark.parametrize("cmd", ["info", "check"])
def test_data_info_and_check_report_an_unreadable_dataset_through_the_error_boundary(tmp_path, capsys, cmd):
    (tmp_path / "empty").mkdir()
    _one_line_error(capsys, ["wm", "data", cmd, "--path", str(tmp_path / "empty")], f"ttlab wm data {cmd}",
                    "not a recognised dataset")
    _one_line_error(capsys, ["wm", "data", cmd, "--path", str(tmp_path / "nope")], f"ttlab wm data {cmd}",
                    "dataset path does not exist")


def test_data_check_still_exits_1_when_the_dataset_opens_but_an_episode_is_bad(tmp_path, capsys):
    write_pusht(tmp_path, lens=[4, 5])
    (tmp_path / "obses" / "episode_001.mp4").write_bytes(b"\x00" * 64)
    assert main(["wm", "data", "check", "--path", str(tmp_path)]) == 1
    assert "episode_001.mp4" in capsys.readouterr().out


def test_data_pusht_and_encode_flag_errors_are_one_line(tmp_path, capsys):
    _one_line_error(capsys, ["wm", "data", "pusht", "--out", str(tmp_path / "p"), "--episodes", "0"],
                    "ttlab wm data pusht", "episodes >= 1")
    assert not (tmp_path / "p").exists()
    write_pusht(tmp_path / "d", lens=[4, 5])
    _one_line_error(capsys, ["wm", "encode", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "lat")],
                    "ttlab wm encode", "--codec is required")
    for flags, needle in [(["--batch-size", "0"], "--batch-size 0: must be >= 1"),  # was: looped forever
                          (["--size", "-4"], "--size -4: must be >= 0")]:  # was: written into the header
        _one_line_error(capsys, ["wm", "encode", "--codec", "pixel", "--data", str(tmp_path / "d"),
                                 "--out", str(tmp_path / "lat"), *flags], "ttlab wm encode", needle)
    assert not (tmp_path / "lat").exists()


@pytest.mark.parametrize("state,needle", [
    ({"w": "tensor"}, "missing 'model_cfg'"),  # some other checkpoint (a codec's, a training state's)
    ({"model_cfg": {"bogus": 1}, "w": "tensor"}, "unexpected keyword argument 'bogus'"),
], ids=["other-checkpoint", "unknown-model-setting"])
def test_eval_on_a_checkpoint_that_is_not_nanowm_weights_names_the_file(tmp_path, capsys, state, needle):
    import torch

    from ttlab.common.checkpoint import save_checkpoint

    stem = tmp_path / "run" / "checkpoints" / "weights_latest"
    save_checkpoint(stem, {k: torch.zeros(2) if v == "tensor" else v for k, v in state.items()})
    _one_line_error(capsys, ["wm", "eval", "--checkpoint", str(tmp_path / "run"), "--device", "cpu"], "ttlab wm eval",
                    str(stem), "not NanoWM weights", needle)
    assert not (tmp_path / "run" / "eval").exists()


def test_eval_on_garbage_checkpoint_files_names_the_file(tmp_path, capsys):
    ck = tmp_path / "run" / "checkpoints"
    ck.mkdir(parents=True)
    (ck / "weights_latest.safetensors").write_bytes(bytes(range(256)) * 8)
    (ck / "weights_latest.json").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    _one_line_error(capsys, ["wm", "eval", "--checkpoint", str(tmp_path / "run")], "ttlab wm eval",
                    "weights_latest.json: corrupt JSON")
    _one_line_error(capsys, ["wm", "rollout", "--checkpoint", str(tmp_path / "nope")], "ttlab wm rollout",
                    "checkpoint metadata not found")


def _features_list(info):
    info["features"] = list(info["features"])


def _feature_not_object(info):
    info["features"]["action"] = 7


@pytest.mark.parametrize("edit,needle", [
    (_features_list, "`features` must map each feature name to an object"),
    (_feature_not_object, "`features` must map each feature name to an object"),
    (lambda info: info.pop("data_path"), "no `data_path` template"),
    (lambda info: info.pop("video_path"), "no `video_path` template"),
], ids=["features-list", "feature-not-object", "no-data_path", "no-video_path"])
def test_lerobot_info_json_of_the_wrong_shape_is_named(tmp_path, capsys, edit, needle):
    write_v21(tmp_path)
    path = tmp_path / "meta" / "info.json"
    info = json.loads(path.read_text())
    edit(info)
    path.write_text(json.dumps(info))
    for cmd in ("info", "check"):
        _one_line_error(capsys, ["wm", "data", cmd, "--path", str(tmp_path)], f"ttlab wm data {cmd}",
                        "meta/info.json", needle)



def test_negative_sampler_steps_are_refused_not_read_as_the_runs_own():
    from ttlab.worldmodel.diffusion.samplers import SamplerConfig

    assert SamplerConfig(steps=0).resolve(8).steps == 8
    with pytest.raises(ValueError, match=r"--sampler.steps -1: must be >= 1, or 0"):
        SamplerConfig(steps=-1).resolve(8)


def test_sampler_flags_are_named_and_stochastic_ddim_refuses_a_flow_run():
    from ttlab.worldmodel.diffusion.samplers import SamplerConfig

    for cfg, needle in [(SamplerConfig(eta=-0.5), "--sampler.eta -0.5: must be >= 0"),
                        (SamplerConfig(eta=float("nan")), "--sampler.eta nan: must be >= 0"),
                        (SamplerConfig(mode="zigzag"), "--sampler.mode 'zigzag': expected one of full_sequence"),
                        (SamplerConfig(history_noise=1.0), "--sampler.history-noise 1.0: must be in [0, 1)")]:
        with pytest.raises(ValueError, match=re.escape(needle)):
            cfg.check()
    assert SamplerConfig(eta=1.0).resolve(8, "x").eta == 1.0
    with pytest.raises(ValueError, match=r"--sampler.eta 1.0: stochastic DDIM needs a DDPM target .* predicts flow"):
        SamplerConfig(eta=1.0).resolve(8, "flow")
    assert SamplerConfig(eta=0.0).resolve(8, "flow").steps == 8


def test_a_bad_sampler_flag_is_named_before_the_checkpoint_is_read(tmp_path, capsys):
    for cmd in ("eval", "rollout"):
        _one_line_error(capsys, ["wm", cmd, "--checkpoint", str(tmp_path / "missing"), "--sampler.eta", "-1"],
                        f"ttlab wm {cmd}", "--sampler.eta -1.0: must be >= 0")




@pytest.mark.parametrize("flags,needle", [
    (["--split", "nope"], "--split 'nope': expected one of val, train"),  # was: silently scored val, exit 0
    (["--split", "all"], "--split 'all': expected one of val, train"),  # was: documented, but scored val
    (["--n-ctx", "0"], "--n-ctx 0: must be 1..3"),  # was: a RuntimeError traceback
    (["--n-ctx", "9"], "--n-ctx 9: must be 1..3"),  # was: 'need -42 (context + generated)'
    (["--batch-size", "0"], "--batch-size 0: must be >= 1"),
    (["--num-samples", "0"], "--num-samples 0: must be >= 1"),
    (["--sampler.steps", "-1"], "--sampler.steps -1: must be >= 1, or 0"),  # was: the run's own steps, exit 0
    (["--sampler.eta", "-1"], "--sampler.eta -1.0: must be >= 0"),  # was: named an internal function
    (["--sampler.mode", "zigzag"], "--sampler.mode 'zigzag': expected one of"),
    (["--sampler.history-noise", "1.5"], "--sampler.history-noise 1.5: must be in [0, 1)"),
    (["--sampler.guidance", "0.5"], "--sampler.guidance 0.5: must be >= 1"),
    (["--sampler.guidance", "2"], "--sampler.guidance 2.0: needs --sampler.guide"),
    (["--sampler.guide", "nope.ckpt"], "nope.ckpt: guide checkpoint not found"),
])
def test_eval_flags_out_of_range_are_named_before_anything_is_written(run_dir, tmp_path, capsys, flags, needle):
    out = tmp_path / "ev"
    _one_line_error(capsys, ["wm", "eval", "--checkpoint", str(run_dir), "--num-samples", "2", "--video-clips", "0",
                             "--device", "cpu", "--out", str(out), *flags], "ttlab wm eval", needle)
    assert not out.exists()


def test_rollout_flags_and_npy_files_are_named(run_dir, tmp_path, capsys):
    import numpy as np

    (tmp_path / "garbage.npy").write_bytes(b"not an array" * 8)
    np.save(tmp_path / "gray.npy", np.zeros((2, 16, 16), np.uint8))
    out = tmp_path / "ro"
    base = ["wm", "rollout", "--checkpoint", str(run_dir), "--device", "cpu", "--out", str(out)]
    for flags, needle in [
        (["--horizon", "0"], "--horizon 0: must exceed --n-ctx 1"),  # was: 'window at 0 needs -1 actions'
        (["--actions", str(tmp_path / "garbage.npy")], "--actions " + str(tmp_path / "garbage.npy")),
        (["--actions", str(tmp_path / "missing.npy")], "--actions " + str(tmp_path / "missing.npy")),
        (["--start", str(tmp_path / "gray.npy")], "expected frames (Fs >= --n-ctx 1, H, W, 3), got shape (2, 16, 16)"),
    ]:
        _one_line_error(capsys, base + flags, "ttlab wm rollout", needle)
    assert not out.exists()


@pytest.mark.parametrize("flags,needle", [
    (["--max-steps", "-1"], "--max-steps -1: must be >= 1"),  # was: Lightning trained without end
    (["--max-steps", "0"], "--max-steps 0: must be >= 1"),  # was: an untrained run, exit 0
    (["--batch-size", "0"], "--batch-size 0: must be >= 1"),
    (["--n-ctx", "0"], "--n-ctx 0 --num-frames 4: need 1 <= n_ctx < num_frames"),  # was: a RuntimeError traceback
    (["--num-frames", "1"], "--n-ctx 1 --num-frames 1"),
    (["--lr", "-1"], "--lr -1.0: must be > 0"),
    (["--val-fraction", "1.5"], "--val-fraction 1.5: must be in [0, 1)"),
    (["--sample-steps", "0"], "--sample-steps 0: must be >= 1"),  # was: trained, then validated with no steps
    (["--ema-decay", "2"], "--ema-decay 2.0: must be in [0, 1]"),  # was: trained a diverging EMA
    (["--weight-decay", "-1"], "--weight-decay -1.0: must be >= 0"),  # was: trained
    (["--num-workers", "-1"], "--num-workers -1: must be >= 0"),  # was: the DataLoader's message
    (["--sample-mode", "zigzag"], "--sample-mode 'zigzag': expected one of"),
])
def test_train_flags_that_cannot_train_fail_before_a_run_directory_exists(tmp_path, capsys, flags, needle):
    _one_line_error(capsys, ["wm", "train", "--preset", "debug", "--root", str(tmp_path / "runs"), "--device", "cpu",
                             *flags], "ttlab wm train", needle)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", ["debug", "pusht_map", "pusht_cpu", "csgo_l2", "abl_pred_flow", "tiny_pusht"])
def test_the_presets_pass_the_train_checks(name):
    from ttlab.worldmodel.presets import TRAIN_PRESETS
    from ttlab.worldmodel.train import check_train_flags

    check_train_flags(TRAIN_PRESETS[name]())


def test_play_names_a_bad_script_key_and_an_episode_out_of_range(run_dir, capsys, monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    base = ["wm", "play", "--checkpoint", str(run_dir), "--device", "cpu"]
    _one_line_error(capsys, base + ["--script", "LRX"], "ttlab wm play", "--script 'LRX': unknown keys 'X'")  # was KeyError
    _one_line_error(capsys, base + ["--script", "LR", "--episode", "99"], "ttlab wm play", "--episode 99")


@pytest.mark.parametrize("cmd", ["eval", "rollout"])
def test_eval_and_rollout_refuse_an_unwritable_out_before_sampling(run_dir, tmp_path, capsys, cmd):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    _one_line_error(capsys, ["wm", cmd, "--checkpoint", str(run_dir), "--out", str(blocker / "out")], f"ttlab wm {cmd}",
                    "--out", "is not a directory")
