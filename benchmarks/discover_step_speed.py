"""Speed of one TTT step of SmolLM2-135M on CPU, sampler by sampler, measured in ONE run (same machine state).

Each variant runs one real TTT step (`Trainer.step`: PUCT -> generate -> sandbox -> verify -> advantages ->
learn) of `--rollouts` programs from the same fresh roots and seed, and reports the step's time split
(generate / evaluate / learn), the tokens generated and the importance ratio between learner and sampler:

* `hf`: HF `generate` with the shared prompt prefill (the sampler of the earlier evidence);
* `llama`: llama.cpp sampling the Q4_1 GGUF with the LoRA converted to a GGUF adapter (`--backend llama`);
* `llama_bf16`: the same, with the learner's forward/backward under bfloat16 autocast (`learn_bf16`);
* `llama_f16`: llama.cpp sampling a float16 copy of the dequantised GGUF (`--llama-weights f16`);
* `llama_f16_mb4`: the same, the learner in micro-batches of 4 rollouts (`--micro-batch 4`; the prompt's
  forward and backward are shared by the micro-batches, so only the padding and the logits' size change).

The learner is the HF model in every variant (exact float32 log-probs except in `llama_bf16`); the ratio
columns say how far the sampler's log-probs are from the learner's. No warm start (the raw model's completions
run to the token cap, the worst case for generation) and, since the raw model's programs mostly fail and a group
without a valid program carries no gradient, the step's advantages are replaced by +1 / -1 alternating over
the rollouts with every rollout kept, so the learn phase always runs at its full size (its cost does not
depend on the advantages' values). Prints ONE JSON line last.

    python benchmarks/discover_step_speed.py --rollouts 16 --max-new-tokens 288 \\
        --out benchmarks/results/discover_step_speed/step_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"hf": ("hf", False, "gguf", 0), "llama": ("llama", False, "gguf", 0), "llama_bf16": ("llama", True, "gguf", 0),
            "llama_f16": ("llama", False, "f16", 0), "llama_f16_mb4": ("llama", False, "f16", 4)}
"""variant -> (sampler backend, learner under bf16 autocast, llama.cpp weights, learner micro-batch; 0: --gen-batch)"""


def step_once(args, name: str) -> dict:
    import numpy as np
    import torch

    from ttlab.discover.llm import trainer as trainer_mod
    from ttlab.discover.llm.presets import cpu_smollm2_blocks
    from ttlab.discover.llm.trainer import Trainer

    def every_rollout_learns(rewards, valid, group_ids, method="entropic", fail_mode="floor"):
        adv = np.where(np.arange(len(rewards)) % 2 == 0, 1.0, -1.0)  # (N,) the learn phase at full size
        return adv, np.ones(len(rewards), dtype=bool)

    trainer_mod.group_advantages = every_rollout_learns  # speed only: the values do not change the cost

    backend, bf16, weights, micro = VARIANTS[name]
    cfg = cpu_smollm2_blocks()
    cfg.warm_start, cfg.steps, cfg.seed, cfg.threads = False, 1, args.seed, args.threads
    cfg.learn_threads = args.learn_threads
    cfg.rollouts_per_state, cfg.policy.max_new_tokens = args.rollouts, args.max_new_tokens
    cfg.policy.backend, cfg.policy.learn_bf16 = backend, bf16
    cfg.policy.gen_batch_size = cfg.micro_batch = args.gen_batch
    cfg.policy.llama_weights, cfg.micro_batch = weights, micro or args.gen_batch
    cfg.root, cfg.run_name = str(Path(args.runs)), f"speed_{name}_{args.tag}"
    torch.manual_seed(args.seed)
    tr = Trainer(cfg, log=lambda s: None)
    try:
        load0 = os.getloadavg()[0]
        m = tr.step()
    finally:
        tr.close()
    keys = ("time/step_s", "time/generate_s", "time/evaluate_s", "time/learn_s", "perf/gen_tokens",
            "perf/gen_tokens_per_s", "perf/train_tokens_per_s", "learn/ratio_mean", "learn/ratio_max",
            "learn/tokens", "rollout/parse_rate", "rollout/valid_rate")
    return {"variant": name, "backend": backend, "learn_bf16": bf16, "llama_weights": weights,
            "micro_batch": cfg.micro_batch, "load1_start": round(load0, 2),
            "load1_end": round(os.getloadavg()[0], 2), **{k: m.get(k) for k in keys}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="hf,llama,llama_bf16", help=f"comma-separated subset of {','.join(VARIANTS)}")
    ap.add_argument("--rollouts", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=288)
    ap.add_argument("--gen-batch", type=int, default=8, help="rollouts sampled (and learned) per batch")
    ap.add_argument("--threads", type=int, default=2, help="torch / llama.cpp threads")
    ap.add_argument("--learn-threads", type=int, default=0, help="torch threads of the learn phase (0: --threads)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default=str(ROOT / "runs"))
    ap.add_argument("--tag", default=time.strftime("%Y%m%d_%H%M%S"))
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "discover_step_speed" / "step_speed.json"))
    args = ap.parse_args()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANTS]
    if bad or not names:
        raise SystemExit(f"--variants {args.variants}: unknown {bad} (choose from {', '.join(VARIANTS)})")
    t0, load0 = time.time(), os.getloadavg()
    rows = [step_once(args, n) for n in names]
    by = {r["variant"]: r for r in rows}
    ratios = {}
    if "hf" in by:
        for n, r in by.items():
            if n != "hf" and r["time/step_s"]:
                ratios[f"step_{n}_over_hf"] = round(r["time/step_s"] / by["hf"]["time/step_s"], 3)
                ratios[f"generate_{n}_over_hf"] = round(r["time/generate_s"] / by["hf"]["time/generate_s"], 3)
                ratios[f"gen_tokens_per_s_{n}_over_hf"] = round(
                    r["perf/gen_tokens_per_s"] / by["hf"]["perf/gen_tokens_per_s"], 3)
    if "llama" in by and "llama_f16" in by:
        ratios["gen_tokens_per_s_f16_over_q4_1"] = round(
            by["llama_f16"]["perf/gen_tokens_per_s"] / by["llama"]["perf/gen_tokens_per_s"], 3)
    if "llama_f16" in by and "llama_f16_mb4" in by:
        ratios["learn_mb4_over_gen_batch"] = round(by["llama_f16_mb4"]["time/learn_s"] / by["llama_f16"]["time/learn_s"], 3)
    if "llama" in by and "llama_bf16" in by:
        ratios["learn_bf16_over_fp32"] = round(by["llama_bf16"]["time/learn_s"] / by["llama"]["time/learn_s"], 3)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    res = {"benchmark": "discover_step_speed", "model": "smollm2-135m", "prompt_format": "blocks",
           "rollouts": args.rollouts, "max_new_tokens": args.max_new_tokens, "gen_batch": args.gen_batch,
           "threads": args.threads, "learn_threads": args.learn_threads, "variants": rows, "ratios": ratios, "commit": commit, "nproc": os.cpu_count(),
           "loadavg_start": load0, "loadavg_end": os.getloadavg(), "wall_s": round(time.time() - t0, 1)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps({k: res[k] for k in ("benchmark", "rollouts", "max_new_tokens", "ratios", "wall_s",
                                          "loadavg_start", "commit")}
                     | {"step_s": {r["variant"]: r["time/step_s"] for r in rows}}), flush=True)


if __name__ == "__main__":
    main()
