"""Contract of `ttlab demo`'s runner: a silent stage still prints a progress line at least every heartbeat
(stage, step, elapsed, ETA against its budget); summary.md opens with a table of stage, what it shows, its
figure and wall time, and its pictures are linked relative to the summary."""

from __future__ import annotations

import sys
import textwrap

import ttlab.demo as demo
from ttlab.common.heartbeat import clock, eta_text
from ttlab.common.stage_report import StageReport, picture, rel


def test_clock_and_eta_golden():
    assert clock(5) == "5s" and clock(90) == "1m30s" and clock(600) == "10m00s"
    assert eta_text(30, 120, None) == "ETA <= 1m30s (budget 2m00s)"
    assert eta_text(150, 120, None) == "over budget by 30s (budget 2m00s)"
    assert eta_text(30, 120, 0.25) == "ETA 1m30s (budget 2m00s)"  # from the fraction done, not the budget
    # a fraction reported at 30 s projects a 120-s stage: 40 s later 50 s are left, not a longer ETA
    assert eta_text(70, 300, 0.25, frac_at=30) == "ETA 50s (budget 5m00s)"
    # past the projection the budget decides
    assert eta_text(130, 300, 0.25, frac_at=30) == "ETA <= 2m50s (budget 5m00s)"


def _fake_stage(tmp_path, monkeypatch, body: str) -> None:
    pkg = tmp_path / "fakestage"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("fakestage", None)
    monkeypatch.setitem(demo.STAGES, "fake", "fakestage")
    monkeypatch.setitem(demo.BUDGETS_S, "fake", 60.0)


def test_silent_stage_gets_heartbeat_lines(tmp_path, monkeypatch, capsys):
    _fake_stage(tmp_path, monkeypatch, """
        import time
        from ttlab.common.heartbeat import step
        def run(out_dir, device):
            step("thinking quietly", 0.5, show=False)
            time.sleep(0.6)
            return "no figure here"
    """)
    assert demo.main(["--out", str(tmp_path / "out"), "--stages", "fake", "--heartbeat-s", "0.1"]) == 0
    beats = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[demo fake] thinking quietly")]
    assert len(beats) >= 3, beats
    assert all("| elapsed " in b and "ETA" in b and "budget 1m00s" in b for b in beats)


def test_summary_top_table_and_relative_pictures(tmp_path, monkeypatch):
    _fake_stage(tmp_path, monkeypatch, """
        from ttlab.common.stage_report import StageReport, picture
        def run(out_dir, device):
            (out_dir / "curve.png").write_bytes(b"png")
            (out_dir / "clip.mp4").write_bytes(b"mp4")
            body = picture(out_dir / "curve.png", out_dir.parent, "curve") + "\\n" + \\
                picture(out_dir / "clip.mp4", out_dir.parent, "clip")
            return StageReport(shows="a fake | system", figure="gap +0.40 +- 0.03", body=body)
    """)
    out = tmp_path / "out"
    assert demo.main(["--out", str(out), "--stages", "fake"]) == 0
    text = (out / "summary.md").read_text()
    assert "| stage | what it shows | the figure | wall time |" in text
    assert "| fake | a fake / system | gap +0.40 +- 0.03 |" in text  # a pipe in a cell cannot break the table
    assert "![curve](fake/curve.png)" in text and "[clip (mp4)](fake/clip.mp4)" in text
    assert "load average at the start" in text


def test_failing_stage_is_reported_and_strict_exit(tmp_path, monkeypatch):
    _fake_stage(tmp_path, monkeypatch, """
        def run(out_dir, device):
            raise RuntimeError("boom in the fake stage")
    """)
    out = tmp_path / "out"
    assert demo.main(["--out", str(out), "--stages", "fake"]) == 1
    text = (out / "summary.md").read_text()
    assert "| fake |" in text and "**failed**" in text and "boom in the fake stage" in text


def test_plain_markdown_headline():
    md = "- offline search: best verified C5 = 0.381234567 (n = 50)\n- TTT: best C5 in the tree 0.380999; 12 s/step"
    assert demo.headline(md) == "best verified C5 = 0.381234567; best C5 in the tree 0.380999"
    assert demo.headline("nothing") == "see its section"


def test_rel_and_picture(tmp_path):
    (tmp_path / "a").mkdir()
    assert rel(tmp_path / "a" / "x.gif", tmp_path) == "a/x.gif"
    assert picture(tmp_path / "a" / "x.gif", tmp_path, "x") == "![x](a/x.gif)"
    assert StageReport("s", "f", "b").figure == "f"
