"""DriveVectorEnv is a gymnasium VectorEnv: gymnasium's checks, lanes that match the simulator bit for bit, the
SAME_STEP autoreset contract (final_obs, episodes ending only where an env resets), the multi-trial flags a
memory policy needs, gymnasium's own vector wrappers, rendering and one-line errors."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import (
    check_reset_options,
    check_reset_return_info_deprecation,
    check_reset_return_type,
    check_reset_seed_determinism,
    check_seed_deprecation,
    check_space_limit,
    data_equivalence,
)
from gymnasium.utils.passive_env_checker import (
    check_action_space,
    check_observation_space,
    data_shares_objects,
    env_reset_passive_checker,
)

from ttlab.drive.config import EnvConfig
from ttlab.drive.policy import MLPPolicy
from ttlab.drive.rollout import Rollout
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.toy import pad_pool, straight_road
from ttlab.drive.vector_env import DriveVectorEnv

# the only warnings gymnasium's checks may raise: the observation features are scaled, not bounded
EXPECTED_WARNINGS = ("A Box observation space minimum value is -infinity", "A Box observation space maximum value is infinity")


def _env(seed=0, **kw):
    cfg = dict(num_envs=2, max_agents=4, episode_length=6) | kw
    return DriveEnv(EnvConfig(**cfg), pad_pool([straight_road(4, seed=i) for i in range(2)]), seed=seed)


def _trial_env(trial_length=5, seed=3, **kw):
    return _env(seed=seed, num_envs=3, goal_behavior="trial", k_trials=2, trial_length=trial_length,
                collision_behavior="remove", offroad_behavior="remove", box_scale=1.0, **kw)


def check_vector_env(envs: gym.vector.VectorEnv, seed: int = 123) -> None:
    """gymnasium 1.x has no checker for vector envs and `check_env` takes only a `gymnasium.Env`. This runs
    every `check_env` step that is defined for any env on the vector env itself, and vector versions (one
    entry per lane) of the three that assume a scalar step: the step passive check, step determinism and
    returned data not reused."""
    N = envs.num_envs
    for space in (envs.single_observation_space, envs.observation_space):
        check_observation_space(space)
        check_space_limit(space, "observation")
    for space in (envs.single_action_space, envs.action_space):
        check_action_space(space)
        check_space_limit(space, "action")
    assert isinstance(envs.metadata["autoreset_mode"], gym.vector.AutoresetMode)
    check_seed_deprecation(envs)
    check_reset_return_info_deprecation(envs)
    check_reset_return_type(envs)
    check_reset_seed_determinism(envs)
    check_reset_options(envs)
    env_reset_passive_checker(envs)
    # the comparisons check_reset_seed_determinism skips for an env without a spec
    o1, i1 = envs.reset(seed=seed)
    o2, i2 = envs.reset()
    o3, i3 = envs.reset(seed=seed)
    o4, _ = envs.reset()
    assert data_equivalence((o1, i1), (o3, i3), exact=True) and data_equivalence(o2, o4, exact=True)

    def passive_step(result):
        obs, reward, term, trunc, info = result
        assert isinstance(obs, np.ndarray) and obs.dtype == envs.single_observation_space.dtype and obs in envs.observation_space
        assert isinstance(reward, np.ndarray) and reward.shape == (N,) and np.issubdtype(reward.dtype, np.floating)
        assert np.isfinite(reward).all()
        for flag in (term, trunc):
            assert isinstance(flag, np.ndarray) and flag.shape == (N,) and flag.dtype == np.bool_
        assert isinstance(info, dict) and all(len(v) == N for v in info.values())
        return result

    # step determinism (check_step_determinism, per lane)
    envs.action_space.seed(seed)
    actions = envs.action_space.sample()
    assert actions in envs.action_space
    envs.reset(seed=seed)
    first = passive_step(envs.step(actions))
    rng = envs.unwrapped.np_random.bit_generator.state
    envs.reset(seed=seed)
    second = passive_step(envs.step(actions))
    assert envs.unwrapped.np_random.bit_generator.state == rng
    assert data_equivalence(first, second, exact=True)
    # returned data not reused (check_returned_data_not_reused, per call)
    envs.action_space.seed(seed)
    calls = [envs.reset(seed=seed)]
    for _ in range(2):
        obs, _, _, _, info = passive_step(envs.step(envs.action_space.sample()))
        calls.append((obs, info))
    calls.append(envs.reset(seed=seed))
    for a in range(len(calls)):
        for b in range(a + 1, len(calls)):
            assert not data_shares_objects(calls[a][0], calls[b][0]), f"calls {a} and {b}: observations share memory"
            assert not data_shares_objects(calls[a][1], calls[b][1]), f"calls {a} and {b}: infos share memory"


@pytest.mark.parametrize("kw", [{}, {"action": "continuous"}, {"goal_behavior": "trial", "k_trials": 2, "trial_length": 3},
                                {"reuse_obs": True}])
def test_gymnasium_checks_pass(kw):
    envs = DriveVectorEnv(_env(**kw))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_vector_env(envs)
    unexpected = [str(w.message) for w in caught if not any(e in str(w.message) for e in EXPECTED_WARNINGS)]
    assert not unexpected
    assert envs.single_observation_space.shape == (envs.env.obs_dim,) and envs.observation_space.shape == (8, envs.env.obs_dim)
    if kw.get("action") == "continuous":
        assert envs.single_action_space == gym.spaces.Box(-1, 1, (2,), np.float32) and envs.action_space.shape == (8, 2)
    else:
        assert envs.single_action_space == gym.spaces.Discrete(91)
        assert envs.action_space == gym.spaces.MultiDiscrete([91] * 8)
    envs.close()
    assert envs.closed
    with pytest.raises(RuntimeError, match="closed"):
        envs.step(np.zeros(8, np.int64))


def test_the_checker_catches_a_broken_env():
    """The vector checks fail on an env that hands out the same observation buffer twice."""

    class Reusing(DriveVectorEnv):
        def _obs(self, obs):
            if not hasattr(self, "_buf"):
                self._buf = np.empty_like(obs.reshape(self.num_envs, -1).numpy())
            self._buf[:] = obs.reshape(self.num_envs, -1).numpy()
            return self._buf

    with warnings.catch_warnings(), pytest.raises(AssertionError, match="observations share memory"):
        warnings.simplefilter("ignore")
        check_vector_env(Reusing(_env()))


def test_lanes_match_the_simulator():
    envs, ref = DriveVectorEnv(_env()), _env()
    obs, info = envs.reset(seed=0)
    np.testing.assert_array_equal(obs, ref.reset(0).reshape(8, -1).numpy())
    assert obs.dtype == np.float32 and info["controlled"].all() and not info["removed"].any()
    rng = np.random.default_rng(0)
    for _ in range(7):
        a = rng.integers(0, 91, 8)
        o, r, term, trunc, info = envs.step(a)
        res = ref.step(torch.as_tensor(a).view(2, 4))  # lane i = slot i % A of env i // A
        np.testing.assert_array_equal(o, res.obs.reshape(8, -1).numpy())
        np.testing.assert_array_equal(r, res.reward.reshape(-1).numpy())
        np.testing.assert_array_equal(trunc, res.truncations.reshape(-1).numpy())


def test_flags_align_with_the_internal_rollout():
    """info['new_episode'] / info['removed'] returned with an observation are exactly the terminals / removed
    flags the project's rollout stores beside that observation (and feeds the KV cache)."""

    torch.manual_seed(0)
    env = _trial_env()
    policy = MLPPolicy(env.layout, env.num_actions, embed=8, hidden=16)
    T = 24
    b = Rollout(env, policy, steps=T, gamma=0.9, gae_lambda=0.9, generator=torch.Generator().manual_seed(1)).collect()
    C = policy.context_len
    envs = DriveVectorEnv(_trial_env())
    obs, info = envs.reset(seed=3)
    removed_seen = new_seen = 0
    for t in range(T):
        np.testing.assert_array_equal(obs, b.obs[:, C + t].numpy())
        np.testing.assert_array_equal(info["new_episode"], b.terminals[:, C + t].numpy(), err_msg=f"step {t}")
        np.testing.assert_array_equal(info["removed"], b.removed[:, C + t].numpy(), err_msg=f"step {t}")
        np.testing.assert_array_equal(info["active"], info["controlled"] & ~info["removed"])
        removed_seen += int(info["removed"].sum())
        new_seen += int(info["new_episode"].sum()) if t else 0
        obs, _, _, _, info = envs.step(b.actions[:, t].numpy())
    assert removed_seen > 0 and new_seen > 0  # the comparison covered limbo steps and an episode boundary


