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
CPU minutes enough. With `--prompt-format blocks` the prompts are the blocks prompt and the programs are
draws of the random-blocks grammar (`random_blocks.random_program`): the warm start teaches the blocks API
and the answer format, and TTT then has to find which compositions score (the random-blocks proposer is the
same grammar sampled blindly, the baseline). The adapter is saved in PEFT layout and cached by its config
(`~/.cache/ttlab/warmstart/<digest>`), so the evidence run, the demo and the CLI reuse it.

Shipped adapters: `ttlab discover warmstart --preset NAME` writes the adapter (float16 safetensors) and a
`config.json` holding its machine-independent key (`shipped_key`), the SFT losses and the command, to
`src/ttlab/discover/pretrained/<preset>/`. `warm_start` loads such a directory when its key matches the
run's (same config, LoRA shape, answer prefix, grammar source and GGUF file), so a fresh clone skips the
SFT; any change to those makes the key differ and the adapter is trained again.
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
from ttlab.common.device import seed_everything
from ttlab.discover import random_blocks
from ttlab.discover.config import TrainConfig, WarmStartConfig
from ttlab.discover.llm import corpus, warm_pool
from ttlab.discover.llm.corpus import PROGRAM_HEAD, mutate_program, sample_program
from ttlab.discover.llm.models import BUILTIN, cache_root, gguf_source, resolve_model
from ttlab.discover.llm.policy import LLMPolicy
from ttlab.discover.prompts import (
    ANSWER_PREFIXES,
    BLOCKS_HEAD,
    PromptState,
    build_blocks_prompt,
    build_compact_prompt,
)
from ttlab.discover.tasks import get_task

PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"
"""Shipped warm-start adapters, one directory per preset (`ttlab discover warmstart` writes them)."""


def sft_examples(cfg: WarmStartConfig, task_name: str = "erdos", prompt_format: str = "compact", log=print
                 ) -> list[tuple[str, list[str]]]:
    """[(prompt, [completion text, ...])]: the SFT corpus (deterministic in `cfg.seed`, and in the pool's
    scores when `cfg.top_frac` < 1)."""
    if task_name != "erdos":
        raise ValueError(f"warm start: the program grammar covers the erdos task only, not {task_name!r}")
    warm_pool.check(cfg)
    if prompt_format == "blocks":
        return blocks_examples(cfg, log)
    if prompt_format != "compact":
        raise ValueError(f"warm start: no corpus for --prompt-format {prompt_format!r} (compact or blocks)")
    if warm_pool.filtered(cfg):
        raise ValueError("warm start: --warm.top-frac < 1 filters blocks programs; use --prompt-format blocks")
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


def blocks_examples(cfg: WarmStartConfig, log=print) -> list[tuple[str, list[str]]]:
    """The blocks corpus: blocks prompts (a root, or a block program as the parent) with block programs as
    completions (the answer prefix `BLOCKS_HEAD` is given, so it is cut from each). The programs are fresh
    grammar draws, or with a filter (`top_frac` < 1) draws from the scored pool's best (`warm_pool.select`,
    by weight, distinct within a prompt when the pool allows): best from the root for a root prompt, and with
    `pool_refined` best from a refined parent for a child prompt (its shown parent is one of those too). With
    graded parents (`pool_parents`) a child prompt shows one of them, its real program and C5, and its
    completions are the programs best from it. Without a filter, `root_restart` > 0 sets the share of root
    completions that restart."""
    task = get_task("erdos")
    rng = np.random.default_rng(cfg.seed)
    if warm_pool.filtered(cfg):
        pool = warm_pool.cached_pool(cfg, log)
        kept = {"root": warm_pool.select(pool, cfg.top_frac, cfg.rest_weight)}
        kept["child"] = (warm_pool.select(pool, cfg.top_frac, cfg.rest_weight, "c5_refined") if cfg.pool_refined
                         else kept["root"])
        for field, _, _ in graded_parents(pool, cfg) if cfg.pool_parents else []:
            kept[field] = warm_pool.select(pool, cfg.top_frac, cfg.rest_weight, field)

        def program(kind: str = "child") -> str:
            codes, w = kept[kind]
            return codes[int(rng.choice(len(codes), p=w / w.sum()))]

        def programs(n: int, kind: str) -> list[str]:
            codes, w = kept[kind]
            ix = rng.choice(len(codes), size=n, replace=int((w > 0).sum()) < n, p=w / w.sum())
            return [codes[int(i)] for i in ix]
    else:
        def program(kind: str = "child") -> str:
            if kind == "root" and cfg.root_restart:  # the restart share of root completions, set
                restart = rng.random() < cfg.root_restart
                while True:
                    code, choices = random_blocks.random_program(rng)
                    if (choices["start"] == "multistart") == restart:
                        return code
            return random_blocks.random_program(rng)[0]

        def programs(n: int, kind: str) -> list[str]:
            return [program(kind) for _ in range(n)]
    grades = graded_parents(pool, cfg) if warm_pool.filtered(cfg) and cfg.pool_parents else []
    out = []
    for _ in range(cfg.groups):
        if rng.random() < cfg.root_frac:
            kind, parent, score = "root", "", float(rng.uniform(0.40, 0.49))
        elif grades:
            kind, parent, score = grades[int(rng.integers(len(grades)))]
        else:
            kind, parent, score = "child", program(), float(rng.uniform(0.3809, 0.40))
        prompt = build_blocks_prompt(task, PromptState(code=parent, score=score))
        comps = []
        for code in programs(cfg.per_group, kind):
            assert code.startswith(BLOCKS_HEAD)
            comps.append(code[len(BLOCKS_HEAD):] + "```")
        out.append((prompt, comps))
    return out


