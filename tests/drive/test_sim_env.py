"""DriveEnv: layout, invariance, log replay, determinism, events, goals, rewards, roles."""

import math

import numpy as np
import pytest
import torch

from ttlab.drive.config import EnvConfig
from ttlab.drive.scenarios.pool import build_pool
from ttlab.drive.scenarios.procedural import generate_pool_scenarios
from ttlab.drive.scenarios.types import ROAD_TYPE_ID
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.geometry import point_segment_distance
from ttlab.drive.sim.grid import build_grid
from ttlab.drive.sim.reward import conflict
from ttlab.drive.sim.state import EXPERT, POLICY
from ttlab.drive.sim.toy import pad_pool, straight_road

COAST = 45  # zero accel, zero steer


def coast(env):
    return torch.full((env.num_envs, env.num_agents), COAST, dtype=torch.long)


def test_layout_and_shapes():
    pool = pad_pool([straight_road(6, seed=i) for i in range(3)])
    env = DriveEnv(EnvConfig(num_envs=3, max_agents=8, reward_conditioning=True), pool, seed=1)
    obs = env.reset()
    L = env.layout
    assert env.num_agents == 6 and env.num_actions == 91
    assert (L.partner_slots, L.partner_dim, L.road_slots, L.road_dim) == (63, 7, 200, 7)
    assert obs.shape == (3, 6, env.obs_dim) and obs.dtype == torch.float32
    assert env.obs_dim == L.ego_dim + 63 * 7 + 200 * 7 and L.ego_dim == 12
    ego, par, road = L.split(obs)
    types = road[..., L.road_type_col]
    assert set(types.unique().tolist()) <= {0.0, ROAD_TYPE_ID["lane"], ROAD_TYPE_ID["road_edge"]}
    assert (types > 0).any() and (par.abs().sum(-1) > 0).any()
    w = ego[..., 9:12]
    assert (w[..., 0] >= 0.5).all() and (w[..., 0] <= 1.5).all() and (w[..., 1:] <= 0).all()
    res = env.step(torch.randint(0, 91, (3, 6)))
    for name in ("obs", "reward", "terminals", "truncations", "removed", "trial_ended", "controlled"):
        assert getattr(res, name).shape[:2] == (3, 6), name


def _rotate_scene(sc, theta, shift):
    c, s = math.cos(theta), math.sin(theta)
    R = np.array([[c, -s], [s, c]], np.float32)
    tr = lambda p: (p @ R.T + np.asarray(shift, np.float32)).astype(np.float32)  # noqa: E731
    sc.pos = tr(sc.pos)
    sc.vel = (sc.vel @ R.T).astype(np.float32)
    sc.heading = (sc.heading + theta).astype(np.float32)
    sc.goal = tr(sc.goal)
    sc.route = tr(sc.route)
    seg = sc.seg.reshape(-1, 2, 2)
    sc.seg = tr(seg).reshape(-1, 4)
    return sc


def _sorted_rows(x):
    """Per agent, the rows of a (E, A, K, F) block sorted lexicographically (order-free comparison)."""
    x = np.round(x.numpy(), 3)
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape[:2]):
        rows = x[idx]
        out[idx] = rows[np.lexsort(rows.T[::-1])]
    return out


def test_observations_invariant_under_global_rotation_translation():
    cfg = EnvConfig(num_envs=1, max_agents=6, partner_radius=30.0, road_radius=30.0)
    a = DriveEnv(cfg, pad_pool([straight_road(6, seed=3)]), seed=0)
    b = DriveEnv(cfg, pad_pool([_rotate_scene(straight_road(6, seed=3), 0.7, (123.0, -45.0))]), seed=0)
    oa, ob = a.reset(), b.reset()
    g = torch.Generator().manual_seed(0)
    for step in range(6):
        ea, pa, ra = a.layout.split(oa)
        eb, pb, rb = b.layout.split(ob)
        assert torch.allclose(ea, eb, atol=2e-4), step
        assert torch.allclose(pa, pb, atol=2e-4), step
        assert np.allclose(_sorted_rows(ra), _sorted_rows(rb), atol=2e-3), step
        act = torch.randint(0, 91, (1, 6), generator=g)
        oa, ob = a.step(act).obs, b.step(act).obs


