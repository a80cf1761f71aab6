"""The discover commands' range checks: every preset passes them, and a flag out of range is one line naming it,
exit 2, with no run directory, output file or model load before it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ttlab.common.errors import UserError
from ttlab.discover.cli import main
from ttlab.discover.flags import check_polish, check_search, check_train
from ttlab.discover.llm.presets import TRAIN_PRESETS
from ttlab.discover.presets import POLISH_PRESETS, SEARCH_PRESETS


@pytest.mark.parametrize("name", sorted(TRAIN_PRESETS))
def test_every_train_preset_is_in_range(name):
    check_train(TRAIN_PRESETS[name]())


@pytest.mark.parametrize("name", sorted(SEARCH_PRESETS))
def test_every_search_preset_is_in_range(name):
    check_search(SEARCH_PRESETS[name]())


@pytest.mark.parametrize("name", sorted(POLISH_PRESETS))
def test_every_polish_preset_is_in_range(name):
    check_polish(POLISH_PRESETS[name]())


def test_nan_and_bounds_are_refused_and_the_edges_allowed():
    cfg = TRAIN_PRESETS["debug"]()
    for field, value, needle in [("lr", float("nan"), "--lr nan: must be > 0"),
                                 ("lr", float("inf"), "--lr inf: must be > 0"),
                                 ("adam_beta2", 1.0, "--adam-beta2 1.0: must be in [0, 1)"),
                                 ("kl_coef", -0.1, "--kl-coef -0.1: must be >= 0"),
                                 ("fail_mode", "ceiling", "--fail-mode 'ceiling': expected one of floor, zero")]:
        with pytest.raises(UserError, match=needle.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            check_train(replace(cfg, **{field: value}))
    check_train(replace(cfg, kl_coef=0.0, grad_clip=0.0, adam_beta1=0.0))
    # a run from a given tree, or resumed, makes no fresh roots
    check_train(replace(cfg, init_states=0, resume=True))
    with pytest.raises(UserError, match="--init-states 0: must be >= 1"):
        check_train(replace(cfg, init_states=0))
    # the warm start's flags are only checked when it runs
    bad_warm = replace(cfg.warm, groups=0)
    check_train(replace(cfg, warm_start=False, warm=bad_warm))
    with pytest.raises(UserError, match="--warm.groups 0: must be >= 1"):
        check_train(replace(cfg, warm_start=True, warm=bad_warm))


@pytest.mark.parametrize("argv,needle", [
    (["search", "--samples-per-state", "0"], "--samples-per-state 0: must be >= 1"),  # was: ZeroDivisionError
    (["search", "--init-states", "0"], "--init-states 0: must be >= 1"),  # was: ZeroDivisionError
    (["search", "--program-budget-s", "-1"], "--program-budget-s -1.0: must be > 0"),  # was: ran
    (["search", "--max-steps", "-1"], "--max-steps -1: must be >= 0"),
    (["search", "--workers", "0"], "--workers 0: must be >= 1"),  # was: named an internal class
    (["train", "--preset", "debug", "--steps", "-2"], "--steps -2: must be >= 1"),  # was: exit 0, nothing trained
    (["train", "--preset", "debug", "--lr", "-1"], "--lr -1.0: must be > 0"),  # was: torch's message, after loading
    (["train", "--preset", "debug", "--micro-batch", "0"], "--micro-batch 0: must be >= 1"),
    (["train", "--preset", "debug", "--temperature", "0"], "--temperature 0.0: must be > 0"),
    (["train", "--preset", "debug", "--top-p", "1.5"], "--top-p 1.5: must be in (0, 1]"),
    (["train", "--preset", "debug", "--backend", "foo"], "--backend 'foo': expected one of auto, hf, vllm, llama"),
])
def test_a_flag_out_of_range_is_one_line_before_a_run_directory_exists(tmp_path, capsys, argv, needle):
    assert main([*argv, "--root", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith(f"ttlab discover {argv[0]}: error: ") and needle in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("flags,needle", [(["--round-s", "0"], "--round-s 0.0: must be > 0"),
                                          (["--memory-mb", "0"], "--memory-mb 0: must be >= 1")])
def test_polish_names_a_bad_flag_before_any_round(tmp_path, capsys, flags, needle):
    start = tmp_path / "start.json"
    start.write_text("[0.5, 0.5, 0.5, 0.5]")
    out = tmp_path / "out" / "best.json"
    assert main(["polish", str(start), "--time-limit", "5s", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ttlab discover polish: error: ") and needle in err, err
    assert not out.parent.exists()
