"""Real scenes read right: log repairs, log replay through our own dynamics, and offroad / goal events on the
CARLA Town02 sample (Waymo-format JSON), against the same checks on procedural scenes."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from ttlab.drive.bc import tracking_actions
from ttlab.drive.evaluate import EvalConfig, env_config, held_out
from ttlab.drive.presets import REAL_HELD_OUT, REAL_TRAIN, real_scene, selfplay_yield
from ttlab.drive.replay import replay_fidelity, track_log
from ttlab.drive.scenarios.log_repair import (
    MAX_TURN,
    first_overlap,
    first_teleport,
    hold_heading_spikes,
    wrap,
)
from ttlab.drive.scenarios.pool import build_pool, load_scenarios
from ttlab.drive.scenarios.select import EgoSelection
from ttlab.drive.scenarios.types import ROAD_TYPE_ID
from ttlab.drive.scenarios.waymo_json import ScenarioFormatError, ScenarioRepairWarning, load_scenario
from ttlab.drive.sim.dynamics import bicycle_step
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.geometry import box_segment_overlap
from ttlab.drive.sim.state import POLICY

CARLA = Path(__file__).resolve().parents[3] / "shared" / "data" / "carla_town02_womd.json"
needs_carla = pytest.mark.skipif(not CARLA.is_file(), reason="shared CARLA sample not present")


def _quiet_load(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScenarioRepairWarning)
        return load_scenario(CARLA, **kw)


@pytest.fixture(scope="module")
def town():
    return _quiet_load()


@pytest.fixture(scope="module")
def town_raw():
    return _quiet_load(repair_logs=False)


def _selfplay_env(scenes, envs=1, **kw) -> DriveEnv:
    """The self-play evaluation env of the selfplay_yield preset (every vehicle of the scene drives)."""
    cfg = env_config(EvalConfig(mode="self_play", num_envs=envs, episodes=1), selfplay_yield().env)
    return DriveEnv(dataclasses.replace(cfg, **kw), build_pool(scenes), "cpu", seed=0)


# ---- the repairs, on hand-made logs ----

def _southbound(steps=12):
    """A car driving south at 1 m/s whose exporter wrote heading 0 at the ticks it did not move."""
    y = -np.cumsum([0.0, 0.1, 0.0, 0.1, 0.2, 0.0, 0.0, 0.1, 0.1, 0.0, 0.1, 0.1][:steps])
    pos = np.stack([np.zeros(steps), y], 1)
    moved = np.concatenate([[True], np.diff(y) != 0])
    heading = np.where(moved, -np.pi / 2, 0.0).astype(np.float32)
    heading[0] = 0.0  # the first tick too
    return pos, heading, np.ones(steps, bool)


def test_heading_spikes_from_zero_displacements_are_held_and_real_turns_kept():
    pos, heading, valid = _southbound()
    fixed, steps = hold_heading_spikes(pos, heading, valid)
    assert np.allclose(fixed, -np.pi / 2) and steps == [int(t) for t in np.flatnonzero(heading == 0.0)]
    # a genuine quarter turn over 10 ticks (0.16 rad per tick) is left alone
    a = np.linspace(0, np.pi / 2, 11)
    arc = np.stack([np.sin(a), 1 - np.cos(a)], 1) * 10.0
    fixed, steps = hold_heading_spikes(arc, a.astype(np.float32), np.ones(11, bool))
    assert steps == [] and np.allclose(fixed, a)


def test_teleports_and_logged_overlaps_are_found():
    pos = np.stack([np.arange(10) * 0.5, np.zeros(10)], 1)
    assert first_teleport(pos, np.ones(10, bool)) is None
    pos[6:] += 15.0
    assert first_teleport(pos, np.ones(10, bool)) == 6
    # two cars in adjacent lanes (3.5 m apart) never overlap; one crossing through the other's path does
    T = 20
    a = np.stack([np.arange(T) * 1.0, np.zeros(T)], 1)
    b = np.stack([np.arange(T) * 1.0, np.full(T, 3.5)], 1)
    c = np.stack([np.full(T, 10.0), np.arange(T) * 1.0 - 10.0], 1)
    h = np.zeros((3, T), np.float32)
    h[2] = np.pi / 2
    size = np.array([4.5, 4.5, 4.5]), np.array([2.0, 2.0, 2.0])
    assert first_overlap(np.stack([a, b]), h[:2], size[0][:2], size[1][:2], np.ones((2, T), bool)) is None
    t, i, j = first_overlap(np.stack([a, b, c]), h, *size, np.ones((3, T), bool))
    assert (i, j) == (0, 2) and 7 <= t <= 10


# ---- the real town as loaded ----

@needs_carla
def test_town02_repairs_are_named_and_leave_a_drivable_log(town, town_raw):
    reps = town.metadata["repairs"]
    assert any("a teleport" in r for r in reps) and any("zero displacement" in r for r in reps)
    assert any("drove through each other" in r for r in reps)
    for sc, drivable in ((town, True), (town_raw, False)):
        ok = sc.valid[:, 1:] & sc.valid[:, :-1]
        step = np.linalg.norm(np.diff(sc.pos, axis=1), axis=-1)[ok]
        turn = np.abs(wrap(np.diff(sc.heading, axis=1)))[ok]
        assert (step.max() <= 6.0 and turn.max() <= MAX_TURN) == drivable
    assert town_raw.valid.all() and not town.valid.all()
    with pytest.raises(ScenarioFormatError, match="teleport"):
        load_scenario(CARLA, strict=True)


@needs_carla
def test_town02_logged_boxes_stay_on_the_road_at_upstreams_box_scale(town, town_raw):
    """Offroad is the box touching a road edge. The repaired log's boxes, at the 0.7 scale GPUDrive and PufferDrive
    use, never touch one; the raw log's full boxes do (heading spikes turn them across the kerb)."""
    def touching(sc, scale):
        edge = torch.as_tensor(sc.seg[sc.seg_type == ROAD_TYPE_ID["road_edge"]])  # (S, 4)
        p, h = torch.as_tensor(sc.pos), torch.as_tensor(sc.heading)
        ln = torch.as_tensor(sc.length).view(-1, 1, 1) * scale
        wd = torch.as_tensor(sc.width).view(-1, 1, 1) * scale
        hit = box_segment_overlap(p[..., :1], p[..., 1:], h.unsqueeze(-1), ln, wd, edge).any(-1)  # (N, T)
        return int((hit & torch.as_tensor(sc.valid)).any(1).sum())

    assert touching(town, 0.7) == 0
    assert touching(town_raw, 1.0) >= 8