def test_grid_candidates_hold_every_segment_within_radius():
    pool = pad_pool([straight_road(4, lanes=3, seed=0)])
    grid = build_grid(pool, radius=20.0, cell=5.0, road_slots=200, edge_slots=16)
    pts = torch.rand(2, 50, 2) * torch.tensor([200.0, 16.0]) - torch.tensor([0.0, 8.0])
    cand, _ = grid.lookup(torch.zeros(2, dtype=torch.long), pts[..., 0], pts[..., 1])  # (2, 50, 200)
    n = int(pool.num_segments[0])
    d = point_segment_distance(pts[..., 0:1], pts[..., 1:2], pool.seg[0, :n].view(1, 1, n, 4))  # (2, 50, n)
    for e in range(2):
        for i in range(50):
            want = set(torch.nonzero(d[e, i] <= 20.0).flatten().tolist())
            got = set((cand[e, i] % grid.num_seg_slots).tolist())
            assert want <= got


def test_log_replay_reproduces_logged_positions_exactly():
    pool = pad_pool([straight_road(5, seed=2)])
    cfg = EnvConfig(num_envs=2, max_agents=5, control_mode="ego_only", init_steps=3, episode_length=50)
    env = DriveEnv(cfg, pool)
    env.reset()
    role = env.state.role
    assert (role[:, 0] == POLICY).all() and (role[:, 1:] == EXPERT).all()
    for k in range(1, 20):
        env.step(torch.randint(0, 91, (2, 5)))
        t = 3 + k
        assert torch.equal(env.state.x[:, 1:], pool.pos[0, 1:, t, 0].expand(2, 4))
        assert torch.equal(env.state.y[:, 1:], pool.pos[0, 1:, t, 1].expand(2, 4))


def _run(seed, steps=40):
    pool = pad_pool([straight_road(4, seed=i, speed=3 + i) for i in range(5)])
    env = DriveEnv(EnvConfig(num_envs=4, max_agents=4, episode_length=7, reward_conditioning=True), pool, seed=seed)
    g = torch.Generator().manual_seed(1)
    obs = [env.reset()]
    scenes = [env.scene.clone()]
    for _ in range(steps):
        r = env.step(torch.randint(0, 91, (4, 4), generator=g))
        obs.append(r.obs)
        scenes.append(env.scene.clone())
    return torch.stack(obs), torch.stack(scenes)


def test_determinism_per_seed():
    o1, s1 = _run(7)
    o2, s2 = _run(7)
    o3, s3 = _run(8)
    assert torch.equal(o1, o2) and torch.equal(s1, s2)
    assert not torch.equal(s1, s3)
    assert len(s1.unique()) > 1  # finished envs drew new scenes


def _two_cars(gap=6.0, goal_ahead=100.0, lanes=1, speed=5.0):
    sc = straight_road(2, lanes=lanes, gap=gap, speed=speed, goal_ahead=goal_ahead, seed=0)
    sc.pos[:, :, 1] = 0.0
    return sc


@pytest.mark.parametrize("how", ["ignore", "stop", "remove"])
def test_collision_behaviours(how):
    sc = straight_road(3, lanes=1, gap=6.0, goal_ahead=100.0, seed=0)
    sc.pos[:2, :, 1] = 0.0
    sc.pos[1, :, 0] = sc.pos[0, :, 0] + 5.0  # car 1 is 5 m ahead of car 0 (boxes 4.5 m long)
    sc.pos[2, :, 1] = 30.0  # car 2 far away keeps the episode going
    cfg = EnvConfig(num_envs=1, max_agents=3, collision_behavior=how, episode_length=30, box_scale=1.0)
    env = DriveEnv(cfg, pad_pool([sc]))
    env.reset()
    act = coast(env)
    act[0, 0] = 6 * 13 + 6  # car 0 accelerates into car 1; car 1 coasts
    hits, rem, term = 0, [], []
    for _ in range(10):
        act[0, 1] = 0 * 13 + 6 if how == "ignore" else COAST  # in ignore mode car 1 also brakes
        r = env.step(act)
        hits += int(r.reward[0, 0] < 0)
        rem.append(r.removed[0].tolist())
        term.append(r.terminals[0].tolist())
    assert hits > 0
    if how == "ignore":
        assert not any(any(t) for t in term) and not any(any(x) for x in rem)
    else:
        assert any(t[0] for t in term)
        assert any(x[0] for x in rem)  # out of play on the following steps
        if how == "stop":
            assert bool(env.state.stopped[0, 0]) and float(env.state.speed[0, 0]) == 0.0
        else:
            assert bool(env.state.removed[0, 0])


def test_offroad_detected_and_penalised():
    sc = straight_road(1, lanes=1, goal_ahead=200.0)
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=1, offroad_behavior="remove", reward_offroad=-1.0,
                             reward_collision=0.0), pad_pool([sc]))
    env.reset()
    act = torch.full((1, 1), 3 * 13 + 12)  # steer hard left into the road edge 2 m away
    rewards = []
    for _ in range(15):
        r = env.step(act)
        rewards.append(float(r.reward))
        if bool(r.terminals[0, 0]):
            break
    assert -1.0 in rewards and bool(env.state.removed[0, 0]) or bool(r.terminals[0, 0])


