"""Waymo/GPUDrive JSON loader: the real CARLA town and broken variants that must name file and field."""

import copy
import json
import warnings

import numpy as np
import pytest

from ttlab.common.data import shared_data_file
from ttlab.drive.scenarios.procedural import generate
from ttlab.drive.scenarios.types import AGENT_TYPE_ID, ROAD_TYPE_ID
from ttlab.drive.scenarios.waymo_json import (
    ScenarioFormatError,
    ScenarioRepairWarning,
    load_scenario,
    scenario_to_json,
)

CARLA = shared_data_file("carla_town02_womd.json", required=False)  # None when the sample is absent
needs_carla = pytest.mark.skipif(CARLA is None, reason="shared CARLA sample not present")


@pytest.fixture(scope="module")
def carla_doc():
    return json.loads(CARLA.read_text())


@needs_carla
def test_loads_carla_town(carla_doc):
    sc = load_scenario(CARLA, repair_logs=False)  # as upstream reads it (the log repairs have their own tests)
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
    assert load_scenario(CARLA, tolerance=0.01, repair_logs=False).num_segments > sc.num_segments
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
    sc = load_scenario(p, repair_logs=False)
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
    (lambda d: d["objects"][3]["heading"].__setitem__(5, "north"), "scene.json: objects[3].heading[5]: expected a number"),
    (lambda d: d["objects"][0]["position"][4].__setitem__("x", None), "scene.json: objects[0].position[4].x: expected a number"),
    (lambda d: d["objects"][2]["valid"].__setitem__(0, "yes"), "scene.json: objects[2].valid[0]: expected a boolean"),
    (lambda d: d["objects"][2].__setitem__("goalPosition", 3), "scene.json: objects[2].goalPosition: expected an object"),
    (lambda d: d["objects"][2]["position"].__setitem__(3, [1.0, 2.0]), "scene.json: objects[2].position[3]: expected an object"),
    (lambda d: d["objects"][1].__setitem__("width", [2.0]), "scene.json: objects[1].width: expected a number"),
    (lambda d: d["objects"].__setitem__(1, "car"), "scene.json: objects[1]: expected an object"),
    (lambda d: d.pop("objects"), "scene.json: objects: missing field"),
    (lambda d: d.__setitem__("roads", {}), "scene.json: roads: expected a list"),
    (lambda d: d["roads"][1].__setitem__("type", 7), "scene.json: roads[1].type: expected a string"),
])
def test_what_upstream_cannot_read_names_the_field(tmp_path, edit, message):
    """Values PufferDrive's converter fails on too (float(None), obj.get on a non-object) stay errors."""
    p = _broken(tmp_path, SMALL, edit)
    with pytest.raises(ScenarioFormatError) as e:
        load_scenario(p)
    assert str(e.value).startswith(message), str(e.value)


def _repaired(tmp_path, edit, doc=SMALL, **kw):
    p = _broken(tmp_path, doc, edit)
    with pytest.warns(ScenarioRepairWarning) as rec:
        sc = load_scenario(p, **kw)
    return sc, "\n".join(str(r.message) for r in rec)


def test_short_and_long_arrays_are_padded_and_truncated_as_upstream(tmp_path):
    def edit(d):
        del d["objects"][3]["position"][80:]  # 91 -> 80: steps 80..90 invalid
        d["objects"][1]["heading"] += [0.5] * 9  # 91 -> 100: cut back to 91
        d["objects"][4]["valid"] = d["objects"][4]["valid"][:60]
    sc, msg = _repaired(tmp_path, edit)
    ref = load_scenario(_broken(tmp_path, SMALL, lambda d: None))
    assert sc.pos.shape == ref.pos.shape == (len(SMALL["objects"]), 91, 2)
    assert not sc.valid[3, 80:].any() and (sc.valid[3, :80] == ref.valid[3, :80]).all()
    assert np.allclose(sc.pos[3, :80], ref.pos[3, :80])
    assert np.allclose(sc.heading[1], ref.heading[1]) and (sc.valid[1] == ref.valid[1]).all()
    assert not sc.valid[4, 60:].any() and (sc.valid[4, :60] == ref.valid[4, :60]).all()
    others = [i for i in range(sc.num_agents) if i not in (1, 3, 4)]
    assert (sc.valid[others] == ref.valid[others]).all() and np.allclose(sc.pos[others], ref.pos[others])
    assert "scene.json: objects[3].position: 80 entries, steps 80..90 padded as invalid" in msg
    assert "scene.json: objects[1].heading: 100 entries, truncated to the scene length 91" in msg
    assert "scene.json: objects[4].valid: 60 entries" in msg
    assert len(sc.metadata["repairs"]) == 3


