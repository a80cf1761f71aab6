"""Simulator state as padded (E, A) tensors, and the episode-start state as a pure function of draws.

`PoolView` holds per-pool precomputations (flattened logs, which agents are parked, route arc
lengths) and builds the exact episode-start state of any env from (scene, init_steps, per-episode
draws). Trials and respawns re-apply it, which is what makes trial-start observations bit-identical.
Roles: 0 absent, 1 policy-controlled, 2 log replay (expert), 3 static (holds its start pose). Only agents
valid at the start step and at least `min_goal_distance` from their goal can be controlled; only agents valid at
the start step can be static; every other logged agent replays its log and is on the
map exactly while its log is valid (it appears when its valid window starts and leaves when it ends).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ttlab.drive.scenarios.types import AGENT_TYPE_ID, ScenarioPool

ABSENT, POLICY, EXPERT, STATIC = 0, 1, 2, 3


@dataclass
class SimState:
    """Per-agent dynamic state, all (E, A) (rc_w (E, A, 3))."""

    role: torch.Tensor  # long
    x: torch.Tensor
    y: torch.Tensor
    heading: torch.Tensor
    speed: torch.Tensor
    accel: torch.Tensor
    steer: torch.Tensor
    length: torch.Tensor
    width: torch.Tensor
    goal_x: torch.Tensor
    goal_y: torch.Tensor
    route_s: torch.Tensor  # arc position of the current goal along the agent's route
    removed: torch.Tensor  # bool: off the map until the trial / episode ends
    stopped: torch.Tensor  # bool: frozen in place after a terminal event (stays collidable)
    collided: torch.Tensor  # bool: in collision after the last tick
    offroad: torch.Tensor  # bool: touching a road edge after the last tick
    last_reward: torch.Tensor  # float: the ego's reward of the last tick (0 at trial and episode starts)
    exit_flag: torch.Tensor  # float: +1 / -1 the ego reached the true / a wrong exit (during its report steps), else 0
    report_left: torch.Tensor  # float: report steps the ego has left (exit feedback), else 0

    def blend(self, mask: torch.Tensor, other: SimState) -> SimState:
        """Take `other` where mask (E, A) is true, self elsewhere."""
        out = {}
        for f in dataclasses.fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            out[f.name] = torch.where(mask, b, a)
        return SimState(**out)


class PoolView:
    """Per-pool tensors the step needs, restricted to the first A agent slots of every scene."""

    def __init__(self, pool: ScenarioPool, num_agents: int, partner_style: bool, static_threshold: float = 0.5,
                 min_goal_distance: float = 0.0):
        A = num_agents
        self.pool = pool
        self.P, self.T = pool.pos.shape[0], pool.pos.shape[2]
        self.A = A
        if partner_style and pool.style_pos is None:
            raise ValueError("partner_style=True needs a pool with style logs (ScenarioPool.style_pos is None)")
        main = (t.unsqueeze(1) for t in (pool.pos, pool.heading, pool.vel, pool.valid))
        self.main_log = self._flatten(*main)  # ((P*1*A*T, 4), (P*1*A*T,), 1)
        self.replay_log = self._flatten(pool.style_pos, pool.style_heading, pool.style_vel,
                                        pool.style_valid) if partner_style else self.main_log
        # the episode start always comes from the main log (styles change partners' futures only)
        self.exists = pool.exists[:, :A]  # (P, A)
        self.length = pool.length[:, :A].float()
        self.width = pool.width[:, :A].float()
        self.expert = pool.expert[:, :A] | (pool.agent_type[:, :A] != AGENT_TYPE_ID["vehicle"])
        self.goal = pool.goal[:, :A].float()  # (P, A, 2)
        vmask = pool.valid[:, :A].unsqueeze(-1)
        big = torch.full_like(pool.pos[:, :A], 1e9)
        lo = torch.where(vmask, pool.pos[:, :A], big).amin(2)
        hi = torch.where(vmask, pool.pos[:, :A], -big).amax(2)
        self.parked = ((hi - lo).norm(dim=-1) < static_threshold) & self.exists  # (P, A)
        self.min_goal_distance = min_goal_distance
        self.candidates = None if pool.goal_candidates is None else pool.goal_candidates[:, :A].float()
        self.route = None
        if pool.route is not None:
            self.route = pool.route[:, :A].float()  # (P, A, R, 2)
            seg = (self.route[:, :, 1:] - self.route[:, :, :-1]).norm(dim=-1)
            self.route_cum = torch.cat([torch.zeros_like(seg[..., :1]), seg.cumsum(-1)], -1)  # (P, A, R)
            d = (self.route - self.goal.unsqueeze(2)).norm(dim=-1)  # (P, A, R)
            self.goal_route_s = torch.gather(self.route_cum, 2, d.argmin(-1, keepdim=True)).squeeze(-1)  # (P, A)

    def _flatten(self, pos, hd, vel, val) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(P, Y, N, T, ...) logs -> flat (P*Y*A*T, 4) x, y, heading, speed; flat valid; Y."""
        A = self.A
        xyhv = torch.cat([pos[:, :, :A], hd[:, :, :A].unsqueeze(-1), vel[:, :, :A].norm(dim=-1, keepdim=True)], -1)
        return xyhv.reshape(-1, 4).float(), val[:, :, :A].reshape(-1), pos.shape[1]

    def log_at(self, log: tuple, scene: torch.Tensor, style: torch.Tensor,
               t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logged (x, y, heading, speed) (E, A, 4) and valid (E, A) at log step t (E,) (clamped to T-1)."""
        table, valid, Y = log
        a = torch.arange(self.A, device=scene.device).unsqueeze(0)  # (1, A)
        tt = t.clamp(0, self.T - 1).unsqueeze(1)
        sty = style if Y > 1 else torch.zeros_like(style)
        flat = ((scene * Y + sty).unsqueeze(1) * self.A + a) * self.T + tt  # (E, A)
        return table[flat], valid[flat]

    def episode_start(self, scene: torch.Tensor, t0: torch.Tensor, true_goal: torch.Tensor | None,
                      control_mode: str) -> SimState:
        """The exact start state of episodes on `scene` (E,) at log step t0 (E,)."""
        xyhv, valid = self.log_at(self.main_log, scene, torch.zeros_like(scene), t0)  # (E, A, 4), (E, A)
        present = self.exists[scene] & valid
        expert = self.expert[scene]
        parked = self.parked[scene]
        goal = self.goal[scene]  # (E, A, 2)
        if true_goal is not None:
            cand = self.candidates[scene]  # (E, A, M, 2)
            goal = torch.gather(cand, 2, true_goal.view(*true_goal.shape, 1, 1).expand(-1, -1, 1, 2)).squeeze(2)
        far = (xyhv[..., :2] - goal).norm(dim=-1) >= self.min_goal_distance  # (E, A) PufferDrive's rule
        controllable = present & ~expert & ~parked & far
        if control_mode == "ego_only":  # the first controllable agent is the ego, the others replay their logs
            first = torch.cumsum(controllable.long(), 1) == 1
            policy = controllable & first
        elif control_mode == "replay":  # nobody is controlled: every present agent replays its log
            policy = torch.zeros_like(controllable)
            parked = parked & expert  # moving or parked, all follow the log
        else:
            policy = controllable
        # a logged agent not valid at t0 replays its log: it enters the scene when its valid window starts and
        # leaves when it ends (both through the log's valid flag: the env hides an EXPERT whose log is invalid)
        late = self.exists[scene] & ~valid
        role = torch.where(policy, POLICY, torch.where(present & parked & ~expert, STATIC,
                                                       torch.where(present | late, EXPERT, ABSENT)))
        route_s = self.goal_route_s[scene] if self.route is not None else torch.zeros_like(goal[..., 0])
        z = torch.zeros_like(goal[..., 0])
        f = torch.zeros_like(present)
        speed = torch.where(role == STATIC, z, xyhv[..., 3])
        return SimState(
            role=role, x=xyhv[..., 0], y=xyhv[..., 1], heading=xyhv[..., 2], speed=speed, accel=z, steer=z,
            length=self.length[scene], width=self.width[scene], goal_x=goal[..., 0], goal_y=goal[..., 1],
            route_s=route_s, removed=f, stopped=f, collided=f, offroad=f, last_reward=z, exit_flag=z, report_left=z,
        )

    def goal_ahead(self, scene: torch.Tensor, st: SimState, distance: float) -> tuple[torch.Tensor, ...]:
        """The goal `distance` metres further along each agent's route (or straight ahead without routes).

        Returns (goal_x, goal_y, route_s), each (E, A)."""
        if self.route is None:
            return (st.goal_x + distance * torch.cos(st.heading), st.goal_y + distance * torch.sin(st.heading),
                    st.route_s + distance)
        cum = self.route_cum[scene]  # (E, A, R)
        s = (st.route_s + distance).unsqueeze(-1)  # (E, A, 1)
        idx = torch.searchsorted(cum.contiguous(), s.contiguous()).clamp(max=cum.shape[-1] - 1)  # (E, A, 1)
        pt = torch.gather(self.route[scene], 2, idx.unsqueeze(-1).expand(-1, -1, 1, 2)).squeeze(2)
        return pt[..., 0], pt[..., 1], torch.gather(cum, 2, idx).squeeze(-1)
