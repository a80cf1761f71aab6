"""The warm start's gate on the tuning seed: its programs against the random-blocks grammar at equal programs.

    python benchmarks/discover_warm_gate.py --presets cpu_smollm2_blocks_rs,cpu_smollm2_blocks --programs 32 \\
        --seed 0 --out benchmarks/results/discover_warm_pool/gate.json

Two contexts (`--contexts`, both by default), each on the tuning seed `--seed` only: `root` (the root prompt of the seed's first root, programs
run from that root) and `refined` (a child prompt showing the pool's best program and its score, programs run
from the construction it built: the refined parent of `warm_pool.refined_parent`). For each preset and context,
samples `--programs` programs from its warm start (frozen, the preset's sampler and temperature, T = 1.0 for the
blocks presets) and runs each once in the sandbox with program seed 1000 + i on the preset's program clock. The
random-blocks grammar's side is the scored pool of the same seed (`warm_pool.cached_pool` with `pool_refined`:
the same parents, program seeds 1000 + i, budget and clock), its first `--programs` programs. Reports per side
the valid rate, the mean / median / best C5 of the valid programs, and the mean C5 counting a failure as the
pool's worst in that context (what a failed rollout costs a search), and the share of each start the programs
make (`starts.start_of`: restart, coarsen or parent; over the programs that parsed). A preset whose warm start is neither cached
nor shipped is refused (this gate never trains one). Prints ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

from ttlab.common.device import seed_everything
from ttlab.discover.config import WarmStartConfig
from ttlab.discover.llm.policy import LLMPolicy
from ttlab.discover.llm.presets import TRAIN_PRESETS
from ttlab.discover.llm.warm_pool import cached_pool, refined_parent, score, tuning_root
from ttlab.discover.llm.warmstart import shipped_dir, warm_start, warm_start_dir
from ttlab.discover.prompts import ANSWER_PREFIXES, PROMPT_FORMATS, PromptState, extract_code
from ttlab.discover.starts import STARTS, start_of
from ttlab.discover.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]


def stats(c5: list[float | None], worst: float) -> dict:
    v = np.array([c for c in c5 if c is not None])
    return {"programs": len(c5), "valid": int(v.size), "valid_rate": float(v.size / max(1, len(c5))),
            "best_c5": float(v.min()) if v.size else None, "mean_c5": float(v.mean()) if v.size else None,
            "median_c5": float(np.median(v)) if v.size else None,
            "q25_c5": float(np.quantile(v, 0.25)) if v.size else None,
            "mean_c5_failure_as_worst": float(np.mean([c if c is not None else worst for c in c5]))}


def start_shares(codes: list[str | None]) -> dict:
    """The share of each start (`starts.start_of`) among the programs that parsed, and how many parsed."""
    parsed = [c for c in codes if c is not None]
    return {"parsed": len(parsed),
            **{s: round(sum(start_of(c) == s for c in parsed) / max(1, len(parsed)), 4) for s in STARTS}}


def sample(preset: str, n: int, seed: int, threads: int, states: dict[str, PromptState]
           ) -> tuple[dict[str, list[str | None]], dict, dict[str, float]]:
    """`n` programs of the preset's warm start per context prompt; ({context: codes}, warm info, {context: s})."""
    cfg = TRAIN_PRESETS[preset]()
    task = get_task(cfg.task)
    torch.set_num_threads(max(1, threads))
    seed_everything(seed)
    prefix = ANSWER_PREFIXES[cfg.prompt_format](task)
    pol = LLMPolicy(cfg.policy, torch.device("cpu"), seed=seed, answer_prefix=prefix)
    info = warm_start(pol, cfg.warm, log=lambda s: print(s, flush=True), prompt_format=cfg.prompt_format)
    codes: dict[str, list[str | None]] = {}
    secs: dict[str, float] = {}
    for ctx, state in states.items():
        prompt = PROMPT_FORMATS[cfg.prompt_format](task, state)
        t0, codes[ctx] = time.time(), []
        while len(codes[ctx]) < n:
            for g in pol.generate([prompt] * min(cfg.policy.gen_batch_size, n - len(codes[ctx]))):
                codes[ctx].append(extract_code(prefix + g.text))
            print(f"[{preset} {ctx}] sampled {len(codes[ctx])}/{n} ({time.time() - t0:.0f} s)", flush=True)
        secs[ctx] = round(time.time() - t0, 1)
    return codes, {k: info.get(k) for k in ("loss_first", "loss_last", "examples", "shipped", "cached")}, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="cpu_smollm2_blocks_rs", help="comma-separated blocks presets")
    ap.add_argument("--programs", type=int, default=32, help="programs per preset and context")
    ap.add_argument("--seed", type=int, default=0, help="the tuning seed")
    ap.add_argument("--pool", type=int, default=448, help="the pool to compare with (scored by discover_warm_pool.py)")
    ap.add_argument("--contexts", default="root,refined", help="comma-separated: root (the root prompt from the root) "
                    "and/or refined (a child prompt from the pool's best construction; needs the pool from the root "
                    "and from that parent, 448 programs by default)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    presets = [p for p in args.presets.split(",") if p]
    bad = [p for p in presets if p not in TRAIN_PRESETS]
    if bad or not presets:
        raise SystemExit(f"--presets {args.presets}: unknown {bad} (one of {', '.join(sorted(TRAIN_PRESETS))})")
    if not 1 <= args.programs <= args.pool:
        raise SystemExit(f"--programs {args.programs}: between 1 and --pool {args.pool}")
    contexts = [c for c in args.contexts.split(",") if c]
    if not contexts or set(contexts) - {"root", "refined"} or len(set(contexts)) < len(contexts):
        raise SystemExit(f"--contexts {args.contexts}: distinct names from root, refined")
    for preset in presets:
        cfg = TRAIN_PRESETS[preset]()
        if cfg.prompt_format != "blocks" or not cfg.warm_start:
            raise SystemExit(f"--presets {preset}: the gate compares a blocks preset's warm start")
        if shipped_dir(cfg) is None and not (warm_start_dir(cfg) / "adapter.safetensors").is_file():
            raise SystemExit(f"--presets {preset}: its warm start is not built (ttlab discover warmstart --preset {preset})")
    t0, load0 = time.time(), os.getloadavg()
    wcfg = WarmStartConfig(top_frac=0.25, pool=args.pool, pool_seed=args.seed, pool_refined="refined" in contexts)
    pool = cached_pool(wcfg, log=lambda s: print(s, flush=True))
    task = get_task("erdos")
    root = tuning_root(args.seed)
    states = {"root": PromptState(code="", score=task.verify(root).score)}
    parents = {"root": root}
    best = None
    if "refined" in contexts:
        refined, best = refined_parent(pool, wcfg)
        states["refined"] = PromptState(code=pool[best]["code"], score=task.verify(refined).score,
                                        parent_score=task.verify(root).score)  # as the trainer shows a child
        parents["refined"] = refined
    states = {c: states[c] for c in contexts}
    field = {"root": "c5", "refined": "c5_refined"}
    sides: dict[str, dict] = {}
    for ctx in states:
        worst = max(p[field[ctx]] for p in pool if p[field[ctx]] is not None)
        sides[ctx] = {"random_blocks": {**stats([p[field[ctx]] for p in pool[: args.programs]], worst),
                                        "starts": start_shares([p["code"] for p in pool[: args.programs]]),
                                        "source": f"pool programs 0..{args.programs - 1}"}}
    runs: dict[str, dict] = {ctx: {} for ctx in states}
    for preset in presets:
        cfg = TRAIN_PRESETS[preset]()
        codes, info, gen_s = sample(preset, args.programs, args.seed, args.threads, states)
        for ctx, cs in codes.items():
            ix = [i for i, c in enumerate(cs) if c is not None]
            res = score([cs[i] for i in ix], parents[ctx], [1000 + i for i in ix], cfg.program_budget_s,
                        cfg.program_clock, cfg.workers, log=lambda s: print(s, flush=True))
            c5: list[float | None] = [None] * len(cs)
            for i, r in zip(ix, res, strict=True):
                c5[i] = r["c5"]
            worst = max(p[field[ctx]] for p in pool if p[field[ctx]] is not None)
            sides[ctx][preset] = {**stats(c5, worst), "parsed": len(ix), "starts": start_shares(cs), "warm_start": info,
                                  "generate_s": gen_s[ctx], "temperature": cfg.policy.temperature}
            runs[ctx][preset] = [{"code": c, "c5": x} for c, x in zip(cs, c5, strict=True)]
            print(f"[{preset} {ctx}] {sides[ctx][preset]}", flush=True)
    for ctx in states:
        print(f"[random_blocks {ctx}] {sides[ctx]['random_blocks']}", flush=True)
    git = ["git", "-C", str(ROOT)]
    out = {"benchmark": "discover_warm_gate", "seed": args.seed, "programs": args.programs, "pool": args.pool,
           "refined_parent": {"pool_index": best, "c5": states["refined"].score} if best is not None else None,
           "contexts": contexts, "sides": sides, "runs": runs,
           "commit": subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "dirty": bool(subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True, text=True).stdout),
           "nproc": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(),
           "wall_s": round(time.time() - t0, 1)}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("benchmark", "seed", "programs", "sides", "wall_s", "loadavg_start",
                                          "loadavg_end", "commit")}))


if __name__ == "__main__":
    main()
