"""vLLM generation with the training adapter swapped in after every update (used only when importable).

The HF/PEFT model stays the learner; vLLM holds the frozen base weights and serves the current LoRA
adapter: after each optimizer step the adapter is written in PEFT layout to a fresh directory and sent
as a new `LoRARequest` (a new int id per version, so vLLM never serves a stale cached adapter). Sampled
tokens come back with their log-probs (`logprobs=0`: the sampled token's own). vLLM >= 0.10.2 is asked
for *processed* log-probs (after temperature / top-p), the distribution the token was drawn from; older
versions report raw-model log-probs, which the importance ratio then treats as the sampler.

NOT exercised by the CPU test suite (vLLM is not installed there); the GPU path is written against the
vLLM `LLM.generate(prompts, SamplingParams, lora_request=...)` API.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import torch

from ttlab.discover.config import PolicyConfig
from ttlab.discover.llm.generation import Generation


def available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def _lora_rank_slot(r: int) -> int:
    """vLLM's max_lora_rank must be one of its supported sizes (powers of two from 8)."""
    slot = 8
    while slot < r:
        slot *= 2
    return slot


class VLLMGenerator:
    def __init__(self, cfg: PolicyConfig, model_path: str | Path, seed: int = 0):
        from vllm import LLM  # deferred on purpose: vLLM is an optional GPU extra (`ttlab[gpu]`)

        kw = dict(model=str(model_path), enable_lora=True, max_lora_rank=_lora_rank_slot(cfg.lora_rank), max_loras=1,
                  dtype="bfloat16", gpu_memory_utilization=cfg.vllm_gpu_memory, seed=seed,
                  enable_prefix_caching=True)
        try:
            self.llm = LLM(**kw, logprobs_mode="processed_logprobs")
        except TypeError:  # vLLM < 0.10.2 has no logprobs_mode
            self.llm = LLM(**kw)
        self.cfg = cfg
        self.root = Path(tempfile.mkdtemp(prefix="ttlab-lora-"))
        self._version = -1
        self._request = None

    def _sync(self, peft_model, version: int):
        from vllm.lora.request import LoRARequest  # optional GPU extra, as above

        if version != self._version:
            path = self.root / f"v{version}"
            peft_model.save_pretrained(str(path))
            self._request = LoRARequest(f"ttt-v{version}", version + 1, str(path))
            self._version = version
        return self._request

    def generate(self, encoded: list[torch.Tensor], tokenizer, peft_model, version: int) -> list[Generation]:
        from vllm import SamplingParams  # optional GPU extra, as above

        req = self._sync(peft_model, version)
        sp = SamplingParams(n=1, temperature=self.cfg.temperature, top_p=self.cfg.top_p,
                            max_tokens=self.cfg.max_new_tokens, logprobs=0)
        prompts = [{"prompt_token_ids": e.tolist()} for e in encoded]
        outs = self.llm.generate(prompts, sp, lora_request=req, use_tqdm=False)
        gens = []
        for e, o in zip(encoded, outs, strict=True):
            c = o.outputs[0]
            ids = list(c.token_ids)
            lps = [d[t].logprob for d, t in zip(c.logprobs or [], ids, strict=True)]
            gens.append(Generation(e, torch.tensor(ids, dtype=torch.long), torch.tensor(lps, dtype=torch.float32),
                                   c.text, c.finish_reason == "stop"))
        return gens
