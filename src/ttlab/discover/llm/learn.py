"""The learn phase of one TTT step: the loss over micro-batches of the step's samples, then one optimizer step.

With `prefix_cache` (HF backend) a micro-batch holds rollouts of ONE prompt, and the prompt's forward and
backward run once for all of its micro-batches (`LLMPolicy.shared_prefix`, exact); otherwise micro-batches are padded rows of any prompts (`collate`). The loss is
`loss.is_pg_loss`, normalised by the token count of the whole step, so the accumulated gradient equals the
full-batch one. With `probe_update` the step ends with `probe.update_probe` (one extra forward, no grad).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ttlab.discover.config import TrainConfig
from ttlab.discover.llm.generation import Generation, collate
from ttlab.discover.llm.loss import is_pg_loss
from ttlab.discover.llm.policy import LLMPolicy
from ttlab.discover.llm.probe import update_probe


def micro_batches(gens: list[Generation], idx: list[int], size: int, by_prompt: bool) -> list[list[int]]:
    """Samples `idx` in micro-batches of at most `size`; `by_prompt`: each micro-batch holds one prompt's samples."""
    size = max(1, size)
    if not by_prompt:
        return [idx[j:j + size] for j in range(0, len(idx), size)]
    groups: dict[tuple, list[int]] = {}
    for i in idx:
        groups.setdefault(tuple(gens[i].prompt_ids.tolist()), []).append(i)
    return [g[j:j + size] for g in groups.values() for j in range(0, len(g), size)]


def reference_logprobs(policy: LLMPolicy, cfg: TrainConfig, logprobs) -> torch.Tensor | None:
    """The KL reference's log-probs (b, C), no grad: `logprobs(adapter)` under the base model (`kl_ref` base) or
    under the adapter saved when TTT began (`kl_ref` init); None without a KL penalty."""
    if cfg.kl_coef <= 0:
        return None
    if cfg.kl_ref == "init":
        with policy.reference(), torch.no_grad():
            return logprobs(True).detach()
    return logprobs(False)


def learn(policy: LLMPolicy, opt: torch.optim.Optimizer, gens: list[Generation], adv: np.ndarray,
          keep: np.ndarray, cfg: TrainConfig) -> dict[str, Any]:
    """Accumulate the loss over micro-batches of the kept samples and take one optimizer step."""
    idx = [i for i in range(len(gens)) if keep[i] and gens[i].completion_ids.numel() > 0]
    if not idx:
        return {"learn/samples": 0}
    idx.sort(key=lambda i: (gens[i].prompt_ids.numel() + gens[i].completion_ids.numel(), i))  # less padding
    normalizer = float(sum(gens[i].completion_ids.numel() for i in idx))
    shared = cfg.policy.prefix_cache and policy.vllm is None
    mbs = micro_batches(gens, idx, cfg.micro_batch, shared)
    A = torch.as_tensor(adv, dtype=torch.float32)  # (N,)
    params = policy.trainable_parameters()
    opt.zero_grad(set_to_none=True)
    policy.model.train()
    zero = torch.zeros((), device=policy.device)
    tot = {"loss": zero.clone(), "tokens": zero.clone(), "kl": zero.clone(), "ratio": zero.clone(),
           "ratio_max": zero.clone(), "clipped": zero.clone()}
    before: list[tuple[list[int], torch.Tensor, torch.Tensor]] = []  # (samples, log-probs (b, C), mask (b, C))
    # the KL reference's log-probs first, with no grad: the init reference swaps the adapter's weights in place,
    # which a prompt cache held across micro-batches (below) must not see
    bases = [reference_logprobs(policy, cfg, lambda adapter, mb=mb: policy.group_logprobs(
        gens[mb[0]].prompt_ids, [gens[i].completion_ids for i in mb], adapter=adapter, grad=False,
        bf16=policy.cfg.learn_bf16)[0]) for mb in mbs] if shared else [None] * len(mbs)  # (b, C) or None each
    prefix, prefix_of = None, None  # the current prompt's shared cache (micro-batches come grouped by prompt)
    for mb, base in zip(mbs, bases, strict=True):
        if shared:
            prompt, comps = gens[mb[0]].prompt_ids, [gens[i].completion_ids for i in mb]
            if prefix_of is None or not torch.equal(prefix_of, prompt):
                if prefix is not None:
                    prefix.backward()
                prefix, prefix_of = policy.shared_prefix(prompt), prompt
            lp, mask = policy.group_logprobs(prompt, comps, adapter=True, prefix=prefix)  # (b, C)
            slogp = torch.nn.utils.rnn.pad_sequence([gens[i].sampler_logp for i in mb], batch_first=True)
            slogp = slogp.to(policy.device)  # (b, C)
        else:
            batch = collate([gens[i] for i in mb], policy.tokenizer.pad_token_id, policy.device)
            base = reference_logprobs(policy, cfg, lambda adapter, batch=batch: policy.logprobs(batch, adapter=adapter))
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
    if prefix is not None:
        prefix.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else float("inf"))
    opt.step()
    opt.zero_grad(set_to_none=True)
    policy.mark_updated()
    probe = update_probe(policy, gens, A, before, shared) if cfg.probe_update else {}
    n = tot["tokens"].clamp(min=1)
    return probe | {"learn/samples": len(idx), "learn/tokens": tot["tokens"], "learn/loss": tot["loss"],
                    "learn/kl": tot["kl"] / n, "learn/ratio_mean": tot["ratio"] / n,
                    "learn/ratio_max": tot["ratio_max"], "learn/clip_frac": tot["clipped"] / n,
                    "learn/grad_norm": gnorm}
