"""LLM policy on CPU with a tiny random Qwen2 and a byte-level tokenizer (no downloads)."""

from __future__ import annotations

import math

import pytest
import torch

from ttlab.discover.config import PolicyConfig
from ttlab.discover.llm.generation import collate
from ttlab.discover.llm.policy import LLMPolicy, TopP
from ttlab.discover.llm.tiny import byte_tokenizer, make_tiny_model


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_byte_tokenizer_roundtrips_any_text():
    tok = byte_tokenizer()
    s = "def solve(p, b, s):\n\treturn p  # é ∑ 🙂"
    ids = tok(s, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(s.encode())
    assert tok.decode(ids) == s


def test_chat_template_used_when_present_and_raw_prompt_otherwise(tmp_path, tiny_dir):
    pol = LLMPolicy(PolicyConfig(model=str(tiny_dir), max_new_tokens=4), torch.device("cpu"))
    assert pol.format_prompt("hi") == "<|user|>hi\n<|assistant|>"
    raw_dir = make_tiny_model(tmp_path / "raw", chat_template=False)
    pol2 = LLMPolicy(PolicyConfig(model=str(raw_dir), max_new_tokens=4), torch.device("cpu"))
    assert pol2.format_prompt("hi") == "hi"


@pytest.mark.parametrize("temperature,prefix_cache", [(1.0, True), (0.7, True), (0.7, False)])
def test_sampler_logprobs_equal_recomputed_logprobs_on_policy(tiny_dir, temperature, prefix_cache):
    torch.manual_seed(0)
    pol = LLMPolicy(PolicyConfig(model=str(tiny_dir), max_new_tokens=20, temperature=temperature,
                                 gen_batch_size=8, prefix_cache=prefix_cache), torch.device("cpu"))
    gens = pol.generate(["a", "a much longer prompt with padding", "mid length"] * 2)
    assert len(gens) == 6 and all(0 < g.completion_ids.numel() <= 20 for g in gens)
    assert all(g.sampler_logp.shape == g.completion_ids.shape for g in gens)
    batch = collate(gens, pol.tokenizer.pad_token_id, pol.device)
    with torch.no_grad():
        lp = pol.logprobs(batch, adapter=True)
    base = pol.logprobs(batch, adapter=False)
    m = batch["mask"]
    ratio = ((lp - batch["sampler_logp"]) * m).exp()
    assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-4)  # importance ratio 1 on-policy
    assert torch.equal(lp * m, base * m)  # LoRA B = 0 at init: KL to the base model is exactly 0


@pytest.mark.parametrize("prefix_cache", [True, False])
def test_recorded_sampler_logprobs_are_hf_compute_transition_scores(tiny_dir, monkeypatch, prefix_cache):
    """The last logits processor records what `compute_transition_scores(normalize_logits=True)` computes from
    `output_scores` (the processed distribution each token was drawn from), without keeping every step's scores."""
    torch.manual_seed(1)
    pol = LLMPolicy(PolicyConfig(model=str(tiny_dir), max_new_tokens=12, temperature=0.8, top_p=0.9,
                                 prefix_cache=prefix_cache), torch.device("cpu"))
    real, outs = pol.model.generate, []

    def generate(**kw):
        out = real(**kw, output_scores=True, return_dict_in_generate=True)
        outs.append(out)
        return out.sequences

    monkeypatch.setattr(pol.model, "generate", generate)
    gens = pol.generate(["one prompt"] * 3 + ["another, longer prompt"] * 2)
    assert len(outs) == (2 if prefix_cache else 1)  # one generate call per run of equal prompts, or per chunk
    rows = [(o, b) for o in outs for b in range(o.sequences.shape[0])]
    for g, (o, b) in zip(gens, rows, strict=True):
        ref = pol.model.compute_transition_scores(o.sequences, o.scores, normalize_logits=True)[b]  # (C,)
        n = g.completion_ids.numel()
        assert torch.equal(o.sequences[b, -len(o.scores):][:n], g.completion_ids)
        assert torch.allclose(g.sampler_logp, ref[:n].float(), atol=1e-6)


def test_lora_rank_default_32_and_only_lora_trainable(tiny_dir):
    pol = LLMPolicy(PolicyConfig(model=str(tiny_dir)), torch.device("cpu"))
    names = [n for n, p in pol.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    a = next(p for n, p in pol.model.named_parameters() if "lora_A" in n)
    assert a.shape[0] == 32


def test_top_p_keeps_the_smallest_nucleus_reaching_p():
    scores = torch.log(torch.tensor([[0.2, 0.5, 0.3]]))
    out = TopP(0.6)(None, scores)
    assert torch.isinf(out[0, 0]) and out[0, 0] < 0
    assert torch.isfinite(out[0, 1:]).all()
    assert math.isclose(float(out.softmax(-1)[0, 1]), 0.5 / 0.8, rel_tol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bf16_training_step_on_cuda(tmp_path):
    from ttlab.discover.llm.loss import is_pg_loss

    d = make_tiny_model(tmp_path / "m")
    pol = LLMPolicy(PolicyConfig(model=str(d), max_new_tokens=16, backend="hf"), torch.device("cuda"))
    assert next(pol.model.base_model.parameters()).dtype == torch.bfloat16
    gens = pol.generate(["x", "yy"])
    batch = collate(gens, pol.tokenizer.pad_token_id, pol.device)
    opt = torch.optim.Adam(pol.trainable_parameters(), lr=1e-3, betas=(0.9, 0.95))
    lp = pol.logprobs(batch)
    loss, _ = is_pg_loss(lp, batch["sampler_logp"], pol.logprobs(batch, adapter=False),
                         torch.tensor([1.0, -1.0], device="cuda"), batch["mask"], float(batch["mask"].sum()))
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    assert any(p.abs().sum() > 0 for n, p in pol.model.named_parameters() if "lora_B" in n)
