"""Presets of `ttlab discover train` (plain functions returning a `TrainConfig`).

The model always comes from `--model PATH` (a local Hugging Face directory); the presets size the batch,
completion length and memory knobs for it. One-GPU presets assume an 80 GB card; the paper's setting is
8 states x 64 rollouts with a larger model on many GPUs (`paper`).
"""

from __future__ import annotations

from ttlab.discover.llm.trainer import TrainConfig


def debug() -> TrainConfig:
    """Seconds on CPU with the tiny random model: 2 states x 2 rollouts, 2 steps."""
    return TrainConfig(steps=2, states_per_step=2, rollouts_per_state=2, max_new_tokens=32, gen_batch_size=4,
                       micro_batch=2, lora_rank=8, lora_alpha=16, workers=2, program_budget_s=1.0, grace_s=5.0,
                       init_states=2, device="cpu", backend="hf", memory_mb=2048)


def one_gpu_1p5b() -> TrainConfig:
    """A 1.5B model (e.g. Qwen2.5-1.5B-Instruct) on one GPU: 8 states x 32 rollouts, 4k-token programs."""
    return TrainConfig(states_per_step=8, rollouts_per_state=32, max_new_tokens=4096, gen_batch_size=64,
                       micro_batch=8, grad_checkpointing=True, workers=16)


def one_gpu_8b() -> TrainConfig:
    """An 7-8B model (e.g. Qwen2.5-7B / Llama-3.1-8B) on one 80 GB GPU: 8 states x 16 rollouts."""
    return TrainConfig(states_per_step=8, rollouts_per_state=16, max_new_tokens=4096, gen_batch_size=32,
                       micro_batch=2, grad_checkpointing=True, workers=16, vllm_gpu_memory=0.35)


def paper() -> TrainConfig:
    """The paper's batch: 8 states x 64 rollouts (needs vLLM and a large machine, or a Ray cluster)."""
    return TrainConfig(states_per_step=8, rollouts_per_state=64, max_new_tokens=8192, gen_batch_size=512,
                       micro_batch=4, grad_checkpointing=True, workers=32)


PRESETS = {"debug": debug, "one_gpu_1p5b": one_gpu_1p5b, "one_gpu_8b": one_gpu_8b, "paper": paper}
