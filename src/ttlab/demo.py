"""`ttlab demo`: run each system's demo stage in turn and write `runs/demo/summary.md`.

A system plugs in by providing `ttlab.<system>.demo.run(out_dir: Path, device: str)`, which does a small
end-to-end run and returns a `ttlab.common.stage_report.StageReport` (what it shows, its figure, its section)
or plain markdown. While a stage runs, a heartbeat prints a line at least every 20 s: the stage, its current
step (`ttlab.common.heartbeat.step`), the elapsed time and an ETA against the stage's budget. A stage whose
module is absent is reported as not built yet; a stage that fails is reported with its error and the other
stages still run. The summary is rewritten after every stage, with a top table (stage, what it shows, the
figure, wall time) and the machine's load.
"""

from __future__ import annotations

import importlib
import os
import re
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from ttlab.common.checkpoint import atomic_write_text
from ttlab.common.config import parse_config
from ttlab.common.errors import UserError
from ttlab.common.heartbeat import Heartbeat, clock
from ttlab.common.stage_report import StageReport

STAGES = {"drive": "ttlab.drive.demo", "discover": "ttlab.discover.demo", "wm": "ttlab.worldmodel.demo"}
BUDGETS_S = {"drive": 360.0, "discover": 300.0, "wm": 420.0}
"""Each stage's budget on 2 idle cores (20 minutes in all, with margin); the heartbeat's ETA."""
SHOWS = {"drive": "a driver adapting across trials; the simulator",
         "discover": "Erdős constructions verified; hostile code contained; search and LLM test-time training",
         "wm": "an action-conditioned world model against copy-last, the mean frame and their blend"}
"""What a stage shows, for a stage that returns plain markdown."""


@dataclass
class DemoConfig:
    """Small end-to-end run of each ttlab system on embedded defaults."""

    out: Path = Path("runs/demo")
    """Directory for the demo's outputs and summary.md."""
    stages: tuple[str, ...] = ("drive", "discover", "wm")
    """Which stages to run, in order (drive, discover, wm)."""
    device: str = "auto"
    """auto | cpu | cuda."""
    strict: bool = True
    """Exit non-zero when a stage fails or is not built (--no-strict: exit 0 and only report it)."""
    heartbeat_s: float = 20.0
    """Seconds between progress lines while a stage runs."""


def headline(markdown: str) -> str:
    """The figure of a stage that returned plain markdown: its lines that carry a best C5 or a TTT step."""
    hits = [m.group(0).rstrip(";.,") for m in re.finditer(r"(best verified C5 = [0-9.]+|best C5 in the tree [0-9.]+)",
                                                          markdown)]
    return "; ".join(hits) if hits else "see its section"


def run_stage(name: str, out: Path, device: str, heartbeat_s: float = 20.0) -> tuple[str, StageReport, float]:
    """Returns (status, report, seconds); status is ok | not built | failed."""
    t0 = time.time()
    try:
        module = importlib.import_module(STAGES[name])
    except ModuleNotFoundError as e:
        if e.name == STAGES[name]:
            return "not built", StageReport(SHOWS.get(name, ""), "-", f"The `{name}` demo stage is not built yet."), 0.0
        msg = f"missing dependency `{e.name}` (install the project's extras: `make setup`)"
        return "failed", StageReport(SHOWS.get(name, ""), "failed", msg), 0.0
    stage_dir = out / name
    stage_dir.mkdir(parents=True, exist_ok=True)
    try:
        with Heartbeat(name, BUDGETS_S.get(name, 300.0), every=heartbeat_s):
            res = module.run(stage_dir, device)
        if not isinstance(res, StageReport):
            res = StageReport(SHOWS.get(name, ""), headline(str(res)), str(res))
        return "ok", res, time.time() - t0
    except Exception:  # a failing stage must not hide the others
        body = "```\n" + traceback.format_exc()[-3000:] + "\n```"
        return "failed", StageReport(SHOWS.get(name, ""), "failed", body), time.time() - t0


def cell(text: str) -> str:
    """Text fit for a markdown table cell."""
    return text.replace("|", "/").replace("\n", " ")


def summary(rows: list[tuple[str, str, StageReport, float]], load: tuple[tuple[float, ...], tuple[float, ...]],
            wall_s: float) -> str:
    """summary.md: the top table, the machine, then each stage's section."""
    lines = ["# ttlab demo summary", "",
             "| stage | what it shows | the figure | wall time |", "|---|---|---|---|"]
    for name, status, rep, secs in rows:
        fig = rep.figure if status == "ok" else f"**{status}**"
        lines.append(f"| {name} | {cell(rep.shows)} | {cell(fig)} | {clock(secs)} |")
    (l0, l1) = load
    lines += ["", f"Machine: {os.cpu_count()} cores; load average at the start {l0[0]:.1f} / {l0[1]:.1f} / "
              f"{l0[2]:.1f} (1 / 5 / 15 min), now {l1[0]:.1f} / {l1[1]:.1f} / {l1[2]:.1f}; total wall time "
              f"{clock(wall_s)}.", ""]
    for name, status, rep, secs in rows:
        lines += [f"## {name}: {status} ({clock(secs)})", "", rep.body.strip(), ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(DemoConfig, argv=argv, prog="ttlab demo")
    unknown = [s for s in cfg.stages if s not in STAGES]
    if unknown:
        raise UserError(f"--stages: unknown stage(s) {unknown}; choose from {list(STAGES)}")
    if cfg.heartbeat_s <= 0:
        raise UserError(f"--heartbeat-s {cfg.heartbeat_s}: must be > 0")
    cfg.out.mkdir(parents=True, exist_ok=True)
    t_all, load0 = time.time(), os.getloadavg()
    rows = []
    for name in cfg.stages:
        print(f"== demo stage: {name} (budget {clock(BUDGETS_S.get(name, 300.0))})", flush=True)
        status, rep, secs = run_stage(name, cfg.out, cfg.device, cfg.heartbeat_s)
        print(f"== {name}: {status} ({clock(secs)})", flush=True)
        rows.append((name, status, rep, secs))
        atomic_write_text(cfg.out / "summary.md", summary(rows, (load0, os.getloadavg()), time.time() - t_all))
    print(f"wrote {cfg.out / 'summary.md'}")
    return 1 if (cfg.strict and any(status != "ok" for _, status, _, _ in rows)) else 0
