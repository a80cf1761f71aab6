"""Behaviour-cloning warm start for self-play: a log-tracking expert labels the states the simulator visits.

The scenes' logs (procedural driver, WOMD, CARLA exports) are driving that reaches each goal without leaving
the road. `tracking_actions` turns a log into actions of *this* simulator: from each ego's current state it
picks the discrete action whose one bicycle tick lands closest to the log's next state, so the expert follows
the log closed-loop (it corrects its own drift; on the procedural held-out scenes it reaches 0.998 of goals
with 0.002 collisions and no offroad, `benchmarks/drive_selfplay.py` records it). `collect` drives the env
with that expert and keeps (observation, expert action, discounted return) of every ego in play; `clone`
fits the policy's action head by cross-entropy and its critic to the returns, so PPO starts from a policy that
drives and a critic that knows what driving is worth (a cold critic would scramble the first updates).

The expert reads the log's future (privileged); the policy sees only its observation (goal, partners, road),
as in PPO. Memoryless (MLP) policies only: each sample is one observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ttlab.drive.policy.dist import sample
from ttlab.drive.sim.dynamics import bicycle_step, wrap_angle
from ttlab.drive.sim.state import POLICY

HEADING_WEIGHT = 4.0  # squared-error weight of heading (rad^2) against position (m^2) in the tracking match
SPEED_WEIGHT = 0.1  # and of speed ((m/s)^2)
CLOCK_WEIGHT = 1e-4  # m^2 per squared step of distance from the log clock, breaks ties between equal log points


def _log_target(env, anchor: str) -> torch.Tensor:
    """(E, A, 4) the logged (x, y, heading, speed) each ego tracks next. anchor 'time': the log at the next tick
    of the clock; 'path': the log one tick after the logged point nearest to the ego now (the log's path at the
    log's pace, wherever along it the ego is: an ego that fell behind or ran ahead is not pulled to the clock)."""
    if anchor == "time":
        return env.view.log_at(env.view.replay_log, env.scene, env.style, env.t + 1)[0]
    if anchor != "path":
        raise ValueError(f"tracking anchor {anchor!r}: expected 'time' or 'path'")
    table, valid, Y = env.view.main_log
    A, T = env.view.A, env.view.T
    full = table.view(-1, A, T, 4)[env.scene]  # (E, A, T, 4)
    ok = valid.view(-1, A, T)[env.scene]  # (E, A, T)
    st = env.state
    d2 = (full[..., 0] - st.x.unsqueeze(-1)) ** 2 + (full[..., 1] - st.y.unsqueeze(-1)) ** 2  # (E, A, T)
    # ties (a log that stands still repeats one point) go to the step nearest the clock, else the expert that
    # reached a stop would track the stop's first step forever
    lag = (torch.arange(T, device=ok.device) - env.t.view(-1, 1, 1)).float()  # (E, 1, T)
    k = (d2 + CLOCK_WEIGHT * lag * lag).masked_fill(~ok, float("inf")).argmin(-1)  # (E, A) nearest logged point
    last = (ok.long() * torch.arange(T, device=ok.device)).amax(-1)  # (E, A) last valid log step
    j = torch.minimum(k + 1, last)
    return torch.gather(full, 2, j.view(*j.shape, 1, 1).expand(*j.shape, 1, 4)).squeeze(2)


def tracking_actions(env, anchor: str = "path") -> torch.Tensor:
    """(E, A) long: per ego, the discrete action whose bicycle tick from its current state lands closest to the
    logged state it tracks (`_log_target`: position, heading, speed). Needs classic dynamics and discrete actions."""
    cfg = env.cfg
    if cfg.dynamics != "classic" or cfg.action != "discrete" or getattr(cfg, "exit_intent", False):
        raise ValueError("tracking_actions needs dynamics='classic' and discrete actions without exit intent "
                         f"(got dynamics={cfg.dynamics!r}, action={cfg.action!r})")
    st = env.state
    log = _log_target(env, anchor)  # (E, A, 4) x, y, heading, speed
    lon, lat = env.tables  # (91,) each
    x, y, h, v = (t.unsqueeze(-1) for t in (st.x, st.y, st.heading, st.speed))  # (E, A, 1)
    nx, ny, nh, nv = bicycle_step(x, y, h, v, lon, lat, st.length.unsqueeze(-1), float(env.pool.dt),
                                  cfg.limits.max_speed)  # (E, A, 91)
    err = ((nx - log[..., 0:1]) ** 2 + (ny - log[..., 1:2]) ** 2
           + HEADING_WEIGHT * wrap_angle(nh - log[..., 2:3]) ** 2 + SPEED_WEIGHT * (nv - log[..., 3:4]) ** 2)
    return err.argmin(-1)  # (E, A)


@dataclass
class ExpertData:
    obs: torch.Tensor  # (N, D) float32
    actions: torch.Tensor  # (N,) long
    returns: torch.Tensor  # (N,) float32, discounted within the ego's episode (0 past the collection's end)
    metrics: dict  # the expert's episode metrics over the collection (goal / collision / offroad rates)


def discounted_returns(rewards: torch.Tensor, ends: torch.Tensor, gamma: float) -> torch.Tensor:
    """rewards, ends (T, ...) -> returns (T, ...): G_t = r_t + gamma * G_{t+1} * (1 - ends_t); G_T = 0."""
    out = torch.zeros_like(rewards)
    g = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        g = rewards[t] + gamma * g * (~ends[t]).float()
        out[t] = g
    return out


@torch.no_grad()
def collect(env, ticks: int, gamma: float, policy=None) -> ExpertData:
    """Drive `env` (reset first) for `ticks` steps and keep the egos in play, each labelled with the expert's
    `tracking_actions`. policy None: the expert drives; else the (memoryless) policy drives, sampled, and the
    expert only labels the states it visits (DAgger: the states the learner will actually see)."""
    obs = env.reset()
    env.metrics()  # start the sums afresh
    O, Acts, R, End, Keep = [], [], [], [], []
    E, A = env.num_envs, env.num_agents
    for _ in range(ticks):
        st = env.state
        keep = (st.role == POLICY) & ~st.removed & ~st.stopped  # (E, A) egos that act this tick
        O.append(obs[keep].clone())  # before the step: the env may write the next observation into this buffer
        act = tracking_actions(env)
        if policy is None:
            res = env.step(act)
        else:
            logits, _, _ = policy.forward_eval(obs.reshape(E * A, -1).float(), None)
            res = env.step(sample(logits, False).view(E, A))
        Acts.append(act[keep])
        R.append(res.reward)
        # the ego's episode ends here: it left play this tick, or its env's episode ended (then it was reset)
        End.append(res.terminals.bool() | res.truncations.bool() | env.state.removed | env.state.stopped)
        Keep.append(keep)
        obs = res.obs
    ret = discounted_returns(torch.stack(R).float(), torch.stack(End), gamma)  # (T, E, A)
    keep = torch.stack(Keep)
    metrics = {k: float(v) for k, v in env.metrics().items() if not k.startswith("trial_")}
    return ExpertData(obs=torch.cat(O).float(), actions=torch.cat(Acts).long(), returns=ret[keep].float(),
                      metrics=metrics)


def cat(parts: list[ExpertData]) -> ExpertData:
    """The aggregate of several collections (DAgger's dataset); metrics of the last one."""
    return ExpertData(obs=torch.cat([p.obs for p in parts]), actions=torch.cat([p.actions for p in parts]),
                      returns=torch.cat([p.returns for p in parts]), metrics=parts[-1].metrics)


def clone(policy, data: ExpertData, epochs: int = 4, batch_size: int = 4096, lr: float = 1e-3,
          value_coef: float = 0.5, generator: torch.Generator | None = None) -> dict[str, float]:
    """Fit `policy` (memoryless) to the expert: cross-entropy on the actions + value_coef * MSE on the returns.
    Returns the last epoch's mean losses and action accuracy."""
    if not getattr(policy, "memoryless", False):
        raise ValueError("behaviour cloning needs a memoryless policy (--policy.core mlp): each sample is one "
                         "observation, not a history")
    if data.obs.shape[0] == 0:
        raise ValueError("behaviour cloning: the expert collection has no samples (no ego in play)")
    opt = torch.optim.Adam(policy.parameters(), lr=lr, eps=1e-5)
    n = data.obs.shape[0]
    policy.train()
    out: dict[str, float] = {}
    for _ in range(epochs):
        perm = torch.randperm(n, generator=generator)
        sums = {"bc_loss": 0.0, "bc_value_loss": 0.0, "bc_accuracy": 0.0}
        for i in range(0, n, batch_size):
            idx = perm[i:i + batch_size]
            logits, value, _ = policy.forward_eval(data.obs[idx], None)
            ce = torch.nn.functional.cross_entropy(logits.float(), data.actions[idx])
            vl = torch.nn.functional.mse_loss(value.float(), data.returns[idx])
            opt.zero_grad(set_to_none=True)
            (ce + value_coef * vl).backward()
            opt.step()
            w = idx.shape[0] / n
            sums["bc_loss"] += float(ce.detach()) * w
            sums["bc_value_loss"] += float(vl.detach()) * w
            sums["bc_accuracy"] += float((logits.argmax(-1) == data.actions[idx]).float().mean()) * w
        out = sums
    return out
