"""Contract: every subcommand answers --help; a user error is one line `ttlab <cmd>: error: <message>` on
stderr with exit code 2 (no traceback, nothing created on disk); `--debug` shows the traceback instead."""

from __future__ import annotations

import importlib
import re

import pytest

from ttlab.cli import SYSTEMS
from ttlab.cli import main as ttlab_main
from ttlab.common.config import ConfigError
from ttlab.common.errors import set_debug
from ttlab.drive.presets import TRAIN_PRESETS


def _commands(system: str) -> list[str]:
    module = importlib.import_module(SYSTEMS[system][0])
    return list(getattr(module, "COMMANDS", {}))


@pytest.mark.parametrize("argv", [["--help"], *[[s, "--help"] for s in SYSTEMS]])
def test_top_level_and_system_help(argv, capsys):
    assert ttlab_main(argv) == 0
    out = capsys.readouterr().out
    assert "usage" in out.lower() or "--stages" in out


@pytest.mark.parametrize("system,cmd", [(s, c) for s in ("drive", "discover", "wm") for c in _commands(s)])
def test_every_subcommand_answers_help(system, cmd, capsys):
    assert ttlab_main([system, cmd, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--" in out, f"ttlab {system} {cmd} --help printed no flags"
    assert "(default: .)" not in out, f"ttlab {system} {cmd} --help shows '.' for an unset path (use Path | None)"


def test_system_help_lists_the_same_presets_as_drive_train(capsys):
    assert ttlab_main(["drive", "train", "--help"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("presets (--preset NAME):"))
    train = {p.strip() for p in line.split(":", 1)[1].split(",")}
    assert ttlab_main(["drive", "--help"]) == 0
    listed = re.search(r"--preset ([a-z0-9_|]+)\)", capsys.readouterr().out).group(1)
    assert set(listed.split("|")) == train == set(TRAIN_PRESETS)


@pytest.mark.parametrize("cmd", ["convert", "render", "eval"])
def test_no_debug_preset_where_it_means_nothing(cmd, capsys):
    assert ttlab_main(["drive", cmd, "--help"]) == 0
    assert "--preset" not in capsys.readouterr().out
    assert ttlab_main(["drive", cmd, "--preset", "debug"]) == 2
    assert "--preset debug: this command has no presets" in capsys.readouterr().err


BAD_INPUTS = [
    (["nope"], "ttlab: error: unknown command 'nope'"),
    (["drive", "trian"], "ttlab drive: error: unknown command 'trian'"),
    (["drive", "train", "--preset", "nope"], "ttlab drive train: error: unknown preset 'nope'"),
    (["drive", "train", "--env.goal-behavior", "trail"], "ttlab drive train: error: invalid choice 'trail'"),
    (["drive", "train", "--nonsense", "3"], "ttlab drive train: error: Unrecognized options: --nonsense"),
    (["drive", "train", "--scenarios", "procedural:n=oops"], "ttlab drive train: error: scenario source"),
    (["drive", "train", "--device", "tpu"], "ttlab drive train: error: --device 'tpu'"),
    (["drive", "train", "--preset", "debug", "--time-limit", "59"], "ttlab drive train: error: --time-limit '59'"),
    (["drive", "eval", "--mode", "nope"], "ttlab drive eval: error: invalid choice 'nope'"),
    (["drive", "eval", "--checkpoint", "/nonexistent/ck"], "ttlab drive eval: error: checkpoint metadata not found"),
    (["drive", "render", "--actions", "x"], "ttlab drive render: error: invalid choice 'x'"),
    (["drive", "render", "--scene", "/nonexistent.json"], "ttlab drive render: error: scene file not found"),
    (["drive", "convert", "/nonexistent", "OUT"], "ttlab drive convert: error: SRC_DIR /nonexistent"),
    (["discover", "search", "--task", "nope"], "ttlab discover search: error: invalid choice 'nope'"),
    (["discover", "search", "--time-limit", "59"], "ttlab discover search: error: --time-limit '59'"),
    (["discover", "verify"], "ttlab discover verify: error: FILE is required"),
    (["discover", "verify", "/nonexistent.json"], "ttlab discover verify: error: /nonexistent.json: no such file"),
    (["discover", "polish", "/nonexistent.json"], "ttlab discover polish: error: /nonexistent.json: no such file"),
    (["discover", "train", "--preset", "nope"], "ttlab discover train: error: unknown preset 'nope'"),
    (["wm", "train", "--data", "/nonexistent"], "ttlab wm train: error: /nonexistent: dataset path does not exist"),
    (["demo", "--stages", "nope"], "ttlab demo: error: --stages: unknown stage"),
]


@pytest.mark.parametrize("argv,message", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a command that wrongly made a run directory would leave it here
    assert ttlab_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message), err
    assert "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists(), "a run directory was created before the inputs were checked"


def test_debug_flag_shows_the_traceback():
    try:
        with pytest.raises(ConfigError, match="unknown preset"):
            ttlab_main(["drive", "train", "--preset", "nope", "--debug"])
    finally:
        set_debug(False)
