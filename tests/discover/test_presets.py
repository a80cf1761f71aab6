"""Named presets equal the long flag strings they replace; nested train configs equal the flat ones they were."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ttlab.common.config import parse_config, to_dict
from ttlab.discover.config import (
    PolicyConfig,
    PolishConfig,
    SearchConfig,
    TrainConfig,
    WarmStartConfig,
    load_train_config,
    train_config_from_dict,
)
from ttlab.discover.llm import presets as train_presets
from ttlab.discover.loop import make_proposer, parse_program_settings
from ttlab.discover.presets import POLISH_PRESETS, SEARCH_PRESETS
from ttlab.discover.puct import Node

# The flags the results were produced with, verbatim.
LSE_ONLY = ["--program-weights", "lse=1,adam=0,local=0,minimax=0,slp=0"]
AUTO_FLAGS = ["--time-limit", "20m", "--workers", "1", "--init-states", "1", "--states-per-step", "1",
              "--samples-per-state", "1", "--program-budget-s", "520", *LSE_ONLY, "--program-settings",
              '{"lse": {"start": "auto", "hop_frac": 0.6, "metro_frac": 0.4, "hop_T": 5e-6, "hop_sym": 0.15, '
              '"hop_window": 0.3, "hop_sigma": 0.3, "hop_ftol": 1e-11, "n0": 51, "levels": 2, "max_n": 816, '
              '"tau_random": 0.01, "tau_end": 1e-10, "factor": 0.3, "penalty": 1000.0, "maxcor": 30, "coarsen": 4, '
              '"upsample": 1, "auto_above": 0.3812}}']
LADDER_FLAGS = ["--time-limit", "32m", "--workers", "1", "--init-states", "1", "--states-per-step", "1",
                "--samples-per-state", "1", "--program-budget-s", "1800", *LSE_ONLY, "--program-settings",
                '{"lse": {"start": "random", "hop_frac": 0.25, "hop_T": 5e-6, "hop_sym": 0.15, "hop_window": 0.3, '
                '"hop_sigma": 0.3, "hop_ftol": 1e-11, "n0": 51, "levels": 2, "max_n": 1632, "tau_random": 0.01, '
                '"tau_end": 1e-10, "factor": 0.3, "penalty": 1000.0, "maxcor": 30, "coarsen": 4}}']
POLISH_FLAGS = {
    "hop": ["--time-limit", "5m", "--round-s", "300", "--program", "lse", "--settings", '{"hop_frac": 0.5, "coarsen": 4}'],
    "scaled": ["--time-limit", "8m", "--upsample", "2", "--program", "lse", "--round-s", "160", "--settings",
               '{"objective": "scaled", "tau0": 1e-07}'],
    "scaled_4800": ["--time-limit", "22m", "--upsample", "2", "--program", "lse", "--round-s", "300", "--settings",
                    '{"objective": "scaled", "tau0": 1e-07, "max_n": 4800}'],
}


@pytest.mark.parametrize("name,flags", [("erdos_auto", AUTO_FLAGS), ("erdos_ladder", LADDER_FLAGS)])
def test_search_preset_is_the_command_it_replaces(name, flags):
    old = parse_config(SearchConfig, argv=flags)
    new = parse_config(SearchConfig, SEARCH_PRESETS, argv=["--preset", name])  # `ttlab discover search --preset`
    assert dataclasses.replace(new, program_settings="") == dataclasses.replace(old, program_settings="")
    assert parse_program_settings(new.program_settings, "erdos") == json.loads(old.program_settings)
    # the same programs, byte for byte, from the same seed
    state = [Node(id="0", construction=[0.5] * 8, reward=-0.5, score=0.5)]
    assert [p.code for p in make_proposer(new).propose(state, 3)] == [p.code for p in make_proposer(old).propose(state, 3)]


@pytest.mark.parametrize("name", sorted(POLISH_FLAGS))
def test_polish_preset_is_the_command_it_replaces(name):
    old = parse_config(PolishConfig, argv=["start.json", *POLISH_FLAGS[name]])
    new = parse_config(PolishConfig, POLISH_PRESETS, argv=["start.json", "--preset", name])
    assert json.loads(new.settings) == json.loads(old.settings)
    assert dataclasses.replace(new, settings="") == dataclasses.replace(old, settings="")


def test_a_flag_after_a_preset_overrides_its_field():
    cfg = parse_config(SearchConfig, SEARCH_PRESETS, argv=["--preset", "erdos_auto", "--time-limit", "3m", "--seed", "2"])
    assert (cfg.time_limit, cfg.seed, cfg.program_budget_s) == ("3m", 2, 520.0)


# The train presets as they were written before TrainConfig nested its policy and warm-start fields.
FLAT_PRESETS = {
    "debug": dict(steps=2, states_per_step=2, rollouts_per_state=2, max_new_tokens=32, gen_batch_size=4,
                  micro_batch=2, lora_rank=8, lora_alpha=16, workers=2, program_budget_s=1.0, grace_s=5.0,
                  init_states=2, device="cpu", backend="hf", memory_mb=2048, warm_start=False, threads=1),
    "cpu_smollm2": dict(steps=10, states_per_step=1, rollouts_per_state=8, max_new_tokens=288, gen_batch_size=8,
                        micro_batch=8, lora_rank=16, lora_alpha=32, lr=1e-4, kl_coef=0.0, temperature=0.5,
                        fail_mode="zero", workers=2, program_budget_s=2.0, grace_s=5.0, init_states=2, device="cpu",
                        backend="hf", memory_mb=2048, warm_start=True, warm_groups=40, warm_per_group=4,
                        warm_lr=3e-3, threads=1),
    "one_gpu_1p5b": dict(states_per_step=8, rollouts_per_state=32, max_new_tokens=4096, gen_batch_size=64,
                         micro_batch=8, grad_checkpointing=True, workers=16),
    "one_gpu_8b": dict(states_per_step=8, rollouts_per_state=16, max_new_tokens=4096, gen_batch_size=32,
                       micro_batch=2, grad_checkpointing=True, workers=16, vllm_gpu_memory=0.35),
    "paper": dict(states_per_step=8, rollouts_per_state=64, max_new_tokens=8192, gen_batch_size=512,
                  micro_batch=4, grad_checkpointing=True, workers=32),
}


@pytest.mark.parametrize("name", sorted(FLAT_PRESETS))
def test_nested_train_preset_equals_its_flat_predecessor(name):
    assert set(FLAT_PRESETS) <= set(train_presets.TRAIN_PRESETS)  # presets added since have no flat form
    with pytest.warns(UserWarning, match="old flat keys"):
        old = train_config_from_dict(FLAT_PRESETS[name])
    assert train_presets.TRAIN_PRESETS[name]() == old


def test_old_flat_config_json_loads_with_a_warning_and_the_new_one_without(tmp_path):
    cfg = train_presets.cpu_smollm2()
    flat = {k: v for k, v in to_dict(cfg).items() if k not in ("policy", "warm")}
    flat.update({k: v for k, v in to_dict(cfg.policy).items()
                 if k not in ("lora_dropout", "learn_bf16", "llama_weights")})  # the old trainer's 12 keys (the others came later)
    flat.update({f"warm_{k}": v for k, v in to_dict(cfg.warm).items() if k in ("groups", "per_group", "lr", "seed")})
    (tmp_path / "old.json").write_text(json.dumps(flat))
    with pytest.warns(UserWarning, match="old flat keys"):
        assert load_train_config(tmp_path / "old.json") == cfg
    (tmp_path / "new.json").write_text(json.dumps(to_dict(cfg)))
    assert load_train_config(tmp_path / "new.json") == cfg


def test_train_flags_of_the_nested_policy_keep_their_names():
    cfg = parse_config(TrainConfig, train_presets.TRAIN_PRESETS,
                       argv=["--preset", "debug", "--model", "m", "--lora-rank", "4", "--max-new-tokens", "9",
                             "--warm.groups", "3", "--lr", "0.5"])
    assert cfg.policy == dataclasses.replace(train_presets.debug().policy, model="m", lora_rank=4, max_new_tokens=9)
    assert cfg.warm == WarmStartConfig(groups=3) and cfg.lr == 0.5
    assert TrainConfig().policy == PolicyConfig()


def test_blocks_presets_are_the_blocks_prompt_with_the_papers_temperature_and_llama_sampling():
    cfg = train_presets.cpu_smollm2_blocks()
    assert (cfg.prompt_format, cfg.policy.temperature, cfg.policy.backend) == ("blocks", 1.0, "llama")
    assert cfg.states_per_step * cfg.rollouts_per_state == 16 and cfg.warm_start
    assert cfg.warm.groups * cfg.warm.per_group > train_presets.cpu_smollm2().warm.groups * train_presets.cpu_smollm2().warm.per_group
    assert cfg.program_clock == "work"  # a program's score does not depend on the load
    assert dataclasses.replace(cfg, prompt_format="compact", rollouts_per_state=8, lr=1e-4, policy=train_presets.cpu_smollm2().policy,
                               warm=train_presets.cpu_smollm2().warm, program_clock="time") == train_presets.cpu_smollm2()
    dbg = train_presets.debug_blocks()
    assert dbg.prompt_format == "blocks" and dbg.warm_start and dbg.warm.groups <= 4
