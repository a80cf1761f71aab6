"""Range checks of the discover commands' flags, run before anything is loaded, started or written.

    check_train(cfg)    # raises UserError("--micro-batch 0: must be >= 1")

Each check names the flag as it is typed (`--rollouts-per-state`, `--warm.lr`; the policy's flags carry no
prefix) and what it must be. Pure functions of the config: `ttlab discover search | polish | train` call them first,
and so do `run_search`, `run_polish` and the `Trainer` for callers that build a config in code.
"""

from __future__ import annotations

from ttlab.common.errors import UserError
from ttlab.common.flags import above, at_least, one_of, within
from ttlab.discover.config import PolicyConfig, PolishConfig, SearchConfig, TrainConfig, WarmStartConfig
from ttlab.discover.prompts import PROMPT_FORMATS


def check_search(cfg: SearchConfig) -> None:
    at_least(cfg, ("workers", "states_per_step", "samples_per_state", "keep_children", "max_roots", "memory_mb"), 1)
    if not (cfg.init_tree or cfg.resume):
        at_least(cfg, ("init_states",), 1)
    at_least(cfg, ("max_steps", "grace_s", "puct_c"), 0)
    above(cfg, ("program_budget_s",), 0)
    at_least(cfg, ("program_wall_factor",), 1)


def check_polish(cfg: PolishConfig) -> None:
    at_least(cfg, ("upsample", "memory_mb"), 1)
    above(cfg, ("round_s",), 0)


def check_policy(p: PolicyConfig) -> None:
    at_least(p, ("lora_rank", "max_new_tokens", "gen_batch_size"), 1)
    above(p, ("lora_alpha", "temperature"), 0)
    within(p, "lora_dropout", 0, 1, hi_open=True)
    if not 0 < p.top_p <= 1:
        raise UserError(f"--top-p {p.top_p}: must be in (0, 1]")
    if not 0 < p.vllm_gpu_memory <= 1:
        raise UserError(f"--vllm-gpu-memory {p.vllm_gpu_memory}: must be in (0, 1]")
    one_of(p, "backend", ("auto", "hf", "vllm", "llama"))
    one_of(p, "llama_weights", ("gguf", "f16"))


def check_warm(w: WarmStartConfig) -> None:
    pre = "warm."
    at_least(w, ("groups", "per_group", "epochs", "pool", "pool_workers"), 1, pre)
    above(w, ("lr", "pool_budget_s"), 0, pre)
    at_least(w, ("rest_weight",), 0, pre)
    for n in ("root_frac", "root_restart"):
        within(w, n, 0, 1, prefix=pre)
    if not 0 < w.top_frac <= 1:
        raise UserError(f"--warm.top-frac {w.top_frac}: must be in (0, 1]")
    one_of(w, "pool_clock", ("time", "work"), pre)
    bad = [q for q in w.pool_parents if not 0 <= q <= 1]
    if bad:
        raise UserError(f"--warm.pool-parents {bad[0]}: each must be a quantile in [0, 1]")


def check_train(cfg: TrainConfig) -> None:
    at_least(cfg, ("steps", "states_per_step", "rollouts_per_state", "micro_batch", "workers", "ray_cpus_per_task",
                   "memory_mb", "keep_children", "max_roots", "keep_checkpoints"), 1)
    if cfg.init_tree is None and not cfg.resume:
        at_least(cfg, ("init_states",), 1)
    at_least(cfg, ("grad_clip", "kl_coef", "ratio_cap", "adv_clip", "grace_s", "puct_c", "threads", "learn_threads"), 0)
    above(cfg, ("lr", "adam_eps", "program_budget_s"), 0)
    for n in ("adam_beta1", "adam_beta2"):
        within(cfg, n, 0, 1, hi_open=True)
    one_of(cfg, "advantage", ("entropic", "grpo"))
    one_of(cfg, "adv_group", ("state", "state_start"))
    one_of(cfg, "kl_ref", ("base", "init"))
    one_of(cfg, "fail_mode", ("floor", "zero"))
    one_of(cfg, "executor", ("local", "ray"))
    one_of(cfg, "prompt_format", sorted(PROMPT_FORMATS))
    check_policy(cfg.policy)
    if cfg.warm_start:
        check_warm(cfg.warm)
