"""Supervised warm start: LoRA SFT on short programs from the grammar in `corpus.py`, in the trainer's format.

A 135M instruct model writes almost no valid program for the Erdős prompt (see docs/notes/discover-llm.md);
RL has nothing to reinforce until some rollouts are valid. The warm start teaches the answer FORMAT and
the vocabulary of a few search loops, not a fixed program: each example is

    prompt     = build_compact_prompt(task, parent program P_a (or the root identity), a score)
    completion = "```python\\n" + P_b + "```" + EOS

where P_b is drawn from the grammar, half the time from P_a's loop family (copy and edit), half the time
from any family (rewrite). Settings are random, so P_b is not tied to P_a's numbers. The score shown in an
SFT prompt is drawn at random in the range the search visits (the warm start does not run programs). Several
completions share one prompt (`group_logprobs`: one prompt forward per group), which is what makes a few
CPU minutes enough. The adapter is saved in PEFT layout and cached by its config
(`~/.cache/ttlab/warmstart/<digest>`), so the evidence run, the demo and the CLI reuse it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ttlab.common.checkpoint import atomic_write_text
from ttlab.discover.config import TrainConfig, WarmStartConfig
from ttlab.discover.llm import corpus
from ttlab.discover.llm.corpus import PROGRAM_HEAD, mutate_program, sample_program
from ttlab.discover.llm.models import cache_root, resolve_model
from ttlab.discover.llm.policy import LLMPolicy
from ttlab.discover.prompts import ANSWER_PREFIXES, PromptState, build_compact_prompt
from ttlab.discover.tasks import get_task


def sft_examples(cfg: WarmStartConfig, task_name: str = "erdos") -> list[tuple[str, list[str]]]:
    """[(prompt, [completion text, ...])]: the SFT corpus (deterministic in `cfg.seed`)."""
    if task_name != "erdos":
        raise ValueError(f"warm start: the program grammar covers the erdos task only, not {task_name!r}")
    task = get_task(task_name)
    rng = np.random.default_rng(cfg.seed)
    out = []
    for _ in range(cfg.groups):
        if rng.random() < cfg.root_frac:
            parent, recipe, score = "", None, float(rng.uniform(0.40, 0.49))
        else:
            parent, recipe = sample_program(rng)
            score = float(rng.uniform(0.381, 0.44))
        prompt = build_compact_prompt(task, PromptState(code=parent, score=score))
        comps = []
        for _ in range(cfg.per_group):
            code, _ = (mutate_program(rng, recipe) if recipe is not None and rng.random() < 0.5
                       else sample_program(rng))
            assert code.startswith(PROGRAM_HEAD)
            comps.append(code[len(PROGRAM_HEAD):] + "```")  # the answer prefix (fence + head) is given
        out.append((prompt, comps))
    return out


def key_digest(cfg: WarmStartConfig, model_path, lora_rank: int, lora_alpha: int, target_modules: str,
               answer_prefix: str) -> str:
    """The cache key of a warm start: its config, the resolved model, the LoRA shape, the answer prefix and
    the grammar's source (`corpus.py`)."""
    key = json.dumps({"cfg": asdict(cfg), "model": str(model_path), "rank": lora_rank, "alpha": lora_alpha,
                      "targets": target_modules, "prefix": answer_prefix, "corpus": inspect.getsource(corpus)},
                     sort_keys=True)
    return hashlib.sha1(key.encode()).hexdigest()[:12]


def digest(cfg: WarmStartConfig, policy: LLMPolicy) -> str:
    return key_digest(cfg, policy.path, policy.cfg.lora_rank, policy.cfg.lora_alpha, policy.cfg.target_modules,
                      policy.answer_prefix)


def warm_start_dir(cfg: TrainConfig) -> Path:
    """Where a train config's warm-start adapter is cached (it may not exist yet). Resolves the model (a built-in
    GGUF is converted once, ~40 s) but loads no weights."""
    prefix = ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task))
    p = cfg.policy
    return cache_root() / "warmstart" / key_digest(cfg.warm, resolve_model(p.model), p.lora_rank, p.lora_alpha,
                                                   p.target_modules, prefix)


def sft(policy: LLMPolicy, cfg: WarmStartConfig, log=print) -> dict:
    """Train the policy's LoRA adapter in place on the corpus; returns {loss_first, loss_last, seconds}."""
    data = sft_examples(cfg)
    eos = int(policy.eos_ids[0])
    opt = torch.optim.Adam(policy.trainable_parameters(), lr=cfg.lr)
    rng = np.random.default_rng(cfg.seed + 1)
    losses, t0 = [], time.perf_counter()
    policy.model.train()
    for ep in range(cfg.epochs):
        for k in rng.permutation(len(data)):
            prompt, comps = data[int(k)]
            p_ids = policy.encode(prompt)
            c_ids = [torch.tensor(policy.tokenizer(c, add_special_tokens=False)["input_ids"] + [eos]) for c in comps]
            lp, mask = policy.group_logprobs(p_ids, c_ids)  # (n, C)
            loss = -lp.sum() / mask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))  # host sync once per group (logged)
            if len(losses) % 8 == 0:
                log(f"warm start: epoch {ep} group {len(losses)}: loss {np.mean(losses[-8:]):.3f} "
                    f"({time.perf_counter() - t0:.0f} s)")
    policy.mark_updated()
    policy.model.eval()
    head = losses[: max(1, len(losses) // 8)]
    tail = losses[-max(1, len(losses) // 8):]
    return {"loss_first": float(np.mean(head)), "loss_last": float(np.mean(tail)),
            "seconds": time.perf_counter() - t0, "examples": len(data) * cfg.per_group * cfg.epochs}


def warm_start(policy: LLMPolicy, cfg: WarmStartConfig, cache: bool = True, log=print) -> dict:
    """Load the cached warm-start adapter for (cfg, model, LoRA shape), or train and cache it."""
    d = cache_root() / "warmstart" / digest(cfg, policy)
    if cache and (d / "adapter.safetensors").is_file():
        policy.load_adapter_state(load_file(str(d / "adapter.safetensors")))
        info = json.loads((d / "info.json").read_text())
        log(f"warm start: loaded {d}")
        return {**info, "cached": True}
    info = sft(policy, cfg, log)
    if cache:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "adapter.safetensors.tmp"
        save_file({k: v.contiguous() for k, v in policy.adapter_state().items()}, str(tmp))
        tmp.replace(d / "adapter.safetensors")
        atomic_write_text(d / "info.json", json.dumps({**info, "config": asdict(cfg)}))
    return {**info, "cached": False}
