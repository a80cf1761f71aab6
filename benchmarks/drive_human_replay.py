"""Human-replay evaluation on a real scene, as the seed's evaluator does it: one ego per scene, every other logged
vehicle replays its log (rewound at every trial), K trials per episode; per-trial `trial_k_score` and the paired
`ada_delta_trial_k_minus_0` for every k (`ttlab drive eval --mode human_replay`).

Each vehicle of the scene is the ego of its own copy (`<scene>?egos=SET&split=each`, played once per episode with
`--scene-order cycle`), so the figure covers every vehicle, not only the first. Sets: the held-out vehicles
(`odd`: never an ego when `selfplay_real` trained) and the trained-on ones (`even`), reported apart. Writes
`--out` (JSON with commit, machine, wall time), a GIF of one held-out ego's episode beside it, and prints ONE JSON
line last.

    python benchmarks/drive_human_replay.py --checkpoint pretrained:selfplay
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

from ttlab.common.data import shared_data_file
from ttlab.drive.evaluate import EvalConfig, evaluate
from ttlab.drive.scenarios.pool import load_scenarios
from ttlab.drive.scenarios.waymo_json import ScenarioRepairWarning

RESULTS = Path(__file__).resolve().parents[1] / "runs" / "bench" / "drive_human_replay"
HEADLINE = ("_score", "_goal_rate", "_collision_rate", "_offroad_rate")


def run(checkpoint: str, scene: Path, egos: str, k: int, episodes: int, greedy: bool, out: Path,
        video: Path | None = None) -> dict:
    source = f"{scene}?egos={egos}&split=each"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScenarioRepairWarning)
        n = len(load_scenarios(source))
        m = evaluate(EvalConfig(checkpoint=checkpoint, mode="human_replay", scenarios=source, num_envs=n,
                                episodes=episodes, k_trials=k, greedy=greedy, scene_order="cycle", device="cpu",
                                out=out, video=video))
    keep = {key: m[key] for key in m if key.startswith(("trial_", "ada_delta_trial_"))
            and (key.endswith(HEADLINE) or key.endswith("_minus_0") or key.endswith("_pairs")
                 or key.endswith("_minus_0_score_stderr"))}
    return {"scenes": source, "egos": egos, "greedy": greedy, "episodes": m["episodes"],
            "ego_trials": m["ego_trials"], **keep}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default="pretrained:selfplay")
    ap.add_argument("--scene", type=Path, default=shared_data_file("carla_town02_womd.json", required=False))
    ap.add_argument("--k", type=int, default=3, help="trials per episode")
    ap.add_argument("--episodes", type=int, default=2, help="episodes per scene (per ego)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS / "drive_human_replay.json")
    a = ap.parse_args()
    if not a.scene.is_file():
        raise SystemExit(f"--scene {a.scene}: no such file")
    if a.k < 1 or a.episodes < 1:
        raise SystemExit(f"--k {a.k} / --episodes {a.episodes}: expected >= 1")
    torch.set_num_threads(a.threads)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    t0, load0 = time.perf_counter(), os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.parent / "evals"
    rows = []
    for egos in ("odd", "even"):
        for greedy in (False, True):
            gif = a.out.with_suffix(".gif") if (egos, greedy) == ("odd", False) else None
            rows.append(run(a.checkpoint, a.scene, egos, a.k, a.episodes, greedy,
                            tmp / f"{egos}_{'greedy' if greedy else 'sampled'}.json", gif))
            print(json.dumps(rows[-1]), flush=True)
    out = {"benchmark": "drive_human_replay", "checkpoint": a.checkpoint, "scene": str(a.scene), "k_trials": a.k,
           "protocol": "one ego per scene copy (every vehicle in turn), the others replay the log, rewound per trial",
           "held_out": "egos=odd (never an ego in selfplay_real training)", "rows": rows,
           "video": str(a.out.with_suffix(".gif")), "commit": commit, "nproc": os.cpu_count(), "threads": a.threads,
           "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
           "wall_s": round(time.perf_counter() - t0, 1)}
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