# ---- log replay through our own dynamics ----

@needs_carla
@pytest.mark.parametrize("anchor", ["time", "path"])
def test_log_replay_through_our_dynamics_tracks_town02_per_tick(town, anchor):
    out = track_log(_selfplay_env([town]), episodes=1, anchor=anchor)
    assert out["ego_episodes"] == 26  # 32 vehicles: 3 parked, 3 start within 2 m of their (repaired) goal
    err, head = out["pos_err"], out["heading_err"]
    assert len(err) > 1000
    if anchor == "time":  # the log at the same tick: what the dynamics and the 91-action grid cost
        assert float(err.mean()) < 0.3 and float(err.max()) < 1.0 and float(head.mean()) < 0.15
    assert out["goal_rate"] == 1.0 and out["collision_rate"] == out["offroad_rate"] == 0.0


@needs_carla
def test_raw_town02_log_is_not_trackable(town_raw):
    """Without the repairs the same replay fails: teleports leave the expert metres behind its log."""
    out = track_log(_selfplay_env([town_raw]), episodes=1, anchor="time")
    assert float(out["pos_err"].max()) > 5.0
    assert out["goal_rate"] < 0.95 or out["collision_rate"] + out["offroad_rate"] > 0.02


def test_log_replay_through_our_dynamics_tracks_procedural_scenes_per_tick():
    out = track_log(_selfplay_env(load_scenarios("procedural:n=16,agents=8,seed=1000"), envs=16), anchor="time")
    err = out["pos_err"]
    assert float(err.mean()) < 0.15 and float(torch.quantile(err, 0.99)) < 1.0
    assert out["goal_rate"] >= 0.95 and out["collision_rate"] + out["offroad_rate"] <= 0.02


