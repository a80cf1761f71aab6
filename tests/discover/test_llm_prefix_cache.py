"""Prompt caching: one prefill per prompt, expanded to its rollouts, in generation and in the learn phase."""

from __future__ import annotations

import pytest
import torch

from ttlab.discover.config import PolicyConfig
from ttlab.discover.llm.generation import collate
from ttlab.discover.llm.policy import LLMPolicy, runs
from ttlab.discover.llm.tiny import make_tiny_model


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    d = make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    torch.manual_seed(0)
    pol = LLMPolicy(PolicyConfig(model=str(d), max_new_tokens=16, gen_batch_size=8, lora_rank=4, temperature=0.9),
                    torch.device("cpu"))
    for n, p in pol.model.named_parameters():
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.05)  # a non-trivial adapter (B = 0 at init)
    return pol


def test_runs_of_equal_prompts():
    assert runs(["a", "a", "b", "a"]) == [(0, 2), (2, 1), (3, 1)]
    assert runs([]) == []


def test_cached_sampler_logprobs_match_the_padded_recompute(policy):
    gens = policy.generate(["abc"] * 5 + ["longer prompt"] * 3)
    assert len(gens) == 8 and all(0 < g.completion_ids.numel() <= 16 for g in gens)
    assert all(g.prompt_ids.numel() == gens[0].prompt_ids.numel() for g in gens[:5])
    batch = collate(gens, policy.tokenizer.pad_token_id, policy.device)
    with torch.no_grad():
        lp = policy.logprobs(batch)
    m = batch["mask"]
    assert torch.allclose(lp * m, batch["sampler_logp"] * m, atol=1e-4)  # importance ratio 1 on-policy


def test_rollouts_of_one_prompt_read_the_prompt_once(policy):
    """Generation with a shared prompt: one forward of the prompt at batch 1, then batch-n forwards of one
    token each (the prompt's last token, then every sampled token); never the prompt again."""
    shapes = []
    hook = policy.model.get_input_embeddings().register_forward_hook(
        lambda mod, inp, out: shapes.append(tuple(inp[0].shape)))
    try:
        gens = policy.generate(["a shared prompt"] * 5)
    finally:
        hook.remove()
    P = gens[0].prompt_ids.numel()
    assert shapes[0] == (1, P - 1)
    assert set(shapes[1:]) == {(5, 1)} and len(shapes) - 1 == max(g.completion_ids.numel() for g in gens)


def test_shared_prompt_samples_what_the_padded_batch_samples(policy):
    """Rollouts of one prompt: the same seed gives the same completions and sampler log-probs with and without
    the shared prefill (one `generate` call either way; only the prompt's forward differs: batch 1, repeated,
    vs every row)."""
    prompts = ["one prompt for all rollouts"] * 6
    out = {}
    for shared in (True, False):
        policy.cfg.prefix_cache = shared
        torch.manual_seed(7)
        out[shared] = policy.generate(prompts)
    policy.cfg.prefix_cache = True
    for a, b in zip(out[True], out[False], strict=True):
        assert torch.equal(a.completion_ids, b.completion_ids) and a.finished == b.finished
        assert torch.allclose(a.sampler_logp, b.sampler_logp, atol=1e-5)


def test_group_logprobs_and_gradient_equal_the_per_row_computation(policy):
    gens = policy.generate(["shared prompt"] * 4)
    comps = [g.completion_ids for g in gens]
    params = policy.trainable_parameters()
    lp, mask = policy.group_logprobs(gens[0].prompt_ids, comps)  # one prompt forward
    g1 = torch.autograd.grad(lp.sum(), params)
    batch = collate(gens, policy.tokenizer.pad_token_id, policy.device)
    ref = policy.logprobs(batch) * batch["mask"]  # every row re-reads the prompt
    g2 = torch.autograd.grad(ref.sum(), params)
    assert torch.allclose(lp, ref[:, : lp.shape[1]], atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5, rtol=1e-4) for a, b in zip(g1, g2, strict=True))
    base, _ = policy.group_logprobs(gens[0].prompt_ids, comps, adapter=False)
    assert not base.requires_grad and not torch.allclose(base, lp.detach())


def test_a_prefix_shared_by_micro_batches_gives_the_one_batch_gradient_for_one_prompt_forward(policy):
    """The learn phase's micro-batches of one prompt read one `shared_prefix`: the summed gradient equals the
    gradient of all rollouts in one batch, and the prompt is run forward once (at batch 1)."""
    gens = policy.generate(["one prompt, three micro-batches"] * 5)
    comps = [g.completion_ids for g in gens]
    prompt, params = gens[0].prompt_ids, policy.trainable_parameters()
    C = max(c.numel() for c in comps)
    w = torch.linspace(-1.0, 2.0, C)  # a weight per position, so the loss is not a plain sum
    lp, _ = policy.group_logprobs(prompt, comps)  # (5, C)
    g_one = torch.autograd.grad((lp * w).sum(), params)
    shapes = []
    hook = policy.model.get_input_embeddings().register_forward_hook(
        lambda mod, inp, out: shapes.append(tuple(inp[0].shape)))
    try:
        for p in params:
            p.grad = None
        prefix = policy.shared_prefix(prompt)
        for part in (comps[:2], comps[2:4], comps[4:]):
            lp_i, _ = policy.group_logprobs(prompt, part, prefix=prefix)  # (b, C_i)
            (lp_i * w[: lp_i.shape[1]]).sum().backward()
        prefix.backward()
    finally:
        hook.remove()
    assert [s for s in shapes if s[1] == prompt.numel() - 1] == [(1, prompt.numel() - 1)]
    for a, p in zip(g_one, params, strict=True):
        assert torch.allclose(a, p.grad, atol=1e-5, rtol=1e-4)
    assert any(a.abs().sum() > 0 for a in g_one)
    for p in params:
        p.grad = None


def test_the_kv_cache_is_passed_under_the_name_the_installed_transformers_takes(policy, recwarn):
    import logging

    from ttlab.discover.llm.policy import cache_keyword

    kw = cache_keyword(type(policy.model.get_base_model()))
    assert kw in ("cache", "past_key_values") and policy._cache_kw == kw
    logger = logging.getLogger("transformers")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        gens = policy.generate(["abc"] * 3)
        batch = collate(gens, policy.tokenizer.pad_token_id, policy.device)
        with torch.no_grad():
            policy.logprobs(batch)
    finally:
        logger.removeHandler(handler)
    said = [str(w.message) for w in recwarn] + [r.getMessage() for r in records]
    assert not [s for s in said if "past_key_values" in s and "deprecated" in s], said
