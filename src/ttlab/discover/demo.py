"""`discover` demo stage: verify the published Erdős constructions, contain a hostile program, and run a
short offline PUCT search with the program-library proposer (about 2 minutes on 2 CPU cores)."""

from __future__ import annotations

import json
from pathlib import Path

from ttlab.discover.loop import SearchConfig, run_search
from ttlab.discover.sandbox import Job, Limits, SandboxPool
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.erdos import check_record, load_reference

REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "erdos_reference.json"


def run(out_dir: Path, device: str = "cpu") -> str:
    del device  # CPU only: the search is sandboxed numpy/scipy programs
    out_dir = Path(out_dir)
    lines = []
    task = get_task("erdos")
    if REFERENCE.exists():
        for c in load_reference(REFERENCE):
            r = task.verify(c["h"])
            lines.append(f"- `{c['name']}`: verified C5 = {r.score:.12f} (published {c['c5']:.12f}, "
                         f"|diff| = {abs(r.score - c['c5']):.1e})")
        ttt = load_reference(REFERENCE)[-1]
        ok, _, msg = check_record(ttt["h"], "0.380876")
        lines.append(f"- exact rational check of the 0.380876 record claim: {'holds' if ok else 'fails'} ({msg})")
    with SandboxPool(2, Limits(wall_s=2.0)) as pool:
        bomb = pool.submit(Job("import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                               "        time.sleep(0.01)\n")).result()
        lines.append(f"- hostile fork bomb: `{bomb.status}` ({bomb.reason}); {bomb.leftover_killed} leftover "
                     f"processes killed; isolation {pool.caps}")
    cfg = SearchConfig(budget="100s", program_budget_s=8.0, grace_s=8.0, run_name="search", root=str(out_dir.parent),
                       samples_per_state=1)
    rec = run_search(cfg)
    (out_dir / "best_erdos.json").write_text(json.dumps(rec))
    lines.append(f"- offline search (100 s, library proposer, 2 workers): best verified C5 = {rec['score']:.9f} "
                 f"(n = {len(rec['construction'])}) after {rec['evals']} sandboxed programs; "
                 f"best construction in `{out_dir / 'search' / 'best.json'}`")
    return "Erdős minimum overlap (C5, lower is better; AlphaEvolve 0.380924, record 0.380876):\n\n" + "\n".join(lines)
