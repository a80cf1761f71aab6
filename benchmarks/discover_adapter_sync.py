"""The adapter-conversion part of a TTT step: the LoRA (PEFT state) written as a GGUF adapter and loaded by llama.cpp.

    python benchmarks/discover_adapter_sync.py --repeats 3 --out benchmarks/results/discover_step_speed/adapter_sync.json

After every update the llama.cpp sampler converts the learner's LoRA to a GGUF adapter and swaps it in
(`LlamaCppGenerator.sync`, the first thing a step's generation does). This times that, for the blocks preset's
model and LoRA shape with the shipped warm start, `--repeats` times (a new adapter version each time), split into
reading the adapter state, writing the GGUF file and loading it. Prints ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import torch

from ttlab.common.device import seed_everything
from ttlab.discover.llm import llama_backend
from ttlab.discover.llm.policy import LLMPolicy
from ttlab.discover.llm.presets import cpu_smollm2_blocks
from ttlab.discover.llm.warmstart import warm_start
from ttlab.discover.prompts import ANSWER_PREFIXES
from ttlab.discover.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.repeats < 1:
        raise SystemExit(f"--repeats {args.repeats}: at least 1")
    t0, load0 = time.time(), os.getloadavg()
    cfg = cpu_smollm2_blocks()
    torch.set_num_threads(1)
    seed_everything(0)
    pol = LLMPolicy(cfg.policy, torch.device("cpu"), seed=0, answer_prefix=ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task)))
    warm_start(pol, cfg.warm, log=lambda s: None, prompt_format=cfg.prompt_format)
    gen = pol.llama
    rows = []
    for _ in range(args.repeats):
        pol.mark_updated()
        a = time.perf_counter()
        state = pol.adapter_state()
        b = time.perf_counter()
        path = llama_backend.lora_to_gguf(state, gen.root / "probe.gguf", cfg.policy.lora_alpha, gen.n_head, gen.n_kv_head)
        c = time.perf_counter()
        size = path.stat().st_size
        path.unlink()
        gen.sync(lambda s=state: s, pol.version)  # convert again and load into the context, as a step does
        d = time.perf_counter()
        rows.append({"state_s": round(b - a, 3), "write_gguf_s": round(c - b, 3), "sync_total_s": round(d - c, 3),
                     "gguf_mb": round(size / 2**20, 2)})
    git = ["git", "-C", str(ROOT)]
    res = {"benchmark": "discover_adapter_sync", "model": cfg.policy.model, "lora_rank": cfg.policy.lora_rank,
           "rows": rows, "median_sync_s": sorted(r["sync_total_s"] for r in rows)[len(rows) // 2],
           "commit": subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "nproc": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(),
           "wall_s": round(time.time() - t0, 1)}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
