"""The native CPU kernels (csrc/observe.c, csrc/contact.c) against the torch reference (observe.py, contact.py)."""

import ctypes

import pytest
import torch

from ttlab.common.data import shared_data_file
from ttlab.drive.config import EnvConfig
from ttlab.drive.scenarios import build_pool, generate, generate_pool_scenarios
from ttlab.drive.scenarios.waymo_json import load_scenario
from ttlab.drive.sim import native
from ttlab.drive.sim.contact import contacts
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.observe import ObsInputs, ObsSettings, observe

CARLA = shared_data_file("carla_town02_womd.json", required=False)  # None when the sample is absent
pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler for the native kernel")


def _run(env: DriveEnv, steps: int, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        env.step(torch.randint(0, env.num_actions, (env.num_envs, env.num_agents), generator=g))


def _both(env: DriveEnv) -> tuple[torch.Tensor, torch.Tensor]:
    """The env's current observation from the torch reference and from the native kernel."""
    st, cfg = env.state, env.cfg
    inp = ObsInputs(x=st.x, y=st.y, heading=st.heading, speed=st.speed, length=st.length, width=st.width,
                    goal_x=st.goal_x, goal_y=st.goal_y, collided=st.collided, offroad=st.offroad, accel=st.accel,
                    steer=st.steer, visible=env._visible(st),
                    rc_weights=env.weights if cfg.reward_conditioning else None,
                    candidates=env.view.candidates[env.scene] if cfg.hidden_goal else None, priority=env.priority)
    settings = ObsSettings(partner_slots=cfg.partner_slots, partner_radius=cfg.partner_radius,
                           road_slots=cfg.road_slots, road_radius=cfg.road_radius, max_accel=cfg.limits.max_accel,
                           max_steer=cfg.limits.max_steer, hide_goal=cfg.hidden_goal,
                           partner_controls=cfg.partner_controls)
    return observe(env.grid, env.scene, inp, settings), native.observe(env.grid, env.scene, inp, settings)


@pytest.mark.parametrize("extra", [{}, {"reward_conditioning": True}, {"partner_slots": 5, "partner_radius": 80.0},
                                   {"partner_controls": True}, {"partner_controls": True, "partner_slots": 5},
                                   {"priority": True, "partner_controls": True, "partner_slots": 5}])
def test_native_matches_torch_on_procedural_scenes(extra):
    pool = build_pool(generate_pool_scenarios(6, seed=3, num_agents=12), max_agents=12)
    env = DriveEnv(EnvConfig(num_envs=6, max_agents=12, episode_length=15, backend="torch", **extra), pool, seed=1)
    for _ in range(4):
        _run(env, 7)
        ref, nat = _both(env)
        assert ref.shape == nat.shape
        torch.testing.assert_close(nat, ref, rtol=0, atol=1e-5)
        # the test sees real content: partners and road segments are present
        ego, par, road = env.layout.split(ref)
        assert (par.abs().sum(-1) > 0).any() and (road[..., env.layout.road_type_col] > 0).any()


@pytest.mark.parametrize("controls", [False, True])
def test_native_nearest_partner_selection_in_a_crowd(controls):  # with controls: also the priority token
    """More others than partner slots: the kernel keeps the same k nearest, nearest first, as torch.topk."""
    pool = build_pool(generate_pool_scenarios(2, seed=1, num_agents=40), max_agents=40)
    env = DriveEnv(EnvConfig(num_envs=2, max_agents=40, partner_slots=10, partner_controls=controls,
                             priority=controls, backend="torch"), pool, seed=0)
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        st = env.state
        st.x = st.x[:, :1] + 30 * torch.rand(st.x.shape, generator=g)  # a dense 30 m crowd: many ranks to get right
        st.y = st.y[:, :1] + 30 * torch.rand(st.y.shape, generator=g)
        ref, nat = _both(env)
        torch.testing.assert_close(nat, ref, rtol=0, atol=1e-5)
        par = env.layout.split(ref)[1]
        assert (par.abs().sum(-1) > 0).sum(-1).min() >= 5  # most slots filled


@pytest.mark.parametrize("kc", [8, 2])
def test_native_contacts_match_torch(kc):
    """Collision and offroad flags agree exactly on crowds where both events happen often."""
    pool = build_pool(generate_pool_scenarios(3, seed=2, num_agents=30), max_agents=30)
    env = DriveEnv(EnvConfig(num_envs=3, max_agents=30, backend="torch"), pool, seed=0)
    g = torch.Generator().manual_seed(1)
    hits = torch.zeros(2)
    for _ in range(5):
        st = env.state
        x = st.x[:, :1] + 25 * torch.rand(st.x.shape, generator=g)
        y = st.y[:, :1] + 25 * torch.rand(st.y.shape, generator=g)
        h = 6.3 * torch.rand(st.x.shape, generator=g)
        vis = torch.rand(st.x.shape, generator=g) > 0.1
        args = (env.grid, env.scene, x, y, h, st.length, st.width, vis)
        ref = contacts(*args, candidates=kc)
        nat = native.contacts(*args, candidates=kc)
        assert torch.equal(nat[0], ref[0]) and torch.equal(nat[1], ref[1])
        assert not (nat[0] & ~vis).any() and not (nat[1] & ~vis).any()
        hits += torch.tensor([ref[0].float().mean(), ref[1].float().mean()])
    assert (hits > 0.05).all()  # both kinds of events are frequent in this sample
    assert (hits < 4.5).all()  # and so are non-events


def test_native_matches_torch_in_hidden_goal_mode():
    pool = build_pool([generate("hidden_goal", s, 5) for s in range(3)])
    cfg = EnvConfig(num_envs=3, max_agents=5, goal_behavior="trial", k_trials=2, trial_length=20, hidden_goal=True,
                    backend="torch")
    env = DriveEnv(cfg, pool, seed=0)
    _run(env, 9)
    ref, nat = _both(env)
    torch.testing.assert_close(nat, ref, rtol=0, atol=1e-5)


@pytest.mark.skipif(CARLA is None, reason="shared CARLA sample not present")
def test_native_matches_torch_on_the_carla_town():
    pool = build_pool([load_scenario(CARLA)], max_agents=32)
    env = DriveEnv(EnvConfig(num_envs=2, max_agents=32, control_mode="all", backend="torch"), pool, seed=0)
    _run(env, 12)
    ref, nat = _both(env)
    torch.testing.assert_close(nat, ref, rtol=0, atol=1e-5)
    assert (ref != 0).float().mean() > 0.05


def test_env_backends_step_alike():
    """The whole step on native and torch backends: same rewards and flags, obs within 1e-5."""
    pool = build_pool(generate_pool_scenarios(8, seed=5, num_agents=10), max_agents=10)
    cfg = dict(num_envs=4, max_agents=10, episode_length=12, collision_behavior="remove", offroad_behavior="remove")
    a = DriveEnv(EnvConfig(backend="native", **cfg), pool, seed=2)
    b = DriveEnv(EnvConfig(backend="torch", **cfg), pool, seed=2)
    assert (a.backend, b.backend) == ("native", "torch")
    torch.testing.assert_close(a.reset(), b.reset(), rtol=0, atol=1e-5)
    g = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(30):
        act = torch.randint(0, 91, (4, 10), generator=g)
        ra, rb = a.step(act), b.step(act)
        for name in ("reward", "terminals", "truncations", "removed", "controlled"):
            assert torch.equal(getattr(ra, name), getattr(rb, name)), name
        torch.testing.assert_close(ra.obs, rb.obs, rtol=0, atol=1e-5)
        ended += int(ra.truncations.any() or ra.terminals.any())
    assert ended > 0  # episodes ended and envs reset onto new scenes inside the window


def test_reuse_obs_writes_one_buffer():
    pool = build_pool(generate_pool_scenarios(2, seed=0, num_agents=6), max_agents=6)
    env = DriveEnv(EnvConfig(num_envs=2, max_agents=6, reuse_obs=True), pool, seed=0)
    o0 = env.reset()
    first = o0.clone()
    o1 = env.step(torch.full((2, 6), 45)).obs
    assert o1.data_ptr() == o0.data_ptr() and not torch.equal(o1, first)
    fresh = DriveEnv(EnvConfig(num_envs=2, max_agents=6), pool, seed=0)
    assert torch.equal(fresh.reset(), first)
    assert torch.equal(fresh.step(torch.full((2, 6), 45)).obs, o1)


def test_fresh_build_into_an_empty_cache(tmp_path, monkeypatch):
    """The build step itself (the dev cache is usually warm): compiles, names the .so by hash, reuses it."""
    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path))
    so = native.build()
    assert so.parent == tmp_path / "native" and so.suffix == ".so" and so.stat().st_size > 0
    lib = ctypes.CDLL(str(so))
    assert hasattr(lib, "ttlab_observe_partner_road") and hasattr(lib, "ttlab_contacts")
    mtime = so.stat().st_mtime_ns
    assert native.build() == so and so.stat().st_mtime_ns == mtime  # cached: not rebuilt


def test_build_failure_names_the_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("TTLAB_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    bad = tmp_path / "cc"
    bad.write_text("#!/bin/sh\necho 'cc: fatal error: simulated' >&2\nexit 1\n")
    bad.chmod(0o755)
    monkeypatch.setenv("CC", str(bad))
    with pytest.raises(native.NativeUnavailable, match="simulated"):
        native.build()
    assert not list((tmp_path / "native").glob("*.so"))  # nothing half-written is left in the cache


def test_auto_backend_falls_back_to_torch_with_a_warning(monkeypatch):
    def fail():
        raise native.NativeUnavailable("no compiler here")

    monkeypatch.setattr(native, "load", fail)
    pool = build_pool(generate_pool_scenarios(2, seed=0, num_agents=4), max_agents=4)
    with pytest.warns(UserWarning, match="no compiler here"):
        env = DriveEnv(EnvConfig(num_envs=2, max_agents=4), pool)
    assert env.backend == "torch"
    with pytest.raises(native.NativeUnavailable):
        DriveEnv(EnvConfig(num_envs=2, max_agents=4, backend="native"), pool)