def graded_parents(pool: list[dict], cfg: WarmStartConfig) -> list[tuple[str, str, float]]:
    """[(pool field, parent program, parent C5)]: the graded parents of a filtered pool, each with the field of
    the programs' C5 from it (the refined parent first, with `pool_refined`)."""
    out = []
    if cfg.pool_refined:
        i = int(np.argmin(warm_pool.ranks(pool)))
        out.append(("c5_refined", pool[i]["code"], float(pool[i]["c5"])))
    for q in cfg.pool_parents:
        i = warm_pool.graded_index(pool, q)
        out.append((warm_pool.graded_field(q), pool[i]["code"], float(pool[i]["c5"])))
    return out


SFT_TEMPERATURE = 1.0
"""The temperature of the SFT's log-probs, whatever the sampler's: the warm start fits the model's own
distribution to the grammar, so one adapter serves every sampling temperature and T < 1 sharpens what was
learned (an SFT at the sampler's T = 0.5 would teach logits that only match the grammar once halved). It is in
the key, so adapters trained at another temperature are not reused."""


def _grammar_source(answer_prefix: str) -> str:
    """The source of the grammar a warm start trains on (part of its key)."""
    mod = random_blocks if BLOCKS_HEAD in answer_prefix else corpus
    return inspect.getsource(mod)


def _key(cfg: WarmStartConfig, model: str, lora_rank: int, lora_alpha: int, target_modules: str,
         answer_prefix: str) -> str:
    d = {"cfg": warm_pool.key_fields(cfg), "model": model, "rank": lora_rank, "alpha": lora_alpha,
         "targets": target_modules, "prefix": answer_prefix, "corpus": _grammar_source(answer_prefix),
         "sft_temperature": SFT_TEMPERATURE}
    if warm_pool.filtered(cfg):
        d["pool"] = warm_pool.pool_key(cfg)  # the programs the filter chose from (and the blocks that scored them)
    return hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def key_digest(cfg: WarmStartConfig, model_path, lora_rank: int, lora_alpha: int, target_modules: str,
               answer_prefix: str) -> str:
    """The cache key of a warm start: its config (with the filter's fields and the pool's key when the filter is
    on), the resolved model, the LoRA shape, the answer prefix and the grammar's source (`corpus.py`, or
    `random_blocks.py` for the blocks format)."""
    return _key(cfg, str(model_path), lora_rank, lora_alpha, target_modules, answer_prefix)


def digest(cfg: WarmStartConfig, policy: LLMPolicy) -> str:
    return key_digest(cfg, policy.path, policy.cfg.lora_rank, policy.cfg.lora_alpha, policy.cfg.target_modules,
                      policy.answer_prefix)


def model_identity(spec: str) -> str:
    """A machine-independent name of the base model: a built-in name with its GGUF file's size, else the spec
    (a local directory or file never matches a shipped adapter made from a built-in model)."""
    spec = (spec or "").strip()
    gguf = gguf_source(spec) if spec in BUILTIN else None
    return f"{spec}:{gguf.stat().st_size}" if gguf is not None else f"local:{spec}"


def shipped_key(cfg: WarmStartConfig, model: str, lora_rank: int, lora_alpha: int, target_modules: str,
                answer_prefix: str) -> str:
    """The key a shipped adapter is stored under: like `key_digest` but with `model_identity` instead of the
    resolved model path (which names this machine's cache)."""
    return _key(cfg, model_identity(model), lora_rank, lora_alpha, target_modules, answer_prefix)


def policy_shipped_key(cfg: WarmStartConfig, policy: LLMPolicy) -> str:
    p = policy.cfg
    return shipped_key(cfg, p.model, p.lora_rank, p.lora_alpha, p.target_modules, policy.answer_prefix)


def find_shipped(key: str, root: Path = PRETRAINED_DIR) -> Path | None:
    """The shipped adapter directory whose config.json holds `key`, or None."""
    for cfg_file in sorted(Path(root).glob("*/config.json")):
        try:
            if json.loads(cfg_file.read_text()).get("key") == key and (cfg_file.parent / "adapter.safetensors").is_file():
                return cfg_file.parent
        except (OSError, json.JSONDecodeError):
            continue
    return None


def warm_start_dir(cfg: TrainConfig) -> Path:
    """Where a train config's warm-start adapter is cached (it may not exist yet). Resolves the model (a built-in
    GGUF is converted once, ~40 s) but loads no weights."""
    prefix = ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task))
    p = cfg.policy
    return cache_root() / "warmstart" / key_digest(cfg.warm, resolve_model(p.model), p.lora_rank, p.lora_alpha,
                                                   p.target_modules, prefix)