# ---- offroad and goal events on the real map ----

@needs_carla
def test_town02_goal_events_fire_within_the_goal_radius(town):
    env = _selfplay_env([town], offroad_behavior="ignore", collision_behavior="ignore")
    env.reset()
    ego = env.state.role[0] == POLICY
    reached = torch.zeros_like(ego)
    for _ in range(91):
        st = env.state
        act = tracking_actions(env, "time")
        # the pose this tick's dynamics give (env.step resets the scene after the last ego's goal)
        x, y, _, _ = bicycle_step(st.x, st.y, st.heading, st.speed, env.tables[0][act], env.tables[1][act],
                                  st.length, 0.1, env.cfg.limits.max_speed)
        d = torch.hypot(x - st.goal_x, y - st.goal_y)[0]  # (A,)
        live = (st.role[0] == POLICY) & ~st.removed[0]
        env.step(act)
        goal = env.last_events["goal"][0]
        assert torch.equal(goal, live & (d <= env.cfg.goal_radius))  # the event is exactly "within the radius"
        reached |= goal
        if int(env.trial_step[0]) == 0:
            break
    assert bool(reached[ego].all())


@needs_carla
def test_town02_offroad_fires_when_egos_steer_off_the_road(town):
    """Full throttle with the wheel at full lock leaves the road: offroad events on the real map's edges."""
    env = _selfplay_env([town], offroad_behavior="ignore", collision_behavior="ignore", control_mode="all")
    env.reset()
    ego = env.state.role[0] == POLICY
    off = torch.zeros_like(ego)
    act = torch.full_like(env.state.role, 6 * 13 + 12)  # accel +4, steer +max
    for _ in range(60):
        env.step(act)
        off |= env.last_events["offroad"][0]
    assert int(off[ego].sum()) >= int(ego.sum()) // 2


# ---- ego selections: which vehicles of a real scene drive ----

def test_ego_selection_options_parse_and_bad_ones_name_the_source():
    sel = EgoSelection.parse("egos=odd&split=each&view=8&repeat=3", "t.json?x")
    assert (sel.egos, sel.split, sel.view, sel.repeat) == ("odd", "each", 8, 3)
    for bad in ("egos=left", "split=some", "view=1", "repeat=0", "view=8", "colour=red", "repeat=x"):
        with pytest.raises(ValueError, match="t.json"):
            EgoSelection.parse(bad, "t.json")


@needs_carla
def test_town02_held_out_vehicles_never_drive_in_the_training_views(town):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScenarioRepairWarning)
        train, held = load_scenarios(real_scene(REAL_TRAIN)), load_scenarios(real_scene(REAL_HELD_OUT))
    assert len(train) == 16 * 16 and all(s.num_agents == 8 and int((~s.expert).sum()) == 1 for s in train)
    # the views' egos are the even vehicles: match each view's ego to the town's vehicle by its logged track
    ego_ids = set()
    for s in train[:16]:
        i = int(np.flatnonzero(~s.expert)[0])
        ego_ids.add(int(np.flatnonzero(np.abs(town.pos - s.pos[i]).max((1, 2)) < 1e-6)[0]))
    assert ego_ids == set(range(0, 32, 2))
    (whole,) = held
    assert whole.num_agents == 32 and np.array_equal(~whole.expert, np.arange(32) % 2 == 1)


def test_held_out_of_a_mixed_source_keeps_its_procedural_parts():
    assert held_out("procedural:n=4,seed=0;t.json?egos=even&split=each", 0) == "procedural:n=4,seed=1000"
    with pytest.raises(ValueError, match="no procedural part"):
        held_out("a.json;b.json", 0)


def test_replay_fidelity_measures_the_expert_on_a_source():
    row = replay_fidelity(selfplay_yield().env, load_scenarios("procedural:n=2,agents=4,seed=3"), 2, 1, "time")
    assert row["ego_episodes"] > 0 and 0.0 <= row["pos_err_mean_m"] <= row["pos_err_p99_m"] <= row["pos_err_max_m"]
    assert row["goal_rate"] >= 0.9 and row["collision_plus_offroad"] <= 0.1
