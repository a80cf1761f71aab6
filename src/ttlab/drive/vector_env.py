"""`DriveVectorEnv`: the driving simulator as a `gymnasium.vector.VectorEnv`, numpy in and out.

    envs = DriveVectorEnv.make("trial_k2", "procedural:n=64", num_envs=8, max_agents=8, seed=0)
    obs, info = envs.reset(seed=0)                     # obs (N, obs_dim) float32, N = 8 x 8 lanes
    obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())

Lanes. Every agent slot of every simulated env is one sub-environment ("lane"): `num_envs = N = E x A`,
lane `i` is slot `i % A` of env `i // A` (the row order of the trainer's buffers). The simulator steps all
lanes at once; a lane is a policy-controlled vehicle (`info["controlled"]`) or an inert slot (a parked or
log-replayed vehicle, or padding: its action is ignored, its reward is 0, it never ends an episode). A new
scene can change which lanes are controlled. Spaces: a lane observes `Box(-inf, inf, (obs_dim,), float32)`
(features are scaled but not bounded) and acts in `Discrete(91)` (7 longitudinal x 13 steering commands;
91 x M with exit intent) or `Box(-1, 1, (2,), float32)` (continuous; the simulator clamps to the box).

Episodes of a lane, and the multi-trial contract. A lane's episode ends exactly when its env resets:
- trial mode (`goal_behavior="trial"`): each of the K trials is one lane episode. `truncated` at every trial
  end (timeout, or every ego out of play), when the world is rewound to the episode's start; `terminated`
  (with `truncated`, as the simulator reports it) when the K-th trial ends and a new scene is drawn.
  A memory policy keeps its state across a trial end and resets it only where `info["new_episode"]`.
- other modes: one lane episode per env episode; `truncated` for egos still in play when the env's
  `episode_length` runs out, `terminated` for egos that left play for good earlier (removed or stopped).
An ego that leaves play mid-episode (goal, collision or offroad with behaviour "remove"/"stop") is
`info["removed"]` until its env resets: an absorbing stretch with reward 0 whose actions are ignored.
Learners should mask those steps and stop bootstrapping into them (`info["active"]` = controlled and
not removed), as the project's own PPO does. `goal_behavior="respawn"` is a continuing task: reaching
the goal sends the ego back to its start without ending the episode.

Autoreset: `AutoresetMode.SAME_STEP`, because that is what the simulator does: an env that ends a trial
or an episode is rewound or redrawn inside the same `step`, and the observation returned for its lanes is
the first one of their next episode. The observation of the state they left is `info["final_obs"]`
(a dense (N, obs_dim) array, valid where `info["_final_obs"]`; one extra observation pass on steps where
an env resets, skipped with `final_obs=False`). There is no `final_info`.

Info (all arrays of length N, aligned with the observation returned unless said otherwise):
  controlled   bool   the lane holds a policy-controlled vehicle;
  removed      bool   the vehicle is out of play for the step about to be taken (limbo: mask it, a memory
                      policy must not attend to it);
  active       bool   controlled and not removed: the lanes whose next action matters;
  new_episode  bool   this observation starts a new (multi-trial) episode: reset memory / positional index;
  trial        int64  the trial index k of this observation (0 outside trial mode);
  was_removed  bool   (step only) the vehicle was out of play during the step just taken;
  trial_ended  bool   (step only) its env's trial ended on this step (trial mode);
  final_obs, _final_obs   (step only, when some lane's episode ended) see above.

`render()` (with `render_mode="rgb_array"`) draws each simulated env once, top-down, and returns one frame
per lane (lanes of one env share their env's frame), as `gymnasium.wrappers.vector.RecordVideo` expects.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ttlab.drive.config import EnvConfig
from ttlab.drive.render import Recorder
from ttlab.drive.scenarios.pool import load_pool
from ttlab.drive.sim.env import DriveEnv


def _np(x: torch.Tensor) -> np.ndarray:
    """(E, A, ...) device tensor -> (E*A, ...) numpy array (a host copy off CPU; a view of a fresh tensor on CPU)."""
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]).cpu().numpy()


def debug() -> EnvConfig:
    """Tiny: 2 envs x 8 agents, short episodes (tests)."""
    return EnvConfig(num_envs=2, max_agents=8, episode_length=20, trial_length=20)


def trial_k2() -> EnvConfig:
    """Two-trial episodes with removal on collision and offroad."""
    return EnvConfig(goal_behavior="trial", k_trials=2, trial_length=91, collision_behavior="remove",
                     offroad_behavior="remove")


ENV_PRESETS = {"debug": debug, "default": EnvConfig, "trial_k2": trial_k2}
"""Simulator settings `DriveVectorEnv.make` knows by name."""

class DriveVectorEnv(VectorEnv):
    """A gymnasium vector env with one lane per agent slot of a `DriveEnv` (see the module docstring)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, env: DriveEnv, *, final_obs: bool = True, render_mode: str | None = None,
                 render_size: int = 256):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"DriveVectorEnv: render_mode={render_mode!r}, expected None or 'rgb_array'")
        self.env = env
        self.num_envs = env.num_envs * env.num_agents
        self.single_observation_space = spaces.Box(-np.inf, np.inf, (env.obs_dim,), np.float32)
        if env.cfg.action == "discrete":
            self.single_action_space: spaces.Space = spaces.Discrete(env.num_actions)
        else:
            self.single_action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**type(self).metadata, "render_fps": round(1.0 / float(env.pool.dt))}
        self.render_mode, self.render_size = render_mode, render_size
        env.keep_final_obs = final_obs
        # unseeded resets draw the simulator's seed from this generator, itself seeded by the env's own seed
        self._np_random, self._np_random_seed = seeding.np_random(env.seed)
        self._ego = env.controlled  # (E, A) egos of the step about to be taken (roles change only at resets)
        self._recorders: list[Recorder] | None = None

    @classmethod
    def make(cls, config: EnvConfig | str = "default", scenarios: str = "procedural:n=64", *,
             device: str | torch.device = "cpu", seed: int = 0, final_obs: bool = True,
             render_mode: str | None = None, **overrides: Any) -> DriveVectorEnv:
        """Build the simulator and wrap it: `config` an EnvConfig or a preset name (`ENV_PRESETS`),
        `scenarios` any scenario source (a JSON file or folder, a converted cache, 'procedural:...'),
        `overrides` EnvConfig fields (e.g. num_envs=8, max_agents=16)."""
        if isinstance(config, str):
            if config not in ENV_PRESETS:
                raise ValueError(f"DriveVectorEnv.make: unknown preset {config!r}; presets: {', '.join(ENV_PRESETS)}")
            config = ENV_PRESETS[config]()
        for k, v in overrides.items():
            if not hasattr(config, k):
                raise ValueError(f"DriveVectorEnv.make: EnvConfig has no field {k!r}")
            setattr(config, k, v)
        env = DriveEnv(config, load_pool(scenarios, device), device=device, seed=seed)
        return cls(env, final_obs=final_obs, render_mode=render_mode)

    # ---- the gymnasium API ----
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Start every env on a new episode. `seed` seeds the simulator (scenes, hidden goals, reward weights are
        pure functions of it); without one, the next seed is drawn from `np_random` (new scenes each time)."""
        self._check_open()
        if options:
            raise ValueError(f"DriveVectorEnv.reset: options {sorted(options)} are not supported")
        super().reset(seed=seed)
        sim_seed = int(seed) if seed is not None else int(self.np_random.integers(2**31 - 1))
        obs = self.env.reset(sim_seed)  # (E, A, obs_dim)
        self._ego = self.env.controlled
        self._recorders = None
        return self._obs(obs), self._info(self._ego)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        self._check_open()
        env, ego = self.env, self._ego
        res = env.step(self._actions(actions))
        reset_env = (env.trial_step == 0).unsqueeze(1)  # (E, 1) the env was rewound or redrawn in this step
        if env.trial_mode:
            terminated, truncated = res.terminals, res.truncations  # (E, A) K-th trial end; every trial end
        else:  # the lane episode ends with its env's episode; out-of-play egos end it as terminated
            terminated = reset_env & ego & (res.removed | res.terminals)  # (E, A)
            truncated = res.truncations  # (E, A) timeout with the ego in play
        info = self._info(res.controlled)
        info["was_removed"], info["trial_ended"] = _np(res.removed), _np(res.trial_ended)
        done = terminated | truncated  # (E, A)
        if env.keep_final_obs and bool(done.any()):
            info["final_obs"] = _np(torch.where(done.unsqueeze(-1), env.final_obs, 0.0))  # (N, obs_dim)
            info["_final_obs"] = _np(done)
        self._ego = res.controlled
        return self._obs(res.obs), _np(res.reward), _np(terminated), _np(truncated), info

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One (size, size, 3) uint8 frame per lane (the frame of its env), or None without a render mode."""
        self._check_open()
        if self.render_mode is None:
            return None
        if self._recorders is None:  # vehicle trails restart with each reset
            self._recorders = [Recorder(self.env, e, self.render_size) for e in range(self.env.num_envs)]
        frames = []
        for rec in self._recorders:
            frames.append(rec.capture())
            rec.frames.clear()  # the recorder keeps trails, not frames
        return tuple(f for f in frames for _ in range(self.env.num_agents))

    def close_extras(self, **kwargs: Any) -> None:
        self._recorders = None
        self.env.keep_final_obs = False

    # ---- conversions ----
    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("DriveVectorEnv is closed")

    def _actions(self, actions: np.ndarray) -> torch.Tensor:
        """(N,) ints or (N, 2) floats -> (E, A) long or (E, A, 2) float32 on the env's device."""
        E, A, N = self.env.num_envs, self.env.num_agents, self.num_envs
        a = np.asarray(actions)
        if isinstance(self.single_action_space, spaces.Discrete):
            n = int(self.single_action_space.n)
            if a.shape != (N,) or not np.issubdtype(a.dtype, np.integer):
                raise ValueError(f"DriveVectorEnv.step: expected ({N},) integer actions (one per lane), got shape "
                                 f"{a.shape} of {a.dtype}")
            if a.min() < 0 or a.max() >= n:
                raise ValueError(f"DriveVectorEnv.step: actions outside [0, {n}): min {a.min()}, max {a.max()}")
            return torch.as_tensor(a, device=self.env.device).long().view(E, A)
        if a.shape != (N, 2):
            raise ValueError(f"DriveVectorEnv.step: expected ({N}, 2) continuous actions, got shape {a.shape}")
        return torch.as_tensor(a, dtype=torch.float32, device=self.env.device).view(E, A, 2)

    def _obs(self, obs: torch.Tensor) -> np.ndarray:
        out = _np(obs)  # (N, obs_dim)
        return out.copy() if self.env.cfg.reuse_obs else out  # a reused simulator buffer is never handed out

    def _info(self, controlled: torch.Tensor) -> dict[str, np.ndarray]:
        """The flags aligned with the observation about to be returned, each (N,)."""
        env, st = self.env, self.env.state
        E, A = env.num_envs, env.num_agents
        removed = (st.removed | st.stopped) & controlled  # (E, A)
        return {
            "controlled": _np(controlled), "removed": _np(removed), "active": _np(controlled & ~removed),
            "new_episode": _np((env.ep_step == 0).view(E, 1).expand(E, A)),
            "trial": _np(env.trial.view(E, 1).expand(E, A)),
        }
