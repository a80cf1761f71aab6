"""Throughput of one TTT-Discover training step (generate / evaluate / learn).

`--model smollm2-135m` (or any --model): the real model with the `cpu_smollm2` preset (warm start loaded
from its cache or trained first, 2 states x 8 rollouts, prompt caching, 1 torch thread), real code
extraction, --states x --rollouts (default 2 x 8 = 16) per step; reports the first step (the warm-started
model) and its time split. Without --model:
CPU: the tiny 2-layer model. CUDA (when present): the tiny model and a 0.5B-sized Qwen2 body (24 layers,
hidden 896, byte vocabulary, random weights) in bf16. Real sandbox pool, real Erdős verifier; a random
model writes no code, so completions are mapped to deterministic edit programs (as in the tests) so that
evaluation and the learn phase run for real. The second (warm) step is reported. Prints ONE JSON line.

    python benchmarks/discover_train.py [--steps 2] [--rollouts 8] [--max-new-tokens 64]
    python benchmarks/discover_train.py --model smollm2-135m --steps 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from ttlab.discover.llm import trainer as trainer_mod
from ttlab.discover.llm.presets import cpu_smollm2, debug
from ttlab.discover.llm.tiny import make_tiny_model

PROG = ("import numpy as np\n"
        "def solve(parent, budget_s, seed):\n"
        "    h = np.array(parent, dtype=float)\n"
        "    h[: {k}] *= 0.9\n"
        "    return np.clip(h, 0, 1)\n")


def edit_program(text: str) -> str:
    return PROG.format(k=1 + 5 * (len(text.encode("utf-8", "replace")) % 6))


def bench(model_dir: Path, device: str, args, root: Path, name: str) -> dict:
    cfg = debug()
    cfg.policy.model, cfg.device, cfg.root, cfg.run_name = str(model_dir), device, str(root), name
    cfg.states_per_step, cfg.rollouts_per_state = args.states, args.rollouts
    cfg.policy.max_new_tokens, cfg.policy.gen_batch_size, cfg.micro_batch = args.max_new_tokens, args.gen_batch, args.micro_batch
    cfg.steps, cfg.policy.lora_rank, cfg.policy.lora_alpha = args.steps, 32, 32
    tr = trainer_mod.Trainer(cfg, log=lambda *_: None)
    try:
        ms = [tr.step() for _ in range(args.steps)]
    finally:
        tr.close()
    m = ms[-1]
    return {
        "device": device, "samples": args.states * args.rollouts,
        "gen_tokens": m["perf/gen_tokens"], "gen_tokens_per_s": round(m["perf/gen_tokens_per_s"], 1),
        "train_tokens_per_s": round(m.get("perf/train_tokens_per_s", float("nan")), 1),
        "step_s": round(m["time/step_s"], 3), "generate_s": round(m["time/generate_s"], 3),
        "evaluate_s": round(m["time/evaluate_s"], 3), "learn_s": round(m["time/learn_s"], 3),
        "checkpoint_s": round(m["time/checkpoint_s"], 3), "valid_rate": m["rollout/valid_rate"],
        "params_M": round(sum(p.numel() for p in tr.policy.model.parameters()) / 1e6, 2),
    }


def bench_real(args, root: Path) -> dict:
    cfg = cpu_smollm2()
    cfg.policy.model, cfg.root, cfg.run_name, cfg.steps = args.model, str(root), "real", args.steps
    cfg.states_per_step, cfg.rollouts_per_state = args.states, args.rollouts  # default 2 x 8 = 16 rollouts
    cfg.policy.gen_batch_size = cfg.micro_batch = args.rollouts
    tr = trainer_mod.Trainer(cfg, log=lambda *_: None)
    try:
        ms = [tr.step() for _ in range(args.steps)]
    finally:
        tr.close()
    m = ms[0]
    return {
        "model": args.model, "preset": "cpu_smollm2", "threads": torch.get_num_threads(),
        "samples": cfg.states_per_step * cfg.rollouts_per_state, "gen_tokens": m["perf/gen_tokens"],
        "gen_tokens_per_s": round(m["perf/gen_tokens_per_s"], 1),
        "train_tokens_per_s": round(m.get("perf/train_tokens_per_s", float("nan")), 1),
        "step_s": round(m["time/step_s"], 1), "generate_s": round(m["time/generate_s"], 1),
        "evaluate_s": round(m["time/evaluate_s"], 1), "learn_s": round(m["time/learn_s"], 1),
        "parse_rate": m["rollout/parse_rate"], "valid_rate": m["rollout/valid_rate"],
        "completion_tokens_mean": round(m["rollout/completion_tokens_mean"], 1),
        "warm_start": tr.warm_info,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--states", type=int, default=2)
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--gen-batch", type=int, default=16)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--model", default="", help="a real model (e.g. smollm2-135m) with the cpu_smollm2 preset")
    args = ap.parse_args()
    out: dict = {"benchmark": "discover_train", "torch": torch.__version__, "cpu_threads": torch.get_num_threads(),
                 "nproc": os.cpu_count(), "loadavg_start": os.getloadavg()}
    if args.model:
        with tempfile.TemporaryDirectory() as tmp:
            out["real_cpu"] = bench_real(args, Path(tmp))
        out["loadavg_end"], out["wall_s"] = os.getloadavg(), round(time.time() - t0, 1)
        print(json.dumps(out), file=sys.stdout, flush=True)
        return
    trainer_mod.extract_code = edit_program  # see the module docstring
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tiny = make_tiny_model(tmp / "tiny")
        out["tiny_cpu"] = bench(tiny, "cpu", args, tmp / "runs", "tiny_cpu")
        if torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(0)
            out["tiny_cuda"] = bench(tiny, "cuda", args, tmp / "runs", "tiny_cuda")
            mid = make_tiny_model(tmp / "half_b", hidden=896, layers=24, heads=14, intermediate=4864)
            out["qwen2_0p5b_body_cuda"] = bench(mid, "cuda", args, tmp / "runs", "mid_cuda")
    out["loadavg_end"], out["wall_s"] = os.getloadavg(), round(time.time() - t0, 1)
    print(json.dumps(out), file=sys.stdout, flush=True)


t0 = time.time()

if __name__ == "__main__":
    main()
