"""Polish the published Erdős record construction under the search's rules; prints one JSON line last.

    python benchmarks/discover_polish.py [--time-limit 4m] [--upsample 1] [--program minimax|lse] [--out benchmarks/results/erdos_polish.json]
    python benchmarks/discover_polish.py --preset hop [--seed 1]   # a named polish preset (presets.py)

Runs `ttlab discover polish ../shared/data/erdos_reference.json` (the TTT-Discover 600-piece record by
default): the minimax SLP program in the sandbox, every round re-verified, the final construction checked in
exact rational arithmetic against the published record. Writes the construction + exact C5 to --out.
`--preset NAME` starts from that `ttlab discover polish` preset; every flag given also overrides its field.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from ttlab.common.data import SharedDataMissing, shared_data_file
from ttlab.discover.config import PolishConfig
from ttlab.discover.polish import run_polish
from ttlab.discover.presets import POLISH_PRESETS
from ttlab.discover.tasks.erdos import RECORD

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default=None, help="default: erdos_reference.json in the shared data folder")
    ap.add_argument("--name", default="ttt_discover_2026")
    ap.add_argument("--preset", default="", choices=["", *sorted(POLISH_PRESETS)],
                    help="start from this `ttlab discover polish` preset (default: minimax, 4m, rounds of 60 s)")
    ap.add_argument("--time-limit", "--budget", dest="time_limit", default=None)
    ap.add_argument("--round-s", type=float, default=None)
    ap.add_argument("--upsample", type=int, default=None)
    ap.add_argument("--program", default=None, help="library program: minimax (exact SLP) or lse (smoothed)")
    ap.add_argument("--seed", type=int, default=None, help="program seed (round r gets seed + r)")
    ap.add_argument("--settings", default=None, help="JSON overriding the program's SETTINGS")
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "discover_polish" / "erdos_polish.json"))
    a = ap.parse_args()
    try:
        ref = Path(a.ref) if a.ref else shared_data_file("erdos_reference.json")
    except SharedDataMissing as e:
        ap.error(str(e))
    load0 = os.getloadavg()
    try:  # at the start: the program text is read now, the tree may move on while it runs
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        rev = ""
    t0 = time.time()
    given = {k: getattr(a, k) for k in ("time_limit", "round_s", "upsample", "program", "seed", "settings")}
    base = POLISH_PRESETS[a.preset]() if a.preset else PolishConfig(time_limit="4m")
    cfg = dataclasses.replace(base, task="erdos", file=ref, name=a.name, out=Path(a.out), claim=str(RECORD),
                              **{k: v for k, v in given.items() if v is not None})
    try:
        rec = run_polish(cfg)
    except (ValueError, FileNotFoundError) as e:  # a bad --ref / --name / --settings: one line, non-zero exit
        ap.error(str(e))
    machine = {"nproc": os.cpu_count(), "load_start": [round(x, 2) for x in load0],
               "load_end": [round(x, 2) for x in os.getloadavg()]}
    rec.update({"commit": rev, "machine": machine, "wall_s": round(time.time() - t0, 1), "preset": a.preset,
                "config": {"program": cfg.program, "settings": cfg.settings, "time_limit": cfg.time_limit,
                           "round_s": cfg.round_s, "upsample": cfg.upsample, "seed": cfg.seed},
                "command": "python benchmarks/discover_polish.py " + shlex.join(sys.argv[1:])})
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(rec) + "\n")
    ex = rec["exact"]
    print(json.dumps({"benchmark": "discover_polish", "start": rec["start"], "n": rec["n"],
                      "c5": rec["score"], "exact_c5": ex["c5"], "exact_c5_fraction_digits": len(ex["c5_fraction"]),
                      "feasible": ex["feasible"], "below_record": ex["claim"]["holds"] and ex["c5"] < RECORD,
                      "record": RECORD, "wall_s": rec["wall_s"], "machine": machine, "commit": rev}))


if __name__ == "__main__":
    main()
