"""Contract: run dirs hold config.json + git revision; the CLI answers --help for every system;
the demo runner reports each stage and writes summary.md; --device is validated."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import torch

from ttlab.cli import main as ttlab_main
from ttlab.common.device import resolve_device
from ttlab.common.logging import Logger
from ttlab.common.runs import make_run_dir


@dataclasses.dataclass
class C:
    """cfg"""

    a: int = 1
    """a"""


def test_run_dir_has_config_and_git_rev(tmp_path):
    rd = make_run_dir("drive", C(a=3), run_name="r1", root=tmp_path)
    assert json.loads((rd.path / "config.json").read_text()) == {"a": 3}
    assert (rd.path / "git_rev.txt").read_text().strip()
    assert rd.path == tmp_path / "drive" / "r1"
    with pytest.raises(FileExistsError, match="--resume"):
        make_run_dir("drive", C(), run_name="r1", root=tmp_path)
    again = make_run_dir("drive", C(a=4), run_name="r1", root=tmp_path, resume=True)
    assert json.loads((again.path / "config.json").read_text()) == {"a": 3}  # original kept


def test_logger_writes_tensorboard_events(tmp_path):
    log = Logger(tmp_path)
    out = log.scalars({"losses/x": torch.tensor(1.5), "charts/SPS": 10}, step=1)
    log.close()
    assert out == {"losses/x": 1.5, "charts/SPS": 10.0}
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_resolve_device():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="--device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


@pytest.mark.parametrize("argv", [["--help"], ["drive", "--help"], ["discover", "--help"], ["wm", "--help"]])
def test_cli_help(argv, capsys):
    assert ttlab_main(argv) == 0
    assert "usage" in capsys.readouterr().out


def test_cli_unknown_command():
    assert ttlab_main(["bogus"]) == 2


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "ttlab.cli", "demo", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--stages" in out.stdout


def test_demo_runner_reports_stages(tmp_path, monkeypatch):
    import ttlab.demo as demo

    monkeypatch.setitem(demo.STAGES, "fake", "ttlab_fake_stage_absent")
    rc = demo.main(["--out", str(tmp_path), "--stages", "fake", "--no-strict"])
    text = (tmp_path / "summary.md").read_text()
    assert rc == 0 and "fake: not built" in text and "not built yet" in text
    assert demo.main(["--out", str(tmp_path), "--stages", "fake"]) == 1  # strict by default: make demo fails


def test_cli_unknown_preset_is_one_line_and_exit_2(capsys):
    assert ttlab_main(["discover", "search", "--preset", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown preset 'nope'" in err and "erdos_auto" in err and "Traceback" not in err
