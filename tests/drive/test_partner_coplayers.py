"""Co-player checkpoints as partners (`ttlab.drive.partner_coplayers`): a co-player is trained once per config
and then loaded from its hash, drives the partner slot, the partner profile tells the scripted types apart as
their timings say, and the benchmarks (`drive_coplayers.py`, `drive_partner_adapt.py --coplayer-population`) run as a
user runs them on the tiny debug preset, with a checkpoint partner among the held-out partners."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ttlab.common.checkpoint import load_checkpoint
from ttlab.drive import partner_coplayers
from ttlab.drive.evaluate import EvalConfig, evaluate
from ttlab.drive.partner_adapt import held_out_env, partner_label
from ttlab.drive.partner_coplayers import (
    COPLAYERS,
    CoplayerSpec,
    coplayer_config,
    coplayer_stem,
    ensure_coplayer,
    partner_profile,
)
from ttlab.drive.partners import ScriptedPartner, build_population
from ttlab.drive.presets import partner_adapt_debug

ROOT = Path(__file__).resolve().parents[2]
TINY = 160  # learner agent-steps: one update of the debug preset


def _script(name: str, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """A co-player cache holding the debug-preset co-players the benchmarks below use (trained once here)."""
    root = tmp_path_factory.mktemp("coplayers")
    for name in ("cautious", "hasty", "moderate"):
        ensure_coplayer(dataclasses.replace(COPLAYERS[name], steps=TINY), root, "partner_adapt_debug")
    return root


def test_a_coplayer_trains_once_and_is_then_loaded_by_its_config_hash(tmp_path, monkeypatch):
    spec = CoplayerSpec("averse", reward_collision=-2.0, steps=TINY)
    stem = ensure_coplayer(spec, tmp_path, "partner_adapt_debug")
    assert stem == coplayer_stem(spec, tmp_path, "partner_adapt_debug") and Path(str(stem) + ".json").is_file()
    ck = load_checkpoint(stem, "cpu")
    assert ck["coplayer"]["reward_collision"] == -2.0 and ck["update"] == 1

    def no_training(*a, **k):
        raise AssertionError("a cached co-player must not be trained again")

    monkeypatch.setattr(partner_coplayers, "train_partner", no_training)
    assert ensure_coplayer(spec, tmp_path, "partner_adapt_debug") == stem
    other = coplayer_stem(dataclasses.replace(spec, reward_collision=-1.0), tmp_path, "partner_adapt_debug")
    assert other != stem and other.name.startswith("averse-")
    assert coplayer_stem(dataclasses.replace(spec, seed=1), tmp_path, "partner_adapt_debug") != stem
    cfg = coplayer_config(spec, "partner_adapt_debug")
    assert cfg.env.reward_collision == -2.0 and cfg.policy.core == "mlp" and cfg.ppo.aux_task_coef == 0.0
    # the checkpoint drives the partner slot of a population (a policy, not a scripted type), named by its stem
    env = held_out_env(partner_adapt_debug(), 0, num_envs=4)
    pop = build_population(["yield", str(stem)], None, env)
    assert isinstance(pop.policies[0], ScriptedPartner) and not isinstance(pop.policies[1], ScriptedPartner)
    assert partner_label(str(stem)) == stem.name and partner_label("yield") == "yield"


def test_the_profile_tells_the_scripted_types_apart_as_their_timings_say():
    cfg = partner_adapt_debug()
    ny_go = partner_profile(cfg, "never_yield", "go_at_once", 1, num_envs=8)
    ny_wait = partner_profile(cfg, "never_yield", "wait_1.2s", 1, num_envs=8)
    y_go = partner_profile(cfg, "yield", "go_at_once", 1, num_envs=8)
    y_wait = partner_profile(cfg, "yield", "wait_1.2s", 1, num_envs=8)
    assert ny_go["trials"] == 16 and ny_go["start_rate"] == 1.0
    assert ny_go["start_tick_mean"] == 0 and y_go["start_tick_mean"] == 14  # the tick of the first moving action
    # yield reaches the conflict point later than never_yield; against a waiting ego never_yield always gets there
    assert ny_wait["cross_rate"] == 1.0 and y_go["cross_tick_mean"] > ny_wait["cross_tick_mean"] + 10
    # both going at once collide; waiting lets never_yield cross first; yield lets the ego that goes cross first
    assert ny_go["collision_rate"] == 1.0 and ny_go["partner_goal_rate"] == 0.0
    assert ny_wait["partner_first_rate"] == 1.0 and ny_wait["collision_rate"] == 0.0 and ny_wait["partner_goal_rate"] == 1.0
    assert y_go["partner_first_rate"] == 0.0 and y_go["collision_rate"] == 0.0 and y_go["partner_goal_rate"] == 1.0
    assert y_wait["collision_rate"] == 1.0  # the hesitating ego meets the yielder pulling out
    with pytest.raises(ValueError, match="ego 'brake'"):
        partner_profile(cfg, "yield", "brake", 1, num_envs=4)


def test_drive_coplayers_profiles_every_partner(cache, tmp_path):
    out, png = tmp_path / "c.json", tmp_path / "c.png"
    p = _script("drive_coplayers.py", "--preset", "partner_adapt_debug", "--steps", str(TINY), "--names",
                "cautious", "--root", str(cache), "--envs", "4", "--episodes", "1", "--out", str(out),
                "--png", str(png))
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())
    labels = [partner_label(str(coplayer_stem(dataclasses.replace(COPLAYERS[n], steps=TINY), cache,
                                              "partner_adapt_debug"))) for n in ("cautious",)]
    assert res["partners"][:4] == ["never_yield", "yield", "never_yield_late", "yield_soon"]
    assert res["partners"][4:] == labels and set(res["coplayers"]) == set(labels)
    assert res["coplayers"][labels[0]]["reward_weights"]["reward_collision"] == -3.0
    for lab in res["partners"]:
        assert set(res["profile"][lab]) == {"go_at_once", "wait_1.2s"}
        assert set(res["scripted_egos"][lab]) == {"go_at_once", "wait_1.2s", "memory"}
    assert res["profile"]["yield"]["go_at_once"]["start_tick_mean"] == 14
    assert {"commit", "nproc", "loadavg_start", "wall_s"} <= set(res) and png.is_file()
    assert json.loads(p.stdout.strip().splitlines()[-1])["benchmark"] == "drive_coplayers"
    assert _script("drive_coplayers.py", "--names", "nobody").returncode == 2


def test_the_benchmark_trains_against_checkpoint_partners_and_holds_one_out(cache, tmp_path):
    out, png, egos = tmp_path / "p.json", tmp_path / "p.png", tmp_path / "egos"
    p = _script("drive_partner_adapt.py", "--preset", "partner_adapt_debug", "--coplayer-population",
                "--coplayer-root", str(cache), "--coplayer-steps", str(TINY), "--cores", "mlp", "--aux", "off",
                "--seeds", "1", "--eval-envs", "4", "--eval-episodes", "2", "--profile-episodes", "1", "--jobs", "1",
                "--save-egos", str(egos), "--out", str(out), "--png", str(png))
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())
    stem = {n: coplayer_stem(dataclasses.replace(COPLAYERS[n], steps=TINY), cache, "partner_adapt_debug")
            for n in ("cautious", "hasty", "moderate")}
    assert res["config"]["partners"] == ["never_yield", "yield", stem["cautious"].name, stem["hasty"].name]
    assert res["config"]["held_out_partners"] == ["never_yield_late", "yield_soon", stem["moderate"].name]
    ev = res["runs"][0]["eval"]
    assert set(ev["held_out_partners"]["per_partner"]) == set(res["config"]["held_out_partners"])
    assert set(ev["train_partners"]["per_partner"]) == set(res["config"]["partners"])
    assert set(res["partner_profile"]) == {*res["config"]["partners"], *res["config"]["held_out_partners"]}
    pp = res["summary"]["mlp"]["held_out_partners_per_partner"][stem["moderate"].name]
    assert {"trial_0_score", "trial_1_score", "delta_1", "delta_1_se", "trial_1_time_to_goal"} <= set(pp)
    # the saved ego is a `ttlab drive eval` checkpoint: evaluated against the held-out checkpoint partner alone
    m = evaluate(EvalConfig(checkpoint=str(egos / "mlp_seed0"), mode="trial", num_envs=4, episodes=1,
                            partners=(str(stem["moderate"]),), out=tmp_path / "eval.json"))
    assert m["per_partner"][str(stem["moderate"])]["episodes"] == 4
    assert "ada_delta_trial_1_minus_0" in m["per_partner"][str(stem["moderate"])]
