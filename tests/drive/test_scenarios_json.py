"""Waymo/GPUDrive JSON loader: the real CARLA town and broken variants that must name file and field."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from ttlab.drive.scenarios.procedural import generate
from ttlab.drive.scenarios.types import AGENT_TYPE_ID, ROAD_TYPE_ID
from ttlab.drive.scenarios.waymo_json import ScenarioFormatError, load_scenario, scenario_to_json

CARLA = Path(__file__).resolve().parents[3] / "shared" / "data" / "carla_town02_womd.json"
needs_carla = pytest.mark.skipif(not CARLA.is_file(), reason="shared CARLA sample not present")


@pytest.fixture(scope="module")
def carla_doc():
    return json.loads(CARLA.read_text())


@needs_carla
def test_loads_carla_town(carla_doc):
    sc = load_scenario(CARLA)
    assert sc.name == "Town02"
    assert sc.pos.shape == (32, 91, 2) and sc.vel.shape == (32, 91, 2) and sc.heading.shape == (32, 91)
    assert sc.valid.all()
    assert (sc.agent_type == AGENT_TYPE_ID["vehicle"]).all() and not sc.expert.any()
    o = carla_doc["objects"][5]
    assert np.allclose(sc.pos[5, 10], [o["position"][10]["x"], o["position"][10]["y"]], atol=1e-3)
    assert np.allclose(sc.goal[5], [o["goalPosition"]["x"], o["goalPosition"]["y"]], atol=1e-3)
    assert sc.length[5] == pytest.approx(o["length"]) and sc.width[5] == pytest.approx(o["width"])
    # every one of the 470 road elements is kept, with its type
    assert len(np.unique(sc.seg_road)) == 470
    for kind, count in (("lane", 300), ("road_edge", 90), ("road_line", 80)):
        assert len(np.unique(sc.seg_road[sc.seg_type == ROAD_TYPE_ID[kind]])) == count
    # RDP simplification: far fewer segments than the 10327 - 470 raw ones, and a finer tolerance keeps more
    assert sc.num_segments < 2000
    assert load_scenario(CARLA, tolerance=0.01).num_segments > sc.num_segments
    # segments are chained: within one element the end of a segment is the start of the next
    m = sc.seg_road == sc.seg_road[0]
    s = sc.seg[m]
    assert np.allclose(s[1:, :2], s[:-1, 2:])


@needs_carla
def test_invalid_filler_becomes_invalid(tmp_path, carla_doc):
    doc = copy.deepcopy(carla_doc)
    for t in (0, 1, 50):
        doc["objects"][2]["position"][t] = {"x": -10000.0, "y": -10000.0}
    doc["objects"][4]["valid"][7] = False
    p = tmp_path / "holes.json"
    p.write_text(json.dumps(doc))
    sc = load_scenario(p)
    assert not sc.valid[2, [0, 1, 50]].any() and sc.valid[2, 2:50].all()
    assert not sc.valid[4, 7] and sc.valid.sum() == 32 * 91 - 4


def _broken(tmp_path, doc, edit):
    doc = copy.deepcopy(doc)
    edit(doc)
    p = tmp_path / "scene.json"
    p.write_text(json.dumps(doc))
    return p


SMALL = scenario_to_json(generate("intersection", 0, 5))


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["objects"][3].pop("width"), "scene.json: objects[3].width: missing field"),
    (lambda d: d["objects"][3]["position"].pop(), "scene.json: objects[3].position: expected 91 entries, got 90"),
    (lambda d: d["objects"][3]["heading"].__setitem__(5, "north"), "scene.json: objects[3].heading[5]: expected a number"),
    (lambda d: d["objects"][1]["velocity"][2].pop("y"), "scene.json: objects[1].velocity[2].y: missing field"),
    (lambda d: d["objects"][0]["position"][4].__setitem__("x", None), "scene.json: objects[0].position[4].x: expected a number"),
    (lambda d: d["objects"][2]["valid"].__setitem__(0, "yes"), "scene.json: objects[2].valid[0]: expected a boolean"),
    (lambda d: d["objects"][2].__setitem__("goalPosition", 3), "scene.json: objects[2].goalPosition: expected an object"),
    (lambda d: d["roads"][2]["geometry"][0].pop("y"), "scene.json: roads[2].geometry[0].y: missing field"),
    (lambda d: d["roads"][1].pop("type"), "scene.json: roads[1].type: missing field"),
    (lambda d: d.pop("objects"), "scene.json: objects: missing field"),
    (lambda d: d.__setitem__("roads", {}), "scene.json: roads: expected a list"),
])
def test_broken_files_name_the_field(tmp_path, edit, message):
    p = _broken(tmp_path, SMALL, edit)
    with pytest.raises(ScenarioFormatError) as e:
        load_scenario(p)
    assert str(e.value).startswith(message), str(e.value)


def test_not_json_and_missing_file(tmp_path):
    p = tmp_path / "scene.json"
    p.write_text('{"objects": [1, 2')
    with pytest.raises(ScenarioFormatError, match=r"^scene.json: not valid JSON"):
        load_scenario(p)
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ScenarioFormatError, match=r"^scene.json: not valid JSON"):
        load_scenario(p)
    with pytest.raises(ScenarioFormatError, match="nope.json: cannot read"):
        load_scenario(tmp_path / "nope.json")


def test_unknown_road_types_are_counted_not_fatal(tmp_path):
    doc = copy.deepcopy(SMALL)
    doc["roads"].append({"geometry": [{"x": 0, "y": 0}, {"x": 1, "y": 1}], "type": "unknown"})
    doc["roads"].append({"geometry": [{"x": 5, "y": 5}], "type": "stop_sign"})
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    sc = load_scenario(p)
    assert sc.metadata["skipped_roads"] == {"unknown": 1}
    assert (sc.seg_type == ROAD_TYPE_ID["stop_sign"]).sum() == 1  # a point element -> one zero-length segment


def test_procedural_export_round_trip(tmp_path):
    src = generate("roundabout", 2, 8)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(scenario_to_json(src)))
    sc = load_scenario(p, tolerance=0.0)
    for name in ("pos", "heading", "vel", "valid", "length", "width", "goal", "seg", "seg_type", "seg_road"):
        a, b = getattr(src, name), getattr(sc, name)
        assert a.shape == b.shape and np.allclose(a, b, atol=1e-4), name