def test_scene_length_is_the_common_length_or_given(tmp_path):
    def edit(d):  # the FIRST object is the odd one: the scene length must not follow it
        d["objects"][0]["position"] += [{"x": 0.0, "y": 0.0}] * 20
    sc, msg = _repaired(tmp_path, edit)
    assert sc.num_steps == 91 and "objects[0].position: 111 entries, truncated to the scene length 91" in msg
    sc, _ = _repaired(tmp_path, lambda d: None, trajectory_length=50)
    assert sc.num_steps == 50


@pytest.mark.parametrize("edit, check, note", [
    (lambda d: d["objects"][3].pop("width"), lambda sc: sc.width[3] == 0.0,
     "objects[3].width: missing field, set to 0.0 as upstream does"),
    (lambda d: d["objects"][3].pop("velocity"), lambda sc: (sc.vel[3] == 0).all() and sc.valid[3].any(),
     "objects[3].velocity: missing field, all 91 steps padded"),
    (lambda d: d["objects"][2].pop("goalPosition"), lambda sc: (sc.goal[2] == 0).all(),
     "objects[2].goalPosition: missing field, set to (0, 0)"),
    (lambda d: d["objects"][2].pop("type"), lambda sc: sc.agent_type[2] == AGENT_TYPE_ID["vehicle"],
     "objects[2].type: missing field, read as vehicle"),
    (lambda d: d["objects"][1]["velocity"][2].pop("y"), lambda sc: sc.vel[1, 2, 1] == 0.0,
     "objects[1].velocity[2].y: missing field; read as 0.0 as upstream does"),
    (lambda d: d["objects"][1]["position"][2].pop("y"), lambda sc: not sc.valid[1, 2],
     "objects[1].position[2].y: missing field; the step is marked invalid"),
    (lambda d: d["objects"][1]["position"][7].__setitem__("x", float("nan")), lambda sc: not sc.valid[1, 7],
     "objects[1].position[7].x: not finite (nan); the step is marked invalid"),
    (lambda d: d["objects"][1].__setitem__("length", "4.5"), lambda sc: sc.length[1] == 4.5,
     "objects[1].length: number given as a string '4.5', read as 4.5"),
    (lambda d: d["roads"][1].pop("type"), lambda sc: 1 not in set(sc.seg_road.tolist()),
     "roads[1].type: missing field and no usable map_element_id; element skipped"),
    (lambda d: (d["roads"][1].pop("type"), d["roads"][1].__setitem__("map_element_id", 15)),
     lambda sc: (sc.seg_type[sc.seg_road == 1] == ROAD_TYPE_ID["road_edge"]).all(),
     "roads[1].type: missing, read as 'road_edge' from map_element_id 15"),
    (lambda d: d["roads"][2]["geometry"][0].pop("y"), lambda sc: 2 in set(sc.seg_road.tolist()),
     "roads[2].geometry[0].y: missing field"),
])
def test_upstream_lenient_fields_are_repaired_and_named(tmp_path, edit, check, note):
    sc, msg = _repaired(tmp_path, edit)
    assert check(sc), note
    assert f"scene.json: {note}" in msg, msg


def test_strict_refuses_any_repair(tmp_path):
    p = _broken(tmp_path, SMALL, lambda d: d["objects"][3]["position"].pop())
    with pytest.raises(ScenarioFormatError, match=r"^scene.json: objects\[3\].position: 90 entries.*\(strict\)"):
        load_scenario(p, strict=True)


def test_clean_file_gives_no_warning(tmp_path):
    p = _broken(tmp_path, SMALL, lambda d: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sc = load_scenario(p)
    assert "repairs" not in sc.metadata


@needs_carla
def test_carla_variants_upstream_reads_load_with_repairs(tmp_path, carla_doc):
    """The real CARLA town with the quirks of exported scenes: ragged arrays, missing optional fields."""
    def edit(d):
        del d["objects"][5]["position"][70:]
        d["objects"][6]["velocity"] += d["objects"][6]["velocity"][:5]
        d["objects"][7].pop("goalPosition")
        d["roads"][0].pop("type")  # map_element_id is present in the sample
    sc, msg = _repaired(tmp_path, edit, carla_doc, repair_logs=False)
    assert sc.pos.shape == (32, 91, 2)
    assert not sc.valid[5, 70:].any() and sc.valid[5, :70].all() and sc.valid[6].all()
    assert "objects[5].position: 70 entries" in msg and "objects[6].velocity: 96 entries" in msg
    assert "objects[7].goalPosition" in msg and "roads[0].type" in msg
    assert len(np.unique(sc.seg_road)) == 470


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
