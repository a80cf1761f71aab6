"""Does an update move the policy towards the rewarded programs? (`--probe-update`, logged per step.)

After the optimizer step, the step's completions are scored again under the new adapter (no grad) and the
mean per-token log-prob change is split by the sign of each sample's advantage: an update that learns from
the rewards raises `learn/dlogp_pos` and lowers `learn/dlogp_neg`.
"""

from __future__ import annotations

from typing import Any

import torch

from ttlab.discover.llm.generation import Generation, collate
from ttlab.discover.llm.policy import LLMPolicy


@torch.no_grad()
def update_probe(policy: LLMPolicy, gens: list[Generation], A: torch.Tensor,
                 before: list[tuple[list[int], torch.Tensor, torch.Tensor]], shared: bool) -> dict[str, Any]:
    """Mean per-token log-prob change (new adapter - the one that just computed the loss) of the step's
    completions, per sign of their advantage. `before`: (sample indices, their log-probs (b, C), mask (b, C))
    per micro-batch, as the learn phase computed them; `shared`: micro-batches hold one prompt's samples."""
    sums = {"pos": [0.0, 0.0], "neg": [0.0, 0.0]}  # [sum of changes, tokens]
    policy.model.eval()
    for mb, old, mask in before:
        if shared:
            # in the learn phase's precision (bf16 autocast when `learn_bf16`), else its rounding would show as a change
            new, _ = policy.group_logprobs(gens[mb[0]].prompt_ids, [gens[i].completion_ids for i in mb],
                                            grad=False, bf16=policy.cfg.learn_bf16)  # (b, C)
        else:
            new = policy.logprobs(collate([gens[i] for i in mb], policy.tokenizer.pad_token_id, policy.device))
        d = ((new - old) * mask).sum(-1)  # (b,)
        for k, i in enumerate(mb):
            key = "pos" if float(A[i]) > 0 else "neg"
            sums[key][0] += float(d[k])
            sums[key][1] += float(mask[k].sum())
    return {f"learn/dlogp_{k}": (v[0] / v[1] if v[1] else float("nan")) for k, v in sums.items()}
