"""A Gymnasium-style vector-env view of DriveEnv: numpy in/out, one slot per agent slot.

The vector has `num_envs = E * A` fixed slots (one per agent slot of every env); the slots that are
policy-controlled right now are `info["controlled"]` (a new scene can change them). Actions for the
other slots are ignored, and their rewards are 0. `terminated` / `truncated` follow the simulator's
per-agent terminals / truncations; the env resets itself (autoreset in the same step), so `obs`
returned at a done step is the first observation of the next episode or trial.

Flags aligned with the observation returned (what a memory policy needs with that observation):
- `info["new_episode"]` (bool): this observation starts a new episode (every slot of an env whose episode
  clock went back to 0): reset the KV cache / recurrent state and the positional index;
- `info["removed"]` (bool): the agent is out of play (removed or stopped) for the step about to be taken:
  its token must be masked, never attended, and its loss masked.
`info["was_removed"]` is the simulator's per-step flag for the step just taken (out of play during it).

A cleanrl-style loop with the transformer (this is what `ttlab.drive.rollout.Rollout` does):

    obs, info = vec.reset(seed=0)
    state = policy.initial_state(vec.num_envs, device)
    new_ep, removed = info["new_episode"], info["removed"]
    while True:
        o, t, r = (torch.as_tensor(x) for x in (obs, new_ep, removed))
        logits, value, state = policy.forward_eval(o, state, t, r)
        obs, reward, term, trunc, info = vec.step(sample(logits).numpy())
        new_ep, removed = info["new_episode"], info["removed"]
        # store (o, t, r, action, reward); bootstrap stops where term | trunc | new_ep | removed
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

    def _aligned(self, controlled: torch.Tensor) -> dict[str, torch.Tensor]:
        """new_episode / removed for the observation about to be returned, both (E, A)."""
        env, st = self.env, self.env.state
        new_ep = (env.ep_step == 0).unsqueeze(1).expand(env.num_envs, env.num_agents)
        removed = (st.removed | st.stopped) & controlled.bool()
        return {"new_episode": new_ep, "removed": removed}

    def _info(self, controlled: torch.Tensor, **extra: torch.Tensor) -> dict:
        info = {"controlled": controlled.reshape(-1).cpu().numpy()}
        info.update({k: v.reshape(-1).cpu().numpy() for k, v in extra.items()})
        return info

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        obs = self.env.reset(seed)
        ctl = self.env.controlled
        return obs.reshape(self.num_envs, -1).cpu().numpy(), self._info(ctl, **self._aligned(ctl))

    def step(self, actions: np.ndarray):
        E, A = self.env.num_envs, self.env.num_agents
        a = torch.as_tensor(np.asarray(actions), device=self.env.device)
        a = a.reshape(E, A) if self.env.cfg.action == "discrete" else a.reshape(E, A, 2).float()
        r = self.env.step(a)
        return (
            r.obs.reshape(self.num_envs, -1).cpu().numpy(), r.reward.reshape(-1).cpu().numpy(),
            r.terminals.reshape(-1).cpu().numpy(), r.truncations.reshape(-1).cpu().numpy(),
            self._info(r.controlled, was_removed=r.removed, trial_ended=r.trial_ended,
                       **self._aligned(r.controlled)),
        )

    def close(self) -> None:
        pass
