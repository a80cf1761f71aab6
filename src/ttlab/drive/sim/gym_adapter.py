"""A Gymnasium-style vector-env view of DriveEnv: numpy in/out, one slot per agent slot.

The vector has `num_envs = E * A` fixed slots (one per agent slot of every env); the slots that are
policy-controlled right now are `info["controlled"]` (a new scene can change them). Actions for the
other slots are ignored, and their rewards are 0. `terminated` / `truncated` follow the simulator's
per-agent terminals / truncations; the env resets itself (autoreset in the same step), so `obs`
returned at a done step is the first observation of the next episode or trial.
"""

from __future__ import annotations

import numpy as np
import torch

from ttlab.drive.sim.env import DriveEnv


class DriveVectorEnv:
    """reset(seed) -> (obs, info); step(actions) -> (obs, reward, terminated, truncated, info)."""

    metadata = {"autoreset_mode": "same-step"}

    def __init__(self, env: DriveEnv):
        self.env = env
        self.num_envs = env.num_envs * env.num_agents
        self.single_observation_shape = (env.obs_dim,)
        self.single_action_n = env.num_actions

    def _info(self, controlled: torch.Tensor, **extra: torch.Tensor) -> dict:
        info = {"controlled": controlled.reshape(-1).cpu().numpy()}
        info.update({k: v.reshape(-1).cpu().numpy() for k, v in extra.items()})
        return info

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        obs = self.env.reset(seed)
        return obs.reshape(self.num_envs, -1).cpu().numpy(), self._info(self.env.controlled)

    def step(self, actions: np.ndarray):
        E, A = self.env.num_envs, self.env.num_agents
        a = torch.as_tensor(np.asarray(actions), device=self.env.device)
        a = a.reshape(E, A) if self.env.cfg.action == "discrete" else a.reshape(E, A, 2).float()
        r = self.env.step(a)
        return (
            r.obs.reshape(self.num_envs, -1).cpu().numpy(), r.reward.reshape(-1).cpu().numpy(),
            r.terminals.reshape(-1).cpu().numpy(), r.truncations.reshape(-1).cpu().numpy(),
            self._info(r.controlled, removed=r.removed, trial_ended=r.trial_ended),
        )

    def close(self) -> None:
        pass
