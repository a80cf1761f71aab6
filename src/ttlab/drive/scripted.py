"""Scripted drivers for hidden-exit scenes: what the information structure allows, measured without learning.

A scripted agent has two parts:

- a *route follower* (`ExitDriver`): pure pursuit along the vehicle's path to a chosen candidate exit,
  a target speed, discrete actions. It reads the simulator state and the scene's exit paths
  (`exit_routes`), which no policy sees: it stands for "can drive to the exit it picked";
- an *exit chooser*: which candidate to drive to. The choosers read only what a policy reads (the
  exit flag of the ego features) plus, for `MemoryChooser`, their own memory of earlier observations
  of the episode. So the gap between choosers measures the information structure, not driving skill.

    routes = pool_exit_routes(spec)                        # (P, N, M, R, 2)
    out = run_scripted(env, routes, MemoryChooser(), episodes=2)   # paired per-trial outcomes
"""

from __future__ import annotations

import numpy as np
import torch

from ttlab.drive.adapt_eval import ExitOutcomes, exit_flag
from ttlab.drive.scenarios.pool import ProceduralSpec
from ttlab.drive.scenarios.procedural import exit_routes
from ttlab.drive.sim.dynamics import NUM_STEER
from ttlab.drive.sim.state import POLICY


def pool_exit_routes(spec: ProceduralSpec | str, device: torch.device | str = "cpu") -> torch.Tensor:
    """(P, N, M, R, 2): per scene of the procedural pool `spec`, every vehicle's path to each candidate exit."""

    spec = ProceduralSpec.parse(spec) if isinstance(spec, str) else spec
    fams = spec.families
    per = [exit_routes(fams[i % len(fams)], spec.seed * 100003 + i, spec.agents, num_candidates=spec.exits or None,
                       hidden_goal=spec.hidden_goal, styles=spec.styles) for i in range(spec.n)]
    N = max(r.shape[0] for r in per)
    R = max(r.shape[2] for r in per)
    out = np.zeros((len(per), N, per[0].shape[1], R, 2), np.float32)
    for i, r in enumerate(per):
        out[i, : r.shape[0], :, : r.shape[2]] = r
        out[i, : r.shape[0], :, r.shape[2]:] = r[:, :, -1:]
    return torch.as_tensor(out, device=device)


class ExitDriver:
    """Pure pursuit along the path to a chosen exit at `speed` m/s, as discrete actions (E, A) long."""

    def __init__(self, env, routes: torch.Tensor, speed: float = 8.0, lookahead: float = 5.0):
        self.env, self.routes, self.speed, self.lookahead = env, routes.to(env.device), speed, lookahead
        lon, lat = env.tables
        self.lon_vals = lon[::NUM_STEER]  # (7,)
        self.lat_vals = lat[:NUM_STEER]  # (13,)

    def act(self, choice: torch.Tensor) -> torch.Tensor:
        """choice (E, A) long candidate index -> discrete actions (E, A)."""
        env, st = self.env, self.env.state
        E, A = choice.shape
        r = self.routes[env.scene][:, :A]  # (E, A, M, R, 2)
        R = r.shape[3]
        path = torch.gather(r, 2, choice.view(E, A, 1, 1, 1).expand(E, A, 1, R, 2)).squeeze(2)  # (E, A, R, 2)
        pos = torch.stack([st.x, st.y], -1).unsqueeze(2)  # (E, A, 1, 2)
        near = (path - pos).norm(dim=-1).argmin(-1)  # (E, A)
        ahead = (near + int(self.lookahead) + (st.speed * 0.4).long()).clamp(max=R - 1)  # 1 m per route point
        tgt = torch.gather(path, 2, ahead.view(E, A, 1, 1).expand(E, A, 1, 2)).squeeze(2)  # (E, A, 2)
        d = tgt - pos.squeeze(2)
        alpha = torch.atan2(d[..., 1], d[..., 0]) - st.heading
        alpha = torch.atan2(torch.sin(alpha), torch.cos(alpha))
        kappa = 2.0 * torch.sin(alpha) / d.norm(dim=-1).clamp_min(1.0)  # pure-pursuit curvature
        steer = torch.atan(kappa * st.length)  # bicycle: curvature ~ tan(steer) / length
        v_max = torch.sqrt(4.0 / kappa.abs().clamp_min(1e-3)).clamp(max=self.speed)  # lateral accel <= 4 m/s^2
        accel = ((v_max - st.speed) / 0.5).clamp(-4.0, 4.0)
        i_lon = (accel.unsqueeze(-1) - self.lon_vals).abs().argmin(-1)  # (E, A)
        i_lat = (steer.unsqueeze(-1) - self.lat_vals).abs().argmin(-1)
        return i_lon * NUM_STEER + i_lat


