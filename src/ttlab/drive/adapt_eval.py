"""Paired trial outcomes on hidden-exit envs: exactly N episodes per env, trial k paired with trial 0.

With exit feedback on (EnvConfig.exit_feedback), every attempt that reaches an exit shows it in the
ego's report-step observations: exit flag +1 (the true exit) or -1 (a wrong one). `ExitOutcomes`
reads that flag, so it sees what the policy sees, per (env, ego slot, episode, trial):

    goal = flag +1, exit = flag != 0, wrong = flag -1

Each env contributes its first N episodes and nothing after (an env whose trials end early does not
get more weight), and the gap trial k - trial 0 is a mean of per-episode differences with its standard
error. `run_policy` steps a policy (any of the three cores) exactly as the rollout does.
"""

from __future__ import annotations

import math

import torch

from ttlab.drive.policy.dist import sample
from ttlab.drive.sim.state import POLICY


def exit_flag(env, obs: torch.Tensor) -> torch.Tensor:
    """(E, A) the exit flag column of the ego features (`layout.exit_flag_col`)."""
    if not getattr(env.layout, "exit_feedback", False):
        raise ValueError("the env's observations carry no exit feedback (needs hidden_goal=True, goal_behavior="
                         "'trial' and exit_feedback=True)")
    return obs[..., env.layout.exit_flag_col]


class ExitOutcomes:
    """Per (env, slot, episode, trial) exit outcomes of the first `episodes` episodes of every env."""

    def __init__(self, env, episodes: int):
        self.env, self.n = env, episodes
        E, A, K = env.num_envs, env.num_agents, env.k
        self.flag = torch.zeros(E, A, episodes, K, device=env.device)  # +1 / -1 / 0
        self.ego = torch.zeros(E, A, episodes, dtype=torch.bool, device=env.device)
        self.ep = torch.zeros(E, dtype=torch.long, device=env.device)  # episodes finished per env
        self._mark_egos()

    def _mark_egos(self) -> None:
        live = self.ep < self.n  # (E,)
        e = torch.arange(self.env.num_envs, device=self.env.device)[live]
        self.ego[e, :, self.ep[live]] |= (self.env.state.role == POLICY)[live]

    def record(self, obs: torch.Tensor, episode_ended: torch.Tensor) -> None:
        """After a step: obs (E, A, D) it returned; episode_ended (E,) bool: the K-th trial of the env ended."""
        f = exit_flag(self.env, obs)  # (E, A); nonzero only in a report-step observation (never a trial start)
        live = self.ep < self.n
        e = torch.arange(self.env.num_envs, device=f.device)[live]
        ep, k = self.ep[live], self.env.trial[live]
        cur = self.flag[e, :, ep, k]  # (e, A)
        self.flag[e, :, ep, k] = torch.where(f[live] != 0, f[live], cur)
        self.ep = self.ep + episode_ended.long()
        if bool(episode_ended.any()):
            self._mark_egos()

    @property
    def done(self) -> bool:
        return bool((self.ep >= self.n).all())

    def summary(self) -> dict[str, float]:
        """Per trial k: goal / exit / wrong-exit rates; per k >= 1: the goal rate in trial k among episodes whose
        trial 0 reached a wrong exit (a driver that switches: 1, one that repeats: 0) and among those whose trial 0
        reached the true one, the paired gap in goal rate and its standard error (over ego-episodes), and the
        ego-episode count."""
        m = self.ego  # (E, A, N)
        cnt = int(m.sum())
        out: dict[str, float] = {"ego_episodes": float(cnt)}
        f = self.flag[m]  # (n, K)
        goal, exit_, wrong = (f > 0).float(), (f != 0).float(), (f < 0).float()
        for k in range(f.shape[1]):
            out[f"trial_{k}_goal_rate"] = float(goal[:, k].mean()) if cnt else math.nan
            out[f"trial_{k}_exit_rate"] = float(exit_[:, k].mean()) if cnt else math.nan
            out[f"trial_{k}_wrong_exit_rate"] = float(wrong[:, k].mean()) if cnt else math.nan
        for k in range(1, f.shape[1]):  # trial k after a wrong / a true exit in trial 0: switch vs repeat
            for name, cond in (("after_wrong_0", wrong[:, 0] > 0), ("after_goal_0", goal[:, 0] > 0)):
                n = int(cond.sum())
                out[f"trial_{k}_goal_rate_{name}"] = float(goal[cond, k].mean()) if n else math.nan
        for k in range(1, f.shape[1]):
            d = goal[:, k] - goal[:, 0]
            out[f"ada_delta_trial_{k}_minus_0"] = float(d.mean()) if cnt else math.nan
            out[f"ada_delta_trial_{k}_minus_0_se"] = float(d.std() / math.sqrt(cnt)) if cnt > 1 else math.nan
        return out


@torch.no_grad()
def run_policy(env, policy, episodes: int, greedy: bool = False, on_step=None) -> dict[str, float]:
    """Exactly `episodes` episodes per env with `policy` (stepped like the rollout: a new episode resets its
    memory; removed egos are flagged); returns `ExitOutcomes.summary()`. on_step(t) is called after each step."""

    E, A = env.num_envs, env.num_agents
    N = E * A
    obs = env.reset().reshape(N, -1).float()
    rec = ExitOutcomes(env, episodes)
    state = policy.initial_state(N, env.device)
    term = torch.ones(N, dtype=torch.bool, device=env.device)
    removed = torch.zeros(N, dtype=torch.bool, device=env.device)
    t = 0
    while not rec.done:
        logits, _, state = policy.forward_eval(obs, state, term, removed)
        action = logits.argmax(-1) if greedy and not policy.continuous else sample(logits, policy.continuous)
        res = env.step(action.reshape(E, A, *action.shape[1:]))
        rec.record(res.obs, env.ep_step == 0)
        obs = res.obs.reshape(N, -1).float()
        term = (env.ep_step == 0).unsqueeze(1).expand(E, A).reshape(-1)
        removed = ((env.state.removed | env.state.stopped) & res.controlled).reshape(-1)
        t += 1
        if on_step is not None:
            on_step(t)
    return rec.summary()