def test_trial_mode_same_step_autoreset_and_final_obs():
    """Trial mode: truncated at every trial end, terminated (and truncated) at the K-th; the observation
    returned there is the next trial's first (bit-identical to the episode's first at a trial restart), and
    final_obs is the observation of the state left, i.e. what a twin env whose trials last longer returns."""
    L = 6
    envs, twin = DriveVectorEnv(_trial_env(L)), DriveVectorEnv(_trial_env(L + 1), final_obs=False)
    obs, info = envs.reset(seed=5)
    twin.reset(seed=5)
    start = obs.copy()
    rng = np.random.default_rng(1)
    ends = []
    for t in range(2 * L):
        a = rng.integers(0, 91, envs.num_envs)
        obs, reward, term, trunc, info = envs.step(a)
        tw_obs, tw_reward, *_ = twin.step(a)
        done = term | trunc
        if not done.any():
            assert "final_obs" not in info
            if t < L:
                np.testing.assert_array_equal(obs, tw_obs)
            continue
        ends.append(t)
        assert (done == info["controlled"]).all() and (done == info["_final_obs"]).all()
        assert (info["trial_ended"] == done).all()
        if t == L - 1:  # trial 0 timed out: the world is rewound, the episode goes on
            assert trunc.all() and not term.any() and not info["new_episode"].any() and (info["trial"] == 1).all()
            np.testing.assert_array_equal(obs, start)  # trial-start observations of trial k and trial 0
            np.testing.assert_array_equal(info["final_obs"], tw_obs)  # the twin did not reset there
            np.testing.assert_array_equal(reward, tw_reward)
        else:  # the K-th trial ended: a new episode on a freshly drawn scene
            assert term.all() and trunc.all() and info["new_episode"].all() and (info["trial"] == 0).all()
    assert ends == [L - 1, 2 * L - 1]  # no env left earlier (every ego out of play) under these actions


