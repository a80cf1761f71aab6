"""Paired trials against a partner population, per partner: what `ttlab drive eval --partners` and
`benchmarks/drive_partner_adapt.py` report.

`run_paired(env, ego, population, episodes)` steps exactly `episodes` episodes (of K trials) per env, the ego
(slot 0) driven by `ego` and the other slots by the episode's partner, and records every ego-trial outcome with
`evaluate.PairedTrials` (goal, collision, offroad, ticks in play) plus the partner of every (env, episode).
`partner_summary` then gives, overall and per partner: `trial_{k}_score` (goal reached without collision or
offroad within the trial), `trial_{k}_goal_rate`, `trial_{k}_collision_rate`, `trial_{k}_time_to_goal` (ticks,
over the trials that scored) and the paired `ada_delta_trial_{k}_minus_0` (score) with its standard error, for
every k < K.

An ego is a callable `ego(obs (N, D), new_episode (N,), removed (N,)) -> actions (N,)`: `policy_ego(policy)`
steps a policy as the rollout does; the scripted egos of `drive.partner_scripted` read the env as well.
"""

from __future__ import annotations

import copy
import math

import torch

from ttlab.drive.paired import PairedTrials
from ttlab.drive.policy.dist import sample


def policy_ego(policy, greedy: bool = False):
    """A policy as an ego callable (memory reset at each new episode, removed steps flagged, as in the rollout)."""
    state = {"s": None, "n": -1}

    def ego(obs, new_ep, removed, active=None):
        if state["n"] != obs.shape[0]:
            state["s"], state["n"] = policy.initial_state(obs.shape[0], obs.device), obs.shape[0]
        logits, _, state["s"] = policy.forward_eval(obs, state["s"], new_ep, removed, active=active)
        return logits.argmax(-1) if greedy and not policy.continuous else sample(logits, policy.continuous)

    ego.state = state  # {"s": the policy's memory, "n": its rows}: what `forgetful_ego` wipes
    return ego


def forgetful_ego(policy, wipe: str = "content", greedy: bool = False):
    """A probe of what carries the memory: `policy_ego(policy)` with part of its memory of earlier trials wiped at the
    first tick of every later trial k.

    wipe = "content": transformer: the cache slots are invalidated, the position is kept (the clock survives, and with
    it how long the earlier trials lasted, since a trial ends early once every car is out of play; what was seen does
    not); LSTM: the state is zeroed (it forgets everything). wipe = "clock" (transformer): the cache is kept, the
    position is set to k x trial_length, as if every earlier trial had lasted its full length (what was seen survives,
    how long it lasted is no longer told by the clock). Returns `ego_of(env) -> ego` (it reads the env's trial
    clock), as `evaluate_partner` takes."""
    if wipe not in ("content", "clock"):
        raise ValueError(f"forgetful_ego: wipe={wipe!r}, expected 'content' or 'clock'")

    def ego_of(env):
        inner = policy_ego(policy, greedy)
        A, L = env.num_agents, env.cfg.trial_length

        def ego(obs, new_ep, removed, active=None):
            later = ((env.trial_step == 0) & (env.ep_step > 0)).repeat_interleave(A)  # (N,) a later trial's 1st tick
            st = inner.state["s"]
            if st is not None and inner.state["n"] == obs.shape[0]:
                if isinstance(st, tuple):  # LSTM (h, c)
                    if wipe == "clock":
                        raise ValueError("forgetful_ego: wipe='clock' needs a transformer (an LSTM has no clock)")
                    inner.state["s"] = tuple(x * (~later).unsqueeze(-1).to(x.dtype) for x in st)
                elif wipe == "content":  # transformer KV cache: forget what was seen, keep the position
                    st.valid &= ~later.unsqueeze(-1)
                else:  # keep what was seen, the clock says every earlier trial ran its full length
                    k = env.trial.repeat_interleave(A)  # (N,) the trial this tick starts
                    st.pos = torch.where(later, k * L, st.pos)
            return inner(obs, new_ep, removed, active)

        ego.state = inner.state
        return ego

    return ego_of


@torch.no_grad()
def run_paired(env, ego, population, episodes: int) -> tuple[PairedTrials, torch.Tensor]:
    """Exactly `episodes` episodes per env; returns (the paired record, partner index (E, episodes) long)."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    E, A, K = env.num_envs, env.num_agents, env.k
    N = E * A
    obs = env.reset().reshape(N, -1).float()
    if population is not None:
        env.set_learner(population.learner.view(E, A))
    paired = PairedTrials(env.trial_metrics, E, A, K, episodes, env.device)
    env.trial_metrics = paired
    partner = torch.full((E, episodes), -1, dtype=torch.long, device=env.device)
    new_ep = torch.ones(N, dtype=torch.bool, device=env.device)
    removed = torch.zeros(N, dtype=torch.bool, device=env.device)
    learner = population.learner if population is not None else torch.ones(N, dtype=torch.bool, device=env.device)
    max_steps = episodes * K * env.cfg.trial_length
    steps = 0
    while not paired.complete():
        if steps >= max_steps:
            raise RuntimeError(f"{steps} steps ran and some env has not finished {episodes} episodes")
        live = paired.episodes_done < episodes  # (E,)
        if population is not None:
            e = live.nonzero().squeeze(1)
            partner[e, paired.episodes_done[e]] = population.current()[e]
        active = env.controlled.reshape(-1) & ~removed & learner
        action = ego(obs, new_ep, removed, active)
        if population is not None:
            action = population.act(obs, new_ep, removed, action, env.controlled.reshape(-1) & ~removed)
        res = env.step(action.reshape(E, A))
        steps += 1
        obs = res.obs.reshape(N, -1).float()
        new_ep = (env.ep_step == 0).unsqueeze(1).expand(E, A).reshape(-1)
        removed = ((env.state.removed | env.state.stopped) & res.controlled).reshape(-1)
    return paired, partner


def _summary(paired: PairedTrials, where: torch.Tensor | None = None) -> dict[str, float]:
    """PairedTrials.summary over the (env, episode) cells in `where` (E, episodes) bool, plus time to goal."""
    sub = copy.copy(paired)
    if where is not None:
        sub.egos = paired.egos & where.view(*where.shape, 1, 1)
    out = {k: v for k, v in sub.summary().items() if "exit" not in k}  # the crossing has no candidate exits
    if {"goal", "collision", "offroad", "length"} <= set(paired.out):
        score = paired.out["goal"] * (1 - paired.out["collision"]) * (1 - paired.out["offroad"])  # (E, n, K, A)
        for k in range(paired.k):
            m = sub.egos[:, :, k] & (score[:, :, k] > 0)
            out[f"trial_{k}_time_to_goal"] = float(paired.out["length"][:, :, k][m].mean()) if m.any() else math.nan
    return out


def partner_summary(paired: PairedTrials, partner: torch.Tensor, names: list[str]) -> dict:
    """Overall metrics and a dict of the same metrics per partner name."""
    out = _summary(paired)
    out["per_partner"] = {name: _summary(paired, partner == i) for i, name in enumerate(names)}
    for name, s in out["per_partner"].items():
        s["episodes"] = int((partner == names.index(name)).sum())
    return out
