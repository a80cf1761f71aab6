"""The LLM policy: a Hugging Face causal LM from a local path with a LoRA adapter (PEFT).

Two entry points, as for any ttlab policy:

* `generate(prompts)` samples one completion per prompt and records, per sampled token, the log-prob
  under the distribution it was actually drawn from (after temperature / top-p). Generation runs through
  vLLM when it is installed and selected (the adapter is swapped in after every update, see
  `vllm_backend.py`), through llama.cpp on CPU with `--backend llama` (the adapter converted to a GGUF LoRA
  after every update, see `llama_backend.py`), otherwise through HF `generate`, one call per chunk of prompts
  (`_sample`). Whatever the sampler, the loss's log-probs come from this HF model (`logprobs`,
  `group_logprobs`) and the importance ratio corrects for a sampler whose probabilities differ.
* `logprobs(batch, adapter=...)` / `group_logprobs(prompt, completions, ...)` recompute the log-probs of those
  same sampled tokens under the current adapter (with grad, for the loss) or with the adapter disabled (the
  base model, for the KL penalty).

HF `generate` and the sampler log-probs: temperature and top-p are our own logits processors (`Temperature`,
`TopP`; HF's warpers are switched off, else HF would append them after ours), and `SamplerLogp`, placed LAST,
keeps the final processed distribution of each step and, at the next step, reads the log-prob of the token
that was drawn from it. That is what `compute_transition_scores(..., normalize_logits=True)` returns from
`output_scores` (a test holds them equal), in one (B, V) row-set instead of one per generated token: 0.45 GB
for 8 x 288 tokens of SmolLM2's 49k vocabulary, hundreds of GB for a 1.5B preset's 64 x 4096.

Shared prompts (`prefix_cache`): rollouts of one prompt are sampled in one `generate` call that starts from
the prompt's KV cache, computed once at batch 1 and repeated to the rows (`_prefill`); the learn phase reuses
the same prefill with grad (`group_logprobs`), so the gradient through the prompt is exact.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from pathlib import Path

import torch
import torch.nn.functional as F
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from torch.nn.utils.rnn import pad_sequence
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessorList

from ttlab.common.device import cpu_bf16_ok
from ttlab.discover.config import PolicyConfig
from ttlab.discover.llm import llama_backend, vllm_backend
from ttlab.discover.llm.generation import Generation
from ttlab.discover.llm.models import gguf_float16, gguf_source, resolve_model


class Temperature:
    """Logits processor: scores / t."""

    def __init__(self, t: float):
        self.t = t

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores / self.t


class TopP:
    """Logits processor: keep the smallest set of tokens whose probability reaches p (at least one)."""

    def __init__(self, p: float):
        self.p = p

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        sorted_s, idx = scores.sort(dim=-1, descending=True)  # (B, V)
        cum = sorted_s.softmax(-1).cumsum(-1)  # (B, V)
        drop = (cum - sorted_s.softmax(-1)) > self.p  # keep tokens until the mass reaches p (>= 1 kept)
        drop = drop.scatter(-1, idx, drop)
        return scores.masked_fill(drop, float("-inf"))


class SamplerLogp:
    """Last logits processor: records log p_sampler(token_t) for every generated token."""

    def __init__(self):
        self.prev: torch.Tensor | None = None  # (B, V) log-probs of the last step's distribution
        self.out: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.prev is not None:
            self.out.append(self.prev.gather(-1, input_ids[:, -1:]))  # (B, 1)
        self.prev = scores.float().log_softmax(-1)  # (B, V)
        return scores

    def finish(self, last_tokens: torch.Tensor) -> torch.Tensor:
        """(B, C) sampler log-probs once generate returned with `last_tokens` (B,) drawn last."""
        assert self.prev is not None
        self.out.append(self.prev.gather(-1, last_tokens[:, None]))
        return torch.cat(self.out, dim=1)


def runs(items: list) -> list[tuple[int, int]]:
    """(start, length) of every run of equal consecutive items."""
    out: list[tuple[int, int]] = []
    for i, x in enumerate(items):
        if out and items[out[-1][0]] == x:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((i, 1))
    return out


def pick_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CUDA (when supported), float32 on CPU."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


class LLMPolicy:
    """HF causal LM + PEFT LoRA; generation via HF or vLLM."""

    def __init__(self, cfg: PolicyConfig, device: torch.device, seed: int = 0, answer_prefix: str = ""):
        """`answer_prefix`: text the answer starts with (appended after the chat template's generation
        prompt); the model continues it, and a completion's text does not repeat it."""
        self.path = resolve_model(cfg.model)  # built-in name / .gguf / HF directory -> HF directory
        self.cfg, self.device, self.answer_prefix = cfg, device, answer_prefix
        self.dtype = pick_dtype(device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        base = AutoModelForCausalLM.from_pretrained(str(self.path), dtype=self.dtype)
        base.to(device)
        eos = base.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos if eos is not None else self.tokenizer.eos_token_id]
        self.eos_ids = torch.tensor(sorted({int(e) for e in eos if e is not None}), dtype=torch.long)
        if cfg.grad_checkpointing:
            base.gradient_checkpointing_enable()
            base.enable_input_require_grads()
        targets = cfg.target_modules if cfg.target_modules == "all-linear" else [
            t.strip() for t in cfg.target_modules.split(",") if t.strip()]
        lcfg = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                          target_modules=targets, task_type="CAUSAL_LM")
        self.model = get_peft_model(base, lcfg)
        self._cache_kw = cache_keyword(type(base))
        self.vllm = None
        self.llama = None
        if cfg.backend not in ("auto", "hf", "vllm", "llama"):
            raise ValueError(f"--backend {cfg.backend!r}: expected auto, hf, vllm or llama")
        if cfg.backend == "llama":
            if cfg.llama_weights not in ("gguf", "f16"):
                raise ValueError(f"--llama-weights {cfg.llama_weights!r}: expected gguf or f16")
            gguf = gguf_source(cfg.model)
            if gguf is None:
                raise ValueError(f"--backend llama: --model {cfg.model} is not a GGUF model (a built-in name or a "
                                 ".gguf file); llama.cpp samples from the GGUF file the learner was dequantised from")
            if not llama_backend.available():
                raise RuntimeError("--backend llama: llama-cpp-python and gguf are not installed "
                                   "(pip install 'ttlab[discover]')")
            if cfg.llama_weights == "f16":
                gguf = gguf_float16(gguf)
            self.llama = llama_backend.LlamaCppGenerator(
                cfg, gguf, base.config, self.eos_ids.tolist(), seed=seed, threads=torch.get_num_threads(),
                n_seq=max(1, cfg.gen_batch_size))
        if cfg.backend == "vllm" or (cfg.backend == "auto" and device.type == "cuda"):
            if vllm_backend.available():
                self.vllm = vllm_backend.VLLMGenerator(cfg, self.path, seed=seed)
            elif cfg.backend == "vllm":
                raise RuntimeError("--backend vllm: vLLM is not installed (pip install 'ttlab[gpu]')")
        self.version = 0  # bumped after every update: the vLLM adapter is re-synced lazily

    # ---- prompts -------------------------------------------------------------------------------
    def format_prompt(self, text: str) -> str:
        """The chat template (user turn + generation prompt) when the tokenizer has one, else `text`."""
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                      add_generation_prompt=True)
        return text

    def encode(self, text: str) -> torch.Tensor:
        ids = self.tokenizer(self.format_prompt(text) + self.answer_prefix, add_special_tokens=False)["input_ids"]
        return torch.tensor(ids, dtype=torch.long)  # (P,)

    # ---- generation ----------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompts: list[str], on_done=None) -> list[Generation]:
        """One sampled completion per prompt (same order), in chunks of `gen_batch_size`; with `prefix_cache`
        a chunk holds rollouts of one prompt (a run of equal consecutive prompts) and shares its prefill.
        `on_done(index, generation)`: called as each completion ends where the backend streams (llama.cpp);
        the caller handles the returned list for the others."""
        encoded = [self.encode(p) for p in prompts]
        if self.vllm is not None:
            return self.vllm.generate(encoded, self.tokenizer, self.model, self.version)
        if self.llama is not None:
            return self.llama.generate(encoded, self.tokenizer, self.adapter_state, self.version, on_done)
        bs = max(1, self.cfg.gen_batch_size)
        spans = runs(prompts) if self.cfg.prefix_cache else [(0, len(prompts))]
        out: list[Generation] = []
        for start, n in spans:
            for i in range(start, start + n, bs):
                out.extend(self._sample(encoded[i:min(i + bs, start + n)], shared=self.cfg.prefix_cache))
        return out

    def _prefill(self, prompt: torch.Tensor, n: int, adapter: bool = True):
        """KV cache of prompt[:-1] (one forward at batch 1) repeated to `n` rows; grad flows when enabled."""
        ids = prompt[None, :-1].to(self.device)  # (1, P-1)
        # logits of one position only: only the KV cache is wanted (the full (P-1, V) logits cost ~20% of a prefill)
        if adapter:
            cache = getattr(self.model(input_ids=ids, use_cache=True, logits_to_keep=1), self._cache_kw)
        else:
            with self.model.disable_adapter():
                cache = getattr(self.model(input_ids=ids, use_cache=True, logits_to_keep=1), self._cache_kw)
        for layer in cache.layers:
            layer.batch_repeat_interleave(n)  # (n, H, P-1, D) per layer
        return cache

    def _processors(self) -> tuple[LogitsProcessorList, SamplerLogp]:
        rec = SamplerLogp()
        procs = []
        if self.cfg.temperature != 1.0:
            procs.append(Temperature(self.cfg.temperature))
        if self.cfg.top_p < 1.0:
            procs.append(TopP(self.cfg.top_p))
        return LogitsProcessorList([*procs, rec]), rec

    def _sample(self, encoded: list[torch.Tensor], shared: bool) -> list[Generation]:
        """One HF `generate` call over left-padded prompts. `shared` (every prompt the same): generation starts
        from the prompt's KV cache, computed once at batch 1 (`_prefill`); HF then runs only the last prompt
        token and the completion at batch B."""
        pad = self.tokenizer.pad_token_id
        ids = pad_sequence(encoded, batch_first=True, padding_value=pad, padding_side="left")  # (B, P)
        mask = pad_sequence([torch.ones_like(e) for e in encoded], batch_first=True, padding_value=0,
                            padding_side="left")  # (B, P)
        self.model.eval()
        cache = self._prefill(encoded[0], len(encoded)) if shared and encoded[0].numel() > 1 else None
        procs, rec = self._processors()
        seq = self.model.generate(
            input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **{self._cache_kw: cache},
            do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=self.cfg.max_new_tokens,
            pad_token_id=pad, eos_token_id=self.eos_ids.tolist(), logits_processor=procs,
        )  # (B, P + C)
        comp = seq[:, ids.shape[1]:]  # (B, C)
        slogp = rec.finish(comp[:, -1])  # (B, C)
        is_eos = torch.isin(comp, self.eos_ids.to(comp.device))  # (B, C)
        has_eos = is_eos.any(-1)  # (B,)
        first = is_eos.int().argmax(-1)  # (B,)
        length = torch.where(has_eos, first + 1, torch.full_like(first, comp.shape[1]))  # (B,)
        comp, slogp, length, has_eos = comp.cpu(), slogp.cpu(), length.cpu().tolist(), has_eos.cpu().tolist()
        gens = []
        for b, enc in enumerate(encoded):
            c = comp[b, :length[b]].clone()
            gens.append(Generation(enc, c, slogp[b, :length[b]].clone(),
                                   self.tokenizer.decode(c, skip_special_tokens=True), bool(has_eos[b])))
        return gens

    # ---- training-side log-probs ---------------------------------------------------------------
    def logprobs(self, batch: dict[str, torch.Tensor], adapter: bool = True) -> torch.Tensor:
        """Log-probs (B, C) of `batch['targets']` (a `collate` output) under the adapter or the base model."""
        ids = batch["input_ids"][:, :-1]  # (B, P+C-1): the last token predicts nothing we need
        C = batch["targets"].shape[1]
        kw = dict(input_ids=ids, attention_mask=batch["attention_mask"][:, :-1],
                  position_ids=batch["position_ids"][:, :-1], logits_to_keep=C, use_cache=False)
        if adapter:
            logits = self.model(**kw).logits  # (B, C, V)
        else:
            with torch.no_grad(), self.model.disable_adapter():
                logits = self.model(**kw).logits  # (B, C, V)
        return token_logprobs(logits, batch["targets"], self.cfg.temperature)

    def _learn_autocast(self, bf16: bool, adapter: bool):
        """bfloat16 autocast of the adapter's learn-phase forward on CPU (`learn_bf16`), else a no-op context."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16,
                              enabled=bool(bf16 and adapter and self.device.type == "cpu"
                                           and cpu_bf16_ok("the LLM learner's bf16 autocast")))

    def shared_prefix(self, prompt: torch.Tensor) -> SharedPrefix:
        """The prompt's KV cache under the adapter, with grad, for every micro-batch of its rollouts."""
        with torch.enable_grad(), self._learn_autocast(self.cfg.learn_bf16, True):
            return SharedPrefix(self._prefill(prompt, 1))

    def group_logprobs(self, prompt: torch.Tensor, completions: list[torch.Tensor], adapter: bool = True,
                       grad: bool = True, temperature: float | None = None, bf16: bool | None = None,
                       prefix: SharedPrefix | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs (n, C) and mask (n, C) of `completions` (all continuing `prompt`) with ONE prompt
        forward: its KV cache is repeated to the n rows, so the gradient through the prompt is exact and
        the prompt is paid once. Completions are right-padded (a causal row never sees its padding).
        `temperature` (default: the sampler's) divides the logits; `bf16` (default: `learn_bf16` when `grad`)
        runs the adapter's forward (and backward) under bfloat16 autocast on CPU. `prefix` (adapter, grad): the
        prompt's cache from `shared_prefix`, shared with the prompt's other micro-batches (call its `backward()`
        after theirs), instead of a prompt forward per call."""
        n = len(completions)
        P = prompt.numel()
        comps = pad_sequence(completions, batch_first=True, padding_value=0).to(self.device)  # (n, C)
        mask = pad_sequence([torch.ones_like(c, dtype=torch.float32) for c in completions],
                            batch_first=True).to(self.device)  # (n, C)
        C = comps.shape[1]
        inp = torch.cat([prompt[-1:].to(self.device).expand(n)[:, None], comps[:, :-1]], dim=1)  # (n, C)
        pos = (P - 1 + torch.arange(C, device=self.device)).expand(n, C)  # (n, C)
        ctx = torch.enable_grad() if adapter and grad else torch.no_grad()
        bf16 = (self.cfg.learn_bf16 and grad) if bf16 is None else bf16
        with ctx, self._learn_autocast(bf16, adapter):
            cache = prefix.rows(n) if prefix is not None and adapter and grad else self._prefill(prompt, n, adapter)
            if adapter:
                logits = self.model(input_ids=inp, position_ids=pos, use_cache=True, **{self._cache_kw: cache}).logits
            else:
                with self.model.disable_adapter():
                    logits = self.model(input_ids=inp, position_ids=pos, use_cache=True,
                                        **{self._cache_kw: cache}).logits  # (n, C, V)
            lp = token_logprobs(logits, comps, self.cfg.temperature if temperature is None else temperature)  # (n, C)
        return lp * mask, mask

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    # ---- adapter state -------------------------------------------------------------------------
    def adapter_state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in get_peft_model_state_dict(self.model).items()}

    def load_adapter_state(self, state: dict[str, torch.Tensor]) -> None:
        res = set_peft_model_state_dict(self.model, {k: v.to(self.device) for k, v in state.items()})
        unexpected = getattr(res, "unexpected_keys", [])
        if unexpected:
            raise ValueError(f"adapter checkpoint has keys this model lacks: {unexpected[:5]}")
        self.version += 1

    def save_adapter(self, directory: str | Path) -> Path:
        """PEFT layout (`adapter_config.json` + `adapter_model.safetensors`), loadable by PEFT and vLLM."""
        directory = Path(directory)
        self.model.save_pretrained(str(directory))
        return directory

    def set_reference(self) -> None:
        """Keep a copy of the adapter as it is now: the reference policy of `reference()`."""
        self._reference = {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}

    @contextlib.contextmanager
    def reference(self):
        """Inside: the adapter holds the weights saved by `set_reference()`; the current ones come back on exit.
        No version bump (the samplers never see the swap)."""
        ref = getattr(self, "_reference", None)
        if ref is None:
            raise RuntimeError("LLMPolicy.reference(): set_reference() was never called")
        params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
        saved = {n: p.detach().clone() for n, p in params.items()}
        try:
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(ref[n])
            yield self
        finally:
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(saved[n])

    def mark_updated(self) -> None:
        """Call after an optimizer step (vLLM picks up the new adapter on its next generate)."""
        self.version += 1


def cache_keyword(model_cls: type) -> str:
    """The name of the KV-cache argument and output of a HF causal LM: `cache` in recent transformers 5.x (where
    `past_key_values` is deprecated, with a warning on every call), `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(model_cls.forward).parameters else "past_key_values"


class SharedPrefix:
    """One prompt's KV cache, computed once with grad and read by all of its learn-phase micro-batches.

    Each micro-batch reads leaf copies of the prompt's keys and values, repeated to its rows (`rows`); their
    gradients add up over the micro-batches, and `backward()` sends the sum through the prompt's forward once.
    The gradient is exactly that of a prompt forward per micro-batch (or of one batch holding every rollout),
    for one prompt forward and backward however the rollouts are split, so micro-batches can be small (less
    padding) without paying the prompt again."""

    def __init__(self, cache):
        self.cache = cache  # (1, H, P-1, D) keys and values per layer, attached to the prompt's forward
        self.kv = [(layer.keys, layer.values) for layer in cache.layers]
        self.leaves = [(k.detach().requires_grad_(k.requires_grad), v.detach().requires_grad_(v.requires_grad))
                       for k, v in self.kv]

    def rows(self, n: int):
        """A fresh cache of the leaves repeated to n rows: (n, H, P-1, D) per layer (a forward appends to it)."""
        c = copy.copy(self.cache)
        c.layers = []
        for layer, (k, v) in zip(self.cache.layers, self.leaves, strict=True):
            lay = copy.copy(layer)
            lay.keys, lay.values = k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)
            c.layers.append(lay)
        return c

    def backward(self) -> None:
        """The micro-batches' summed gradient w.r.t. the prompt's keys and values, through the prompt's forward."""
        outs, grads = [], []
        for pair, leaves in zip(self.kv, self.leaves, strict=True):
            for out, leaf in zip(pair, leaves, strict=True):
                if leaf.grad is not None and out.requires_grad:
                    outs.append(out)
                    grads.append(leaf.grad)
        if outs:
            torch.autograd.backward(outs, grads)
        self.kv, self.leaves = [], []  # the prompt's graph is freed


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T)[targets]: (B, C, V), (B, C) -> (B, C), computed in float32."""
    lp = -F.cross_entropy((logits.float() / temperature).flatten(0, 1), targets.flatten(), reduction="none")
    return lp.view(targets.shape)  # (B, C)