def test_other_modes_end_a_lane_episode_only_where_its_env_resets():
    """Outside trial mode an ego removed mid-episode sits in limbo (removed, reward 0) until its env's episode
    ends; only then is its episode terminated, and the egos still in play at the time limit are truncated."""
    env = _env(num_envs=4, max_agents=4, episode_length=30, collision_behavior="remove", offroad_behavior="remove")
    envs = DriveVectorEnv(env)
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    limbo = ended = 0
    for _ in range(70):
        _, reward, term, trunc, info = envs.step(rng.integers(0, 91, envs.num_envs))
        resets = np.repeat(env.trial_step.numpy() == 0, env.num_agents)  # per lane: its env reset on this step
        assert not ((term | trunc) & ~resets).any()
        assert not (term & trunc).any()
        assert (reward[info["was_removed"]] == 0).all()
        limbo += int((info["removed"] & ~resets).sum())
        ended += int((term | trunc).sum())
        if (term | trunc).any():
            assert (info["_final_obs"] == (term | trunc)).all()
    assert limbo > 0 and ended > 0  # lanes did wait in limbo, and episodes did end


def test_record_episode_statistics_counts_lane_episodes():
    """gymnasium's vector RecordEpisodeStatistics (SAME_STEP aware) reports each lane episode's return and length,
    equal to what the loop adds up itself."""
    envs = gym.wrappers.vector.RecordEpisodeStatistics(DriveVectorEnv(_trial_env(4)))
    envs.reset(seed=0)
    N = envs.num_envs
    ret, length = np.zeros(N), np.zeros(N, np.int64)
    rng = np.random.default_rng(0)
    seen = 0
    for _ in range(12):
        _, r, term, trunc, info = envs.step(rng.integers(0, 91, N))
        ret += r
        length += 1
        done = term | trunc
        if done.any():
            np.testing.assert_allclose(info["episode"]["r"][done], ret[done], rtol=1e-6)
            np.testing.assert_array_equal(info["episode"]["l"][done], length[done])
            ret[done], length[done] = 0, 0
            seen += int(done.sum())
    assert seen == 3 * N


def test_unseeded_resets_draw_new_scenes_reproducibly():
    pool = pad_pool([straight_road(4, seed=i) for i in range(8)])
    make = lambda: DriveVectorEnv(DriveEnv(EnvConfig(num_envs=4, max_agents=4), pool, seed=7))  # noqa: E731
    a, b = make(), make()
    scenes = []
    for _ in range(3):
        oa, _ = a.reset()
        ob, _ = b.reset()
        np.testing.assert_array_equal(oa, ob)  # the same construction seed gives the same sequence
        scenes.append(a.env.scene.tolist())
    assert len({tuple(s) for s in scenes}) > 1  # and each unseeded reset draws anew


def test_render_one_frame_per_lane():
    envs = DriveVectorEnv(_env(), render_mode="rgb_array", render_size=64)
    envs.reset(seed=0)
    frames = envs.render()
    assert len(frames) == envs.num_envs and frames[0].shape == (64, 64, 3) and frames[0].dtype == np.uint8
    assert frames[0] is frames[3] and frames[0] is not frames[4]  # lanes of one env share its frame
    assert frames[0].std() > 0
    assert envs.metadata["render_fps"] == 10
    assert DriveVectorEnv(_env()).render() is None


def test_bad_input_is_one_clear_error():
    envs = DriveVectorEnv(_env())
    envs.reset(seed=0)
    for bad, match in [(np.zeros(7, np.int64), r"expected \(8,\) integer actions"),
                       (np.zeros(8, np.float32), r"of float32"), (np.full(8, 91), r"outside \[0, 91\)")]:
        with pytest.raises(ValueError, match=match) as e:
            envs.step(bad)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="options"):
        envs.reset(options={"scene": 1})
    with pytest.raises(ValueError, match="render_mode"):
        DriveVectorEnv(_env(), render_mode="human")
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        DriveVectorEnv.make("nope")
    with pytest.raises(ValueError, match="no field 'num_lanes'"):
        DriveVectorEnv.make("debug", "procedural:n=2,agents=4", num_lanes=3)


def test_make_builds_from_a_preset_and_a_scenario_source():
    envs = DriveVectorEnv.make("trial_k2", "procedural:n=3,agents=4,families=straight", num_envs=2, max_agents=4,
                               trial_length=5, seed=1)
    obs, info = envs.reset(seed=1)
    assert envs.num_envs == 8 and obs.shape == (8, envs.env.obs_dim) and envs.env.cfg.k_trials == 2
    assert info["controlled"].any()
