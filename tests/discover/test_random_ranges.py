"""The ranged block grammar (`ttlab.discover.random_ranges`): programs with the random-blocks grammar's structure
whose settings are ranges drawn at run time; its warm start and pool have their own keys, and the random-blocks
ones keep theirs."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest

from ttlab.discover.blocks import clock_wall_factor, with_blocks
from ttlab.discover.config import WarmStartConfig
from ttlab.discover.llm import warm_pool
from ttlab.discover.llm.warmstart import key_digest, sft_examples
from ttlab.discover.prompts import BLOCKS_HEAD
from ttlab.discover.random_blocks import STAGES
from ttlab.discover.random_ranges import LIN_RANGES, LOG_RANGES, log_setting, ranged_program
from ttlab.discover.tasks.erdos import exact_c5

RANGE = re.compile(r"10 \*\* rng\.uniform\((-?[\d.]+), (-?[\d.]+)\)")


def test_ranged_programs_parse_share_the_head_and_write_ranges_inside_the_grammars_bounds():
    rng = np.random.default_rng(0)
    progs = [ranged_program(rng) for _ in range(200)]
    kinds = set()
    for code, ch in progs:
        ast.parse(code)
        assert code.startswith(BLOCKS_HEAD) and code.rstrip().endswith("return eb.finish(h)")
        kinds |= {s["kind"] for s in ch.get("stages", [])}
        for a, b in RANGE.findall(code):
            assert float(a) <= float(b)
            assert min(lo for lo, _ in LOG_RANGES.values()) - 0.01 <= float(a)
            assert float(b) <= max(hi for _, hi in LOG_RANGES.values()) + 0.01
    assert kinds == set(STAGES)
    n_ranges = sum(len(RANGE.findall(c)) for c, _ in progs)
    assert n_ranges > 150  # most settings are ranges, not numbers
    assert sum("rng.integers(" in c for c, _ in progs) > 10 and sum("rng.uniform(0." in c for c, _ in progs) > 10
    assert ranged_program(np.random.default_rng(7))[0] == ranged_program(np.random.default_rng(7))[0]


def test_settings_are_sub_ranges_whole_ranges_or_numbers_in_the_stated_shares():
    rng = np.random.default_rng(1)
    recs = [log_setting(rng, "sigma")[1] for _ in range(2000)]
    share = {k: sum(r["kind"] == k for r in recs) / len(recs) for k in ("whole", "number", "range")}
    assert abs(share["whole"] - 0.25) < 0.04 and abs(share["number"] - 0.15) < 0.03
    lo, hi = LOG_RANGES["sigma"]
    widths = [r["log10"][1] - r["log10"][0] for r in recs if r["kind"] == "range"]
    assert min(widths) >= 0.15 * (hi - lo) - 0.011 and max(widths) < hi - lo
    assert LIN_RANGES["window"] == (0.05, 0.5)


def test_a_ranged_program_runs_in_the_sandbox_and_its_settings_move_with_the_program_seed():
    from ttlab.discover.sandbox import Limits, run_program
    from ttlab.discover.tasks import get_task

    task = get_task("erdos")
    parent = task.initial_states(np.random.default_rng(0), 1)[0]
    rng, code = np.random.default_rng(5), ""
    while code.count("rng.uniform(") < 2:  # a program with at least two ranged settings
        code, _ = ranged_program(rng, wall_factor=2.0)
    outs = []
    for seed in (0, 0, 1):
        res = run_program(with_blocks(code, "work"), parent=parent, budget_s=1.0, seed=seed,
                          limits=Limits(wall_s=clock_wall_factor("work") * 1.0 + 10.0))
        assert res.ok, (res.status, res.reason, res.stderr[-800:])
        v = task.verify(res.output)
        assert v.valid and exact_c5(res.output)[1]
        outs.append(v.score)
    assert outs[0] == outs[1] and outs[0] != outs[2]  # the work clock: a seed repeats, another draws anew


def test_the_ranges_warm_start_has_its_own_key_corpus_and_pool_and_the_blocks_ones_keep_theirs():
    args = ("m", 16, 32, "all-linear", BLOCKS_HEAD)
    plain, ranged = WarmStartConfig(groups=6, per_group=2), WarmStartConfig(groups=6, per_group=2, ranges=True)
    assert "ranges" not in warm_pool.key_fields(plain) and warm_pool.key_fields(ranged)["ranges"] is True
    assert key_digest(plain, *args) != key_digest(ranged, *args)
    f_plain, f_ranged = WarmStartConfig(top_frac=0.25, pool=64), WarmStartConfig(top_frac=0.25, pool=64, ranges=True)
    assert warm_pool.pool_key(f_plain) != warm_pool.pool_key(f_ranged)
    comps = [c for _, cs in sft_examples(ranged, prompt_format="blocks") for c in cs]
    assert len(comps) == 12 and sum(bool(RANGE.search(c)) for c in comps) >= 6
    assert not any(RANGE.search(c) for _, cs in sft_examples(plain, prompt_format="blocks") for c in cs)
    assert all(ast.parse(c) for c, _ in warm_pool.draw(8, 0, ranges=True))
    assert sum("rng.uniform(" in c for c, _ in warm_pool.draw(8, 0, ranges=True)) > 0
    with pytest.raises(ValueError, match="ranges"):
        sft_examples(WarmStartConfig(ranges=True), prompt_format="compact")