def _goal_env(behavior, goal_ahead=4.0, **kw):
    sc = straight_road(1, lanes=1, speed=5.0, goal_ahead=goal_ahead, seed=0)
    sc.pos[0, :, 1] = 0.0
    sc.route = np.stack([sc.pos[0, 0] + np.array([d, 0.0], np.float32) for d in np.arange(0, 190, 5.0)])[None]
    cfg = EnvConfig(num_envs=1, max_agents=1, goal_behavior=behavior, episode_length=60, **kw)
    return DriveEnv(cfg, pad_pool([sc]))


def test_goal_respawn_returns_to_start_and_rewards():
    env = _goal_env("respawn")
    env.reset()
    x0 = env.state.x.clone()
    rs = [float(env.step(coast(env)).reward) for _ in range(12)]
    assert rs.count(1.0) >= 2  # reached, respawned, reached again
    assert float(env.state.x) - float(x0) < 4.0 + 2.0


def test_goal_new_goal_moves_goal_ahead_on_route():
    env = _goal_env("new_goal", new_goal_distance=20.0)
    env.reset()
    g0 = float(env.state.goal_x)
    for _ in range(10):
        r = env.step(coast(env))
        if float(r.reward) > 0:
            break
    assert float(env.state.goal_x) == pytest.approx(g0 + 20.0, abs=5.0)
    assert not bool(r.terminals[0, 0])


def test_goal_stop_terminates_and_freezes():
    env = _goal_env("stop")
    env.reset()
    for _ in range(10):
        r = env.step(coast(env))
        if bool(r.terminals[0, 0]):
            break
    assert float(r.reward) == 1.0 and bool(r.terminals[0, 0])
    assert int(env.episode[0]) == 1  # its only ego left play: the env started a new episode at once


def test_goal_speed_limit_blocks_fast_reach():
    env = _goal_env("stop", goal_speed=1.0)
    env.reset()
    assert all(float(env.step(coast(env)).reward) == 0.0 for _ in range(12))


def test_truncation_at_episode_length_and_new_scene():
    env = _goal_env("respawn", goal_ahead=500.0)
    env.reset()
    tr = [bool(env.step(coast(env)).truncations[0, 0]) for _ in range(60)]
    assert tr.index(True) == 59 and sum(tr) == 1
    m = env.metrics()
    assert float(m["episodes"]) == 1.0 and float(m["length"]) == 60.0


def test_static_parked_agents_hold_pose():
    sc = straight_road(3, seed=1)
    sc.pos[2] = sc.pos[2, :1]  # parked car
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=3), pad_pool([sc]))
    env.reset()
    assert env.state.role[0].tolist() == [POLICY, POLICY, 3]
    x = env.state.x[0, 2].clone()
    for _ in range(5):
        env.step(torch.randint(0, 91, (1, 3)))
    assert torch.equal(env.state.x[0, 2], x)


def test_continuous_actions_and_jerk_dynamics_move_cars():
    pool = pad_pool([straight_road(3, lanes=1, gap=12.0, goal_ahead=500.0)])
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=3, action="continuous", dynamics="jerk"), pool)
    env.reset()
    assert env.num_actions == 2
    v0 = env.state.speed.clone()
    for _ in range(5):
        env.step(torch.tensor([[[1.0, 0.0]] * 3]))
    assert (env.state.accel > 0).all() and (env.state.speed > v0).all()
    ego = env.layout.split(env._observe(env.state))[0]
    assert (ego[..., 7] > 0).all()  # accel shown in the ego features


def test_init_steps_start_from_logged_state():
    sc = straight_road(2, lanes=1, gap=12.0)
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=2, init_steps=10), pad_pool([sc]))
    env.reset()
    assert torch.equal(env.state.x[0], torch.as_tensor(sc.pos[:, 10, 0]))
    assert int(env.t[0]) == 10


def test_progress_shaping_pays_metres_gained_toward_the_goal():
    pool = pad_pool([straight_road(4, seed=i) for i in range(2)])
    plain = DriveEnv(EnvConfig(num_envs=2, max_agents=4), pool, seed=0)
    shaped = DriveEnv(EnvConfig(num_envs=2, max_agents=4, reward_progress=0.1), pool, seed=0)
    plain.reset(), shaped.reset()
    for _ in range(5):
        st = shaped.state
        d0 = torch.hypot(st.x - st.goal_x, st.y - st.goal_y)
        ego = (st.role == POLICY) & ~st.removed & ~st.stopped
        r0, r1 = plain.step(coast(plain)).reward, shaped.step(coast(shaped)).reward
        new = shaped.state
        d1 = torch.hypot(new.x - st.goal_x, new.y - st.goal_y)
        gained = torch.where(ego, d0 - d1, torch.zeros_like(d0))
        torch.testing.assert_close(r1 - r0, 0.1 * gained, rtol=0, atol=1e-5)
        assert (gained[ego] > 0).any()  # coasting down the lane gets closer to the goal
    with pytest.raises(ValueError, match="--env.reward-progress"):
        EnvConfig(hidden_goal=True, reward_progress=0.1).validate()


