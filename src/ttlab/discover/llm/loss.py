"""The TTT-Discover loss: importance-sampled policy gradient on the sampled tokens, KL folded into A.

For sampled token t of sample i, with current log-prob l_t (grad), sampler log-prob s_t and base-model
(adapter off) log-prob b_t:

    A_it   = A_i - kl_coef * (l_t - b_t)           (KL penalty folded into the advantage, no grad)
    ratio  = exp(l_t - s_t)                         (importance weight; 1 on-policy)
    loss   = -sum_it mask * ratio * A_it / normalizer

d loss / d theta = -sum ratio * A_it * d l_t: the REINFORCE gradient reweighted for the sampler/learner
mismatch (vLLM numerics, top-p truncation, or a step taken mid-batch). `normalizer` is the token count
of the whole step, so gradient accumulation over micro-batches sums to the full-batch loss exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LossStats:
    """Sums over one micro-batch (divide by `tokens` for means); 0-d tensors, no host sync."""

    tokens: torch.Tensor
    kl: torch.Tensor  # sum of (l - b): k1 estimator of KL(pi || base)
    ratio: torch.Tensor  # sum of exp(l - s)
    ratio_max: torch.Tensor
    clipped: torch.Tensor  # tokens whose ratio hit `ratio_cap`


def is_pg_loss(
    logp: torch.Tensor,  # (B, C) current log-probs, with grad
    sampler_logp: torch.Tensor,  # (B, C)
    base_logp: torch.Tensor | None,  # (B, C) adapter-off log-probs, or None when kl_coef == 0
    advantages: torch.Tensor,  # (B,)
    mask: torch.Tensor,  # (B, C) 1 on real completion tokens
    normalizer: float,
    kl_coef: float = 0.1,
    ratio_cap: float | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """Importance-sampled PG loss with the KL penalty folded into the per-token advantage."""
    mask = mask.to(logp.dtype)
    lp_det = logp.detach()
    kl_tok = (lp_det - base_logp) if base_logp is not None else torch.zeros_like(lp_det)  # (B, C)
    adv_tok = advantages[:, None].to(logp.dtype) - kl_coef * kl_tok  # (B, C)
    log_ratio = logp - sampler_logp  # (B, C)
    ratio = log_ratio.exp()  # (B, C)
    clipped = torch.zeros_like(mask)
    if ratio_cap is not None:
        # Truncated importance sampling: the weight is capped, the gradient direction kept.
        cap = torch.full_like(ratio, ratio_cap)
        clipped = (ratio.detach() > ratio_cap).to(mask.dtype)
        ratio = torch.where(ratio.detach() > ratio_cap, cap * (logp - logp.detach()).exp(), ratio)
    loss = -(ratio * adv_tok * mask).sum() / normalizer
    rd = ratio.detach()
    stats = LossStats(
        tokens=mask.sum(), kl=(kl_tok * mask).sum(), ratio=(rd * mask).sum(),
        ratio_max=(rd * mask).max() if mask.numel() else rd.new_zeros(()), clipped=(clipped * mask).sum(),
    )
    return loss, stats
