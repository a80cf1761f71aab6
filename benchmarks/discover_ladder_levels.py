"""Where is a random-start search's outcome decided? Every ladder's C5 at each size, from its own output.

    python benchmarks/discover_ladder_levels.py runs/discover/bench_search_*_seed* \
        --out benchmarks/results/discover_search/ladder_levels.json

Reads the ladders (`erdos_lse` in random-start hop mode: Metropolis hops at n0 = 51 pieces, doublings with hops
to 204, refinement to 816) of `benchmarks/discover_search.py` runs, from a run directory's `tree.json` (each
node keeps its program's output) or from a result file (each program's last output lines, `log`). For every
ladder: its seed, its C5 at each size, and its final C5; then, grouped by the level its first stage ended on at
n0, how many ladders ended below the record (0.380876); for ladders that screen chains at n0 (`chains` > 1), every
chain's level and hops (`chain_levels`; a ladder's level is its lowest chain's). A level at n0 that always ends below the record says
the basin is decided at 51 pieces, before any doubling. One JSON line last.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

RECORD = 0.380876
STAGE = re.compile(r"lse ladder:(?: chain \d+/\d+)? (?:refined to )?n=(\d+) C5=([0-9.]+)")


def ladder_stages(lines: list[str]) -> dict[int, float]:
    """{n: C5} from a ladder's output lines (the last value at each n; chains at n0 keep their lowest)."""
    out: dict[int, float] = {}
    for ln in lines:
        m = STAGE.match(ln.strip())
        if m:
            n, c = int(m.group(1)), float(m.group(2))
            out[n] = min(out.get(n, c), c) if "chain" in ln else c
    return out


CHAIN = re.compile(r"lse ladder: chain \d+/\d+ n=\d+ C5=([0-9.]+) after (\d+) hops")


def chain_ends(lines: list[str]) -> list[list[float]]:
    """[[C5, hops], ...] for each chain of a ladder that screens chains at n0 (`chains` > 1); [] otherwise."""
    return [[float(m.group(1)), int(m.group(2))] for m in (CHAIN.match(ln.strip()) for ln in lines) if m]


def ladders_of(path: Path) -> list[dict]:
    """The ladders of one run directory (tree.json) or one result file (`seeds[].programs[].log`)."""
    rows = []
    if path.is_dir():
        tree = json.loads((path / "tree.json").read_text())
        nodes = tree["nodes"] if isinstance(tree["nodes"], list) else list(tree["nodes"].values())
        seed = int(re.search(r"seed(\d+)$", path.name).group(1)) if re.search(r"seed(\d+)$", path.name) else None
        for x in nodes:
            lines = (x.get("stdout") or "").splitlines()
            st = ladder_stages(lines)
            if st and x.get("score") is not None:
                rows.append({"seed": seed, "source": path.name, "stages": st, "final": float(x["score"]),
                             "chains": chain_ends(lines)})
        return rows
    d = json.loads(path.read_text())
    for s in d.get("seeds", []):
        for q in s.get("programs", []):
            st = ladder_stages(q.get("log") or [])
            if st and q.get("score") is not None:
                rows.append({"seed": s["seed"], "source": path.name, "stages": st, "final": float(q["score"]),
                             "chains": chain_ends(q.get("log") or [])})
    return rows


def by_level(rows: list[dict], digits: int = 7) -> list[dict]:
    """Ladders grouped by their C5 at the smallest size, with how many ended below the record."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        n0 = min(r["stages"])
        groups.setdefault(f"{r['stages'][n0]:.{digits}f}", []).append(r)
    return [{"level_at_n0": k, "ladders": len(v), "below_record": sum(r["final"] < RECORD for r in v),
             "final_best": min(r["final"] for r in v), "final_worst": max(r["final"] for r in v)}
            for k, v in sorted(groups.items())]


def chain_levels(rows: list[dict], digits: int = 7) -> list[dict]:
    """Every screened chain (ladders with `chains` > 1) grouped by the level it ended on at n0, with its hops."""
    groups: dict[str, list[int]] = {}
    for r in rows:
        for c5, hops in r.get("chains", []):
            groups.setdefault(f"{c5:.{digits}f}", []).append(hops)
    return [{"level_at_n0": k, "chains": len(v), "hops_min": min(v), "hops_max": max(v)}
            for k, v in sorted(groups.items())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="run directories (with tree.json) or discover_search result files")
    ap.add_argument("--out", default="", help="write the JSON here")
    a = ap.parse_args()
    rows = []
    for p in map(Path, a.paths):
        if not (p.is_file() or (p / "tree.json").is_file()):
            raise SystemExit(f"discover_ladder_levels: {p}: neither a result file nor a run directory with tree.json")
        rows += ladders_of(p)
    if not rows:
        raise SystemExit("discover_ladder_levels: no ladder output found in the given paths")
    seen, uniq = set(), []
    for r in rows:  # a run read both from its directory and from its result file counts once
        k = (r["seed"], round(r["final"], 12), tuple(sorted(r["stages"].items())))
        if k not in seen:
            seen.add(k)
            uniq.append(r)
    levels = by_level(uniq)
    for r in uniq:
        r["stages"] = {str(n): c for n, c in sorted(r["stages"].items())}
    res = {"benchmark": "discover_ladder_levels", "record": RECORD, "ladders": len(uniq),
           "below_record": sum(r["final"] < RECORD for r in uniq), "levels": levels,
           "chain_levels": chain_levels(uniq),
           "rows": sorted(uniq, key=lambda r: (r["seed"] is None, r["seed"], r["final"]))}
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res) + "\n")
    for g in levels:
        print(f"n0 level {g['level_at_n0']}: {g['ladders']} ladders, {g['below_record']} below the record "
              f"(final {g['final_best']:.7f}-{g['final_worst']:.7f})", flush=True)
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}))


if __name__ == "__main__":
    main()
