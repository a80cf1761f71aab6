"""Log replay fidelity per scene source: the log-tracking expert's events and its pose error against the log.

Every vehicle the simulator lets drive (self-play evaluation env of `--preset`: every vehicle of the scene, one
trial, collisions and offroad remove it) is driven by `drive.bc.tracking_actions` through the simulator's own
bicycle dynamics and 91-action grid (`drive.replay.track_log`). Per source and expert anchor it reports the goal,
collision and offroad rates over ego episodes and the mean / max position (and heading) error against the logged
pose at the same log step, over every (ego, tick) in play. Anchors: `time` tracks the log at the next tick of the
clock (pure log replay), `path` the log's next point after the nearest one (the expert of
`benchmarks/drive_expert.py` and the BC warm start: it does not wait for the clock, so its pose error against
the clock is larger). A JSON source is measured as loaded (log repairs on) and as upstream reads it (`raw`: no
log repairs), which shows what the repairs fix.

Writes `--out` (JSON, with commit, machine and wall time) and a PNG beside it; prints ONE JSON line last.

    python benchmarks/drive_replay.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import warnings
from pathlib import Path

import torch

import charts
from ttlab.common.data import shared_data_file
from ttlab.drive.presets import TRAIN_PRESETS
from ttlab.drive.replay import replay_fidelity
from ttlab.drive.scenarios.pool import load_scenarios
from ttlab.drive.scenarios.waymo_json import ScenarioRepairWarning, load_scenario

RESULTS = Path(__file__).resolve().parents[1] / "runs" / "bench" / "drive_replay"


def sources(args) -> list[tuple[str, list, int, int]]:
    """(name, scenes, envs, episodes) per measured source."""
    out = []
    proc = load_scenarios(args.procedural)
    out.append((args.procedural, proc, min(args.envs, len(proc)), max(1, len(proc) // min(args.envs, len(proc)))))
    for path in args.json:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScenarioRepairWarning)
            fixed, raw = load_scenario(path), load_scenario(path, repair_logs=False)
        out.append((str(path), [fixed], 1, 1))  # one scene, deterministic: one episode says it all
        out.append((f"{path} (raw: no log repairs, as upstream reads it)", [raw], 1, 1))
    return out


def plot(rows: list[dict], path: Path) -> None:
    """Per source and anchor: goal rate and collision + offroad bars, and the mean pose error (1 m = a full bar)."""
    colours = (charts.rgb((60, 170, 60)), charts.rgb((200, 50, 50)), charts.rgb((60, 90, 200)))
    fig, (ax,) = charts.panels(1, size=(9.0, 0.9 + 0.55 * len(rows)),
                               title="log-tracking expert: goal rate, collision + offroad rate, mean pose error")
    for i, r in enumerate(rows):
        vals = (r["goal_rate"], min(1.0, r["collision_plus_offroad"]), min(1.0, r["pos_err_mean_m"]))
        for j, (v, colour) in enumerate(zip(vals, colours, strict=True)):
            ax.barh(i + (j - 1) * 0.27, v, 0.25, color=colour)
        ax.annotate(f"{r['goal_rate']:.3f} / {r['collision_plus_offroad']:.3f} / {r['pos_err_mean_m']:.2f} m", (1, i),
                    xycoords=("axes fraction", "data"), xytext=(6, 0), textcoords="offset points", va="center")
    names = [Path(r["source"].split(" (")[0]).name + (" raw" if "raw" in r["source"] else "") for r in rows]
    ax.set_yticks(range(len(rows)), [f"{name[:44]} [{r['anchor']}]" for name, r in zip(names, rows, strict=True)])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, 1)
    ax.grid(axis="y", visible=False)
    charts.key(fig, [("goal rate", colours[0]), ("collision + offroad", colours[1]),
                     ("mean pose error (1 m = full bar)", colours[2])])
    charts.save(fig, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="selfplay_yield", help="the training preset whose env is evaluated")
    ap.add_argument("--procedural", default="procedural:n=256,agents=8,seed=1000")
    ap.add_argument("--json", nargs="*", type=Path, default=[p for p in [shared_data_file("carla_town02_womd.json", required=False)] if p],
                    help="Waymo-format JSON scenes (default: the CARLA Town02 sample)")
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS / "drive_replay.json")
    a = ap.parse_args()
    if a.preset not in TRAIN_PRESETS:
        raise SystemExit(f"--preset {a.preset!r}: expected one of {', '.join(TRAIN_PRESETS)}")
    for p in a.json:
        if not p.is_file():
            raise SystemExit(f"--json {p}: no such file")
    torch.set_num_threads(a.threads)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    t0, load0 = time.perf_counter(), os.getloadavg()
    rows = []
    for name, scenes, envs, episodes in sources(a):
        for anchor in ("time", "path"):
            rows.append({"source": name, **replay_fidelity(TRAIN_PRESETS[a.preset]().env, scenes, envs, episodes, anchor)})
            print(json.dumps(rows[-1]), flush=True)
    out = {"benchmark": "drive_replay", "preset": a.preset, "expert": "drive.bc.tracking_actions",
           "rows": rows, "commit": commit, "nproc": os.cpu_count(), "threads": a.threads,
           "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
           "wall_s": round(time.perf_counter() - t0, 1)}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    plot(rows, a.out.with_suffix(".png"))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
