"""An output path that cannot be written fails before the command does its work: one line, exit 2, the flag named."""

from __future__ import annotations

import json

import pytest

from ttlab.cli import main
from ttlab.common.errors import UserError
from ttlab.common.outdir import writable_dir, writable_parent


def test_the_checks_create_nothing_and_leave_no_probe(tmp_path):
    assert writable_dir("--out", tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert writable_parent("--out", tmp_path / "c" / "x.json") == tmp_path / "c" / "x.json"
    assert writable_dir("--out", tmp_path) == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_writable_dir_and_parent_name_the_flag_and_the_reason(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(UserError, match=r"^--out .*file.txt: exists and is not a directory"):
        writable_dir("--out", f)
    with pytest.raises(UserError, match=r"^--out .*file.txt/sub: .*file.txt is not a directory"):
        writable_dir("--out", f / "sub")
    with pytest.raises(UserError, match=r"^--video .*file.txt/v.mp4: .*file.txt is not a directory"):
        writable_parent("--video", f / "v.mp4")
    with pytest.raises(UserError, match="is a directory, expected a file path"):
        writable_parent("--out", tmp_path)


def _one_line(capsys, argv, prog, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{prog}: error: ") and "\n" not in err and needle in err, err


def test_discover_polish_refuses_an_unwritable_out_before_polishing(tmp_path, capsys):
    start = tmp_path / "start.json"
    start.write_text(json.dumps({"h": [0.5] * 10}))
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    # a 10-minute polish: the check must come first, or this test would take the full time limit
    _one_line(capsys, ["discover", "polish", str(start), "--time-limit", "10m", "--out", str(blocker / "best.json")],
              "ttlab discover polish", "--out")


def test_drive_eval_and_render_refuse_an_unwritable_out(tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    _one_line(capsys, ["drive", "eval", "--checkpoint", str(tmp_path / "ck" / "latest"),
                       "--out", str(blocker / "eval.json")], "ttlab drive eval", "--out")
    _one_line(capsys, ["drive", "render", "--steps", "2", "--out", str(blocker / "r.mp4")],
              "ttlab drive render", "--out")
