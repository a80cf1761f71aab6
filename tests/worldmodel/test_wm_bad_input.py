"""Bad input to `ttlab wm ...` is one line `ttlab wm <cmd>: error: <what is wrong>` on stderr with exit 2, never a
traceback, on tiny fixtures written in the upstream layouts."""

from __future__ import annotations

import pytest
from test_data_dino_wm import write_pusht

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
    assert not (tmp_path / "lat").exists()