def sft(policy: LLMPolicy, cfg: WarmStartConfig, log=print, prompt_format: str = "compact") -> dict:
    """Train the policy's LoRA adapter in place on the corpus; returns {loss_first, loss_last, seconds}."""
    data = sft_examples(cfg, prompt_format=prompt_format, log=log)
    eos = int(policy.eos_ids[0])
    opt = torch.optim.Adam(policy.trainable_parameters(), lr=cfg.lr)
    total = max(1, cfg.epochs * len(data))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: 0.5 * (1.0 + np.cos(np.pi * min(i, total) / total)) if cfg.cosine else 1.0)
    rng = np.random.default_rng(cfg.seed + 1)
    losses, t0 = [], time.perf_counter()
    policy.model.train()
    for ep in range(cfg.epochs):
        for k in rng.permutation(len(data)):
            prompt, comps = data[int(k)]
            p_ids = policy.encode(prompt)
            c_ids = [torch.tensor(policy.tokenizer(c, add_special_tokens=False)["input_ids"] + [eos]) for c in comps]
            lp, mask = policy.group_logprobs(p_ids, c_ids, temperature=SFT_TEMPERATURE, bf16=cfg.bf16)  # (n, C)
            loss = -lp.sum() / mask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), 1.0)
            opt.step()
            sched.step()
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


def warm_start(policy: LLMPolicy, cfg: WarmStartConfig, cache: bool = True, log=print,
               prompt_format: str = "compact", shipped_root: Path | None = PRETRAINED_DIR) -> dict:
    """Load the cached warm-start adapter for (cfg, model, LoRA shape), else a shipped one with the same key,
    else train (and cache) it."""
    d = cache_root() / "warmstart" / digest(cfg, policy)
    if cache and (d / "adapter.safetensors").is_file():
        policy.load_adapter_state(load_file(str(d / "adapter.safetensors")))
        info = json.loads((d / "info.json").read_text())
        log(f"warm start: loaded {d}")
        return {**info, "cached": True}
    shipped = find_shipped(policy_shipped_key(cfg, policy), shipped_root) if cache and shipped_root else None
    if shipped is not None:
        state = {k: v.float() for k, v in load_file(str(shipped / "adapter.safetensors")).items()}
        policy.load_adapter_state(state)
        info = json.loads((shipped / "config.json").read_text())
        log(f"warm start: loaded the shipped adapter {shipped.name}")
        return {**{k: info.get(k) for k in ("loss_first", "loss_last", "seconds", "examples", "key")},
                "cached": True, "shipped": shipped.name}
    info = sft(policy, cfg, log, prompt_format)
    if cache:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "adapter.safetensors.tmp"
        save_file({k: v.contiguous() for k, v in policy.adapter_state().items()}, str(tmp))
        tmp.replace(d / "adapter.safetensors")
        atomic_write_text(d / "info.json", json.dumps({**info, "config": asdict(cfg)}))
    return {**info, "cached": False}


def export_shipped(policy: LLMPolicy, cfg: WarmStartConfig, out_dir: Path, info: dict, command: str,
                   prompt_format: str) -> Path:
    """Write the policy's current adapter as a shipped warm start: adapter.safetensors (float16) + config.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.to(torch.float16).contiguous() for k, v in policy.adapter_state().items()}
    tmp = out_dir / "adapter.safetensors.tmp"
    save_file(state, str(tmp))
    tmp.replace(out_dir / "adapter.safetensors")
    p = policy.cfg
    meta = {"key": policy_shipped_key(cfg, policy), "model": model_identity(p.model), "prompt_format": prompt_format,
            "lora_rank": p.lora_rank, "lora_alpha": p.lora_alpha, "target_modules": p.target_modules,
            "warm": asdict(cfg), "dtype": "float16", "command": command,
            **{k: info.get(k) for k in ("loss_first", "loss_last", "seconds", "examples")}}
    atomic_write_text(out_dir / "config.json", json.dumps(meta, indent=1) + "\n")
    return out_dir


def shipped_dir(cfg: TrainConfig, root: Path = PRETRAINED_DIR) -> Path | None:
    """The shipped adapter a train config's warm start would load (None: none matches). Loads no weights."""
    prefix = ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task))
    p = cfg.policy
    return find_shipped(shipped_key(cfg.warm, p.model, p.lora_rank, p.lora_alpha, p.target_modules, prefix), root)


def build_shipped(cfg: TrainConfig, out_dir: Path, command: str, log=print) -> Path:
    """`ttlab discover warmstart`: the warm start of `cfg` (from the local cache, or trained now, never from a
    shipped copy), written as a shipped adapter to `out_dir`."""
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)  # as the trainer does before it builds the policy: the same LoRA init
    prefix = ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task))
    policy = LLMPolicy(cfg.policy, torch.device("cpu"), seed=cfg.seed, answer_prefix=prefix)
    info = warm_start(policy, cfg.warm, log=log, prompt_format=cfg.prompt_format, shipped_root=None)
    return export_shipped(policy, cfg.warm, out_dir, info, command, cfg.prompt_format)