class FixedChooser:
    """Memoryless: always candidate `k`."""

    def __init__(self, k: int = 0):
        self.k = k

    def reset(self, E: int, A: int, M: int, device) -> None:
        self.shape = (E, A)

    def choose(self, obs, flag, new_episode, new_trial):
        return torch.full(self.shape, self.k, dtype=torch.long, device=flag.device)

    def observe(self, flag, choice) -> None:
        pass


class MemoryChooser(FixedChooser):
    """With memory: try candidates in order 0, 1, ...; remember which were wrong (exit flag -1) and which was
    right (+1); from then on drive to the right one, else to the first candidate not yet known wrong."""

    def reset(self, E, A, M, device) -> None:
        self.M = M
        self.wrong = torch.zeros(E, A, M, dtype=torch.bool, device=device)
        self.right = torch.full((E, A), -1, dtype=torch.long, device=device)
        self.prev = torch.zeros(E, A, device=device)

    def choose(self, obs, flag, new_episode, new_trial):
        ne = new_episode.view(-1, 1)
        self.wrong &= ~ne.unsqueeze(-1)
        self.right = torch.where(ne, torch.full_like(self.right, -1), self.right)
        untried = torch.where(self.wrong, self.M, torch.arange(self.M, device=flag.device)).amin(-1)  # (E, A)
        return torch.where(self.right >= 0, self.right, untried.clamp(max=self.M - 1))

    def observe(self, flag, choice) -> None:
        """flag (E, A): the exit flag of the observation just returned; choice (E, A): where the ego drove.
        Only the first observation of a report counts (the choice during later report steps drives nothing)."""
        new = (flag != 0) & (self.prev == 0)
        self.prev = flag.clone()
        self.wrong |= (new & (flag < 0)).unsqueeze(-1) & (torch.arange(self.M, device=flag.device) == choice.unsqueeze(-1))
        self.right = torch.where(new & (flag > 0), choice, self.right)


@torch.no_grad()
def run_scripted(env, routes: torch.Tensor, chooser, episodes: int = 1, speed: float = 8.0) -> dict[str, float]:
    """Exactly `episodes` episodes (K trials) per env with the scripted driver + chooser; returns the paired
    per-trial outcomes (`ExitOutcomes.summary()`: goal / exit / wrong-exit rates, paired gaps)."""
    cfg = env.cfg
    if cfg.goal_behavior != "trial" or not cfg.hidden_goal:
        raise ValueError("run_scripted needs a hidden-goal trial env (goal_behavior='trial', hidden_goal=True)")
    obs = env.reset()
    E, A = env.num_envs, env.num_agents
    M = env.view.candidates.shape[2]
    driver = ExitDriver(env, routes, speed)
    chooser.reset(E, A, M, env.device)
    rec = ExitOutcomes(env, episodes)
    new_ep = torch.ones(E, dtype=torch.bool, device=env.device)
    new_trial = new_ep.clone()
    while not rec.done:
        choice = chooser.choose(obs, exit_flag(env, obs), new_ep, new_trial)
        res = env.step(driver.act(choice))
        obs = res.obs
        new_ep = env.ep_step == 0
        new_trial = env.trial_step == 0
        rec.record(obs, new_ep)
        chooser.observe(exit_flag(env, obs) * (env.state.role == POLICY), choice)
    return rec.summary()
