"""Why random starts stop short of the Erdős record: basins, not resolution.

Measurements with the library's smoothed minimax (`library/erdos_lse.py`, run in-process: this studies the
optimiser, it claims no bound; `discover search` / `polish` are the sandboxed paths). The measurements are
`ttlab.discover.basins`; this script wires them to flags and prints:

  --multistart: random rough starts at one resolution n, each taken through the tau continuation from
      `tau_random`; the distribution of the local optima they reach (how often a start lands in a good basin).
  --refine FILE: a construction upsampled x2 and re-optimised (scaled objective) `--rounds` times: how far a
      basin goes with resolution alone.
  --symmetry FILE: the construction against its mirror image h(2 - x): the published constructions look
      symmetric at coarse scale; this says whether the fine structure is.
  --coarsen FILE: the construction block-averaged by each of `--factors` and taken to the coarse local
      optimum: the coarsest resolution at which its basin is already there (and better than another's).
  --ladder SECONDS: the library program's random-start hop mode (`erdos_lse.ladder`: random starts at n0,
      Metropolis hops there, doublings with hops, refinement), in-process with `--settings`; prints each level,
      checks the result in exact arithmetic and writes it to `--save` (a lead for the search, not a bound).
  --chains K: the ladder's first stage alone (random starts for 1/8 of `--seconds`, then Metropolis hops at
      n0 = 51), K independent chains of `--seconds` CPU seconds each: the level each ends at and how often it is
      the lower basin's (the level from which every ladder so far ended below the record).
  --reference NAME: a published construction (`--ref` file) and the local optimum of its basin at its own n
      and at 2n (the value a random start must land near to be in that basin).

    python benchmarks/erdos_basins.py --multistart --n 50 --seconds 60
    python benchmarks/erdos_basins.py --refine runs/.../best.json --rounds 3 --round-s 100
    python benchmarks/erdos_basins.py --refine ref:haugland --rounds 4 --round-s 40
    python benchmarks/erdos_basins.py --symmetry benchmarks/results/erdos_polish_lse3.json
    python benchmarks/erdos_basins.py --reference haugland
    python benchmarks/erdos_basins.py --coarsen ref:ttt --factors 12,6,4 --round-s 30
    python benchmarks/erdos_basins.py --chains 10 --seconds 52 --seed 4
    python benchmarks/erdos_basins.py --ladder 1800 --seed 0 --settings '{"n0": 51, "hop_T": 5e-6, "hop_sym": 0.15}'

Prints one JSON line last.
"""
from __future__ import annotations

import argparse
import json
import os

from ttlab.common.data import shared_data_file
from ttlab.discover.basins import chains, coarsen, ladder, load, multistart, reference, refine, symmetry
from ttlab.discover.tasks.erdos import RECORD

REF = shared_data_file("erdos_reference.json", required=False)  # None when the shared data folder is absent


def print_row(row: dict) -> None:
    print(json.dumps(row), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--multistart", action="store_true")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--tau", type=float, default=0.01, help="first temperature of each random start")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--refine", metavar="FILE")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round-s", type=float, default=100.0)
    ap.add_argument("--symmetry", metavar="FILE")
    ap.add_argument("--coarsen", metavar="FILE", help="block-average FILE (or ref:NAME) by --factors, re-optimise")
    ap.add_argument("--factors", default="12,6,4", help="comma-separated block sizes for --coarsen")
    ap.add_argument("--reference", metavar="NAME")
    ap.add_argument("--ref", default=str(REF) if REF else None,
                    help="the published constructions (default: erdos_reference.json in the shared data folder)")
    ap.add_argument("--ladder", type=float, metavar="SECONDS", default=0.0)
    ap.add_argument("--settings", default="", help="JSON overrides of erdos_lse.SETTINGS for --ladder")
    ap.add_argument("--save", default="", help="--ladder: write the construction here")
    ap.add_argument("--chains", type=int, default=0, metavar="K", help="K chains of the ladder's first stage, "
                    "--seconds CPU seconds each (--settings overrides the ladder's settings)")
    args = ap.parse_args()
    if not (args.multistart or args.refine or args.symmetry or args.reference or args.coarsen or args.ladder
            or args.chains):
        ap.error("give at least one of --multistart, --refine FILE, --symmetry FILE, --reference NAME, --coarsen FILE, "
                 "--ladder SECONDS, --chains K")
    if args.chains < 0 or args.seconds <= 0:
        ap.error(f"--chains {args.chains} / --seconds {args.seconds}: need K >= 0 and seconds > 0")
    try:
        settings = json.loads(args.settings) if args.settings else {}
    except json.JSONDecodeError as e:
        ap.error(f"--settings is not JSON: {e}")
    try:
        out = run(args, settings)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    print(json.dumps(out))


def run(args, settings: dict) -> dict:
    out: dict = {"benchmark": "erdos_basins", "record": RECORD, "load_start": [round(x, 2) for x in os.getloadavg()]}
    if args.symmetry:
        out["symmetry"] = symmetry(load(args.symmetry, args.ref)) | {"file": args.symmetry}
    if args.reference:
        out["reference"] = reference(args.ref, args.reference)
    if args.refine:
        out["refine"] = {"file": args.refine, "rows": refine(load(args.refine, args.ref), args.rounds, args.round_s,
                                                             on_row=print_row)}
    if args.coarsen:
        out["coarsen"] = {"file": args.coarsen, "seconds": args.round_s,
                          "rows": coarsen(load(args.coarsen, args.ref), [int(f) for f in args.factors.split(",")],
                                          args.round_s, on_row=print_row)}
    if args.ladder:
        out["ladder"] = ladder(args.ladder, settings, args.seed, args.save)
    if args.chains:
        out["chains"] = chains(args.chains, args.seconds, settings, args.seed, on_row=print_row)
    if args.multistart:
        out["multistart"] = multistart(args.n, args.seconds, args.tau, args.seed)
    out["load_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


if __name__ == "__main__":
    main()