def test_conflict_flags_collision_courses_and_not_passing_traffic():
    # ego 0 at the origin heading +x at 10 m/s; vehicle 1 at (15, -15) heading +y at 10 m/s: both reach (15, 0)
    # at t = 1.5 s (a crossing collision course); vehicle 2 in the oncoming lane 3.5 m to the left, heading -x
    x, y = torch.tensor([[0.0, 15.0, 40.0]]), torch.tensor([[0.0, -15.0, 3.5]])
    heading = torch.tensor([[0.0, torch.pi / 2, torch.pi]])
    speed = torch.full((1, 3), 10.0)
    vis = torch.ones(1, 3, dtype=torch.bool)
    assert conflict(x, y, heading, speed, vis, 2.0, 3.0).tolist() == [[True, True, False]]
    assert conflict(x, y, heading, speed, vis, 1.0, 3.0).tolist() == [[False, False, False]]  # 1.5 s is too far
    late = torch.tensor([[0.0, -25.0, 3.5]])  # vehicle 1 arrives 1 s after the ego: it passes behind
    assert conflict(x, late, heading, speed, vis, 2.0, 3.0).tolist() == [[False, False, False]]
    hidden = torch.tensor([[True, False, True]])  # a vehicle that is not there is no conflict
    assert conflict(x, y, heading, speed, hidden, 2.0, 3.0).tolist() == [[False, False, False]]


def test_conflict_reward_is_paid_per_tick_on_a_collision_course():
    pool = build_pool(generate_pool_scenarios(4, seed=5, num_agents=8), max_agents=8)
    kw = dict(num_envs=4, max_agents=8, goal_behavior="trial", k_trials=1, trial_length=40)
    plain = DriveEnv(EnvConfig(**kw), pool, seed=0)
    shaped = DriveEnv(EnvConfig(reward_conflict=-0.05, **kw), pool, seed=0)
    g = torch.Generator().manual_seed(0)
    flagged = 0
    for _ in range(30):
        a = torch.randint(0, plain.num_actions, (4, 8), generator=g)
        before = shaped.state
        in_play = (before.role == POLICY) & ~before.removed & ~before.stopped
        r0, r1 = plain.step(a).reward, shaped.step(a).reward
        st = shaped.state  # the step's new positions (no episode ended in these 30 ticks of 40)
        vis = (before.role != 0) & ~before.removed  # who was on the map during the step (no log replay here)
        danger = conflict(st.x, st.y, st.heading, st.speed, vis, 2.0, 3.0)
        want = torch.where(danger & in_play, torch.tensor(-0.05), torch.tensor(0.0))
        torch.testing.assert_close(r1 - r0, want, rtol=0, atol=1e-6)
        flagged += int((danger & in_play).sum())
    assert flagged > 0  # random driving in 8-vehicle scenes meets collision courses


@pytest.mark.parametrize("field", ["conflict_horizon", "conflict_radius"])
def test_conflict_geometry_must_be_positive(field):
    with pytest.raises(ValueError, match="--env." + field.replace("_", "-")):
        EnvConfig(reward_conflict=-0.05, **{field: 0.0}).validate()


def test_scene_order_cycle_plays_env_e_episode_k_on_scene_e_plus_k_envs():
    pool = build_pool(generate_pool_scenarios(5, seed=3, num_agents=4), max_agents=4)
    env = DriveEnv(EnvConfig(num_envs=2, max_agents=4, goal_behavior="trial", k_trials=1, trial_length=6,
                             scene_order="cycle"), pool, seed=0)
    env.reset()
    seen = [[int(s)] for s in env.scene]
    g = torch.Generator().manual_seed(0)
    while min(len(x) for x in seen) < 4:
        env.step(torch.randint(0, env.num_actions, (2, 4), generator=g))
        for e in range(2):
            if int(env.ep_step[e]) == 0:  # a new episode started on this env
                seen[e].append(int(env.scene[e]))
    assert [x[:4] for x in seen] == [[0, 2, 4, 1], [1, 3, 0, 2]]
    with pytest.raises(ValueError, match="--env.scene-order"):
        EnvConfig(scene_order="sequential").validate()
