"""A sampled completion (`Generation`) and the padded layout in which several are scored (`collate`).

Every generation backend (HF `generate` in `policy.py`, vLLM in `vllm_backend.py`) returns `Generation`s; the
learn phase scores them again under the current adapter from the `collate` layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn.utils.rnn import pad_sequence


@dataclass
class Generation:
    """One sampled completion; tensors live on the CPU."""

    prompt_ids: torch.Tensor  # (P,) long
    completion_ids: torch.Tensor  # (C,) long, includes the EOS when one was sampled
    sampler_logp: torch.Tensor  # (C,) float32, log-prob under the sampling distribution
    text: str
    finished: bool  # ended with EOS (False: cut at max_new_tokens)


def collate(gens: list[Generation], pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    """Left-pad prompts, right-pad completions: the layout `generate` produced, one row per sample."""
    prompts = pad_sequence([g.prompt_ids for g in gens], batch_first=True, padding_value=pad_id,
                           padding_side="left")  # (B, P)
    pmask = pad_sequence([torch.ones_like(g.prompt_ids) for g in gens], batch_first=True, padding_value=0,
                         padding_side="left")  # (B, P)
    comps = pad_sequence([g.completion_ids for g in gens], batch_first=True, padding_value=pad_id)  # (B, C)
    cmask = pad_sequence([torch.ones_like(g.completion_ids) for g in gens], batch_first=True,
                         padding_value=0)  # (B, C)
    slogp = pad_sequence([g.sampler_logp for g in gens], batch_first=True, padding_value=0.0)  # (B, C)
    ids = torch.cat([prompts, comps], dim=1)  # (B, P+C)
    mask = torch.cat([pmask, cmask], dim=1)  # (B, P+C)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, P+C), as HF generate numbers left-padded rows
    return {
        "input_ids": ids.to(device), "attention_mask": mask.to(device), "position_ids": pos.to(device),
        "targets": comps.to(device), "mask": cmask.to(device, torch.float32),
        "sampler_logp": slogp.to(device, torch.float32),
    }
