"""Scenario cache and `ttlab drive convert`: round trip, bad files skipped by name, loading through load_pool."""

import json
import shutil

import numpy as np
import pytest
import torch

from ttlab.common.data import shared_data_file
from ttlab.common.errors import UserError
from ttlab.drive.scenarios.cache import INDEX, CacheError, convert, load_cache, read_shard, write_shard
from ttlab.drive.scenarios.convert_cmd import main as convert_main
from ttlab.drive.scenarios.pool import load_pool, load_scenarios
from ttlab.drive.scenarios.procedural import generate
from ttlab.drive.scenarios.waymo_json import load_scenario, scenario_to_json

CARLA = shared_data_file("carla_town02_womd.json", required=False)  # None when the sample is absent
FIELDS = ("pos", "heading", "vel", "valid", "length", "width", "agent_type", "goal", "expert", "seg", "seg_type",
          "seg_road")


@pytest.fixture
def src(tmp_path):
    d = tmp_path / "json"
    d.mkdir()
    if CARLA is not None:
        shutil.copy(CARLA, d / "a_carla.json")
    else:
        (d / "a_carla.json").write_text(json.dumps(scenario_to_json(generate("merge", 9, 6))))
    (d / "b_inter.json").write_text(json.dumps(scenario_to_json(generate("intersection", 1, 7))))
    (d / "c_round.json").write_text(json.dumps(scenario_to_json(generate("roundabout", 2, 5))))
    return d


def _assert_same(a, b):
    assert a.name == b.name and a.dt == b.dt
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f


@pytest.mark.parametrize("workers,shard_size", [(1, 2), (2, 1)])
def test_convert_round_trip(src, tmp_path, workers, shard_size):
    out = tmp_path / "cache"
    index = convert(src, out, workers=workers, shard_size=shard_size)
    assert len(index["scenes"]) == 3 and index["bad"] == []
    cached = load_cache(out)
    direct = [load_scenario(p) for p in sorted(src.glob("*.json"))]
    assert [s.name for s in cached] == [s.name for s in direct]
    for a, b in zip(cached, direct, strict=True):
        _assert_same(a, b)


def test_cache_keeps_optional_fields(tmp_path):
    scenes = [generate("hidden_goal", 0, 5), generate("partner_style", 1, 4), generate("straight", 2, 3)]
    entries = write_shard(scenes, tmp_path / "s.npz")
    back = read_shard(tmp_path / "s.npz", entries)
    for a, b in zip(scenes, back, strict=True):
        for f in ("route", "goal_candidates", "style_pos", "style_heading", "style_vel", "style_valid"):
            x, y = getattr(a, f), getattr(b, f)
            assert (x is None and y is None) or np.array_equal(x, y), f
        assert a.style_names == b.style_names


def test_convert_cli_skips_bad_files_by_name(src, tmp_path, capsys):
    (src / "d_broken.json").write_text("{not json")
    bad = json.loads((src / "b_inter.json").read_text())
    bad["objects"][1]["heading"][4] = "north"
    (src / "e_bad.json").write_text(json.dumps(bad))
    ragged = json.loads((src / "b_inter.json").read_text())
    ragged["objects"][1]["heading"] = ragged["objects"][1]["heading"][:-1]  # upstream pads it: repaired
    (src / "f_ragged.json").write_text(json.dumps(ragged))
    out = tmp_path / "cache"
    assert convert_main([str(src), str(out), "--workers", "1"]) == 1  # bad files make the exit code 1 ...
    err = capsys.readouterr().err
    assert "d_broken.json: not valid JSON" in err
    assert "e_bad.json: objects[1].heading[4]: expected a number" in err
    assert "scene repaired (1 repair(s)): f_ragged.json" in err
    assert "f_ragged.json: objects[1].heading: 90 entries, steps 90..90 padded as invalid" in err
    assert len(load_cache(out)) == 4  # ... but the good and the repaired files are converted
    assert convert_main([str(src), str(out), "--workers", "2", "--shard-size", "2", "--skip-bad"]) == 0
    captured = capsys.readouterr()
    repaired = 1 + (CARLA is not None)  # the CARLA sample's logs are repaired too (teleports, heading spikes)
    assert "converted 4/6 scenes" in captured.out and f"{repaired} repaired, 2 bad file(s) skipped" in captured.out
    assert len(load_cache(out)) == 4
    assert convert_main([str(src), str(out), "--workers", "1", "--skip-bad", "--strict"]) == 0
    captured = capsys.readouterr()
    strict_ok = 3 - (CARLA is not None)  # strict refuses every repair, the CARLA sample's log repairs too
    assert f"converted {strict_ok}/6 scenes" in captured.out
    assert "f_ragged.json: objects[1].heading: 90 entries" in captured.err
    with pytest.raises(UserError, match="missing: no such directory"):
        convert_main([str(tmp_path / "missing"), str(out)])


def test_load_pool_from_every_source(src, tmp_path):
    out = tmp_path / "cache"
    convert(src, out)
    a, b = load_pool(out), load_pool(src)
    assert a.size == b.size == 3
    assert torch.equal(a.pos, b.pos) and torch.equal(a.seg, b.seg)
    p = load_pool("procedural:n=4,seed=2,families=hidden_goal,agents=6", max_agents=8)
    assert p.size == 4 and p.pos.shape[1] == 8 and p.goal_candidates.shape[2] == 3
    assert len(load_scenarios(src / "b_inter.json")) == 1
    with pytest.raises(ValueError, match="bad item 'x=1'"):
        load_pool("procedural:x=1")
    with pytest.raises(FileNotFoundError, match="scenario source not found"):
        load_pool(tmp_path / "nothing")


def test_damaged_cache_errors_name_the_file(src, tmp_path):
    out = tmp_path / "cache"
    with pytest.raises(CacheError, match="no cache index"):
        load_cache(out)
    convert(src, out)
    (out / INDEX).write_text("{}")
    with pytest.raises(CacheError, match=r"index.json: not a ttlab-drive-scenarios v1 index"):
        load_cache(out)
