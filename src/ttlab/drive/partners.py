"""Partner populations: the other drivers an ego meets, one drawn per episode and kept for its K trials.

A population is a list of partners with sampling weights. A partner is either

- a scripted type (`SCRIPTED`, by name): a timed driver at the all-way stop of the crossing family
  (`scenarios.crossing`): it waits at its stop line for `go` ticks of the trial, then drives straight through at
  a fixed acceleration up to a cruise speed. It reads only the simulator clock and its own speed, so every trial
  of an episode it drives exactly as in the first, given the same ego;
- a frozen policy checkpoint (any other string: a `ttlab drive train` checkpoint stem), e.g. co-players trained
  with different reward weights, as the seed's partners differ.

The training types are `never_yield` (goes at once, at full acceleration) and `yield` (waits 1.4 s for the other
driver to go first, then goes without looking again: the corners are blind). Against `never_yield` an ego
must let it pass first; against `yield` it must go at once (a hesitating ego meets it pulling out, and one that
waits for it to clear runs out of time). The two look the same to the ego (both at rest, out of sight) until the
partner first moves differently, so only an ego that remembers an earlier trial can act on the type from the
start (tests/drive/test_partner_adapt.py). Held-out variants (`never_yield_late`, `yield_soon`) differ in
timing and are never used in training.

`PartnerPopulation` plugs into the rollout as its co-players (the `CoPlayers` interface: `learner`, `act`): in
every env slot 0 is the learner's ego and every other controlled slot is driven by the episode's partner, drawn
per (seed, env, episode) by the simulator's counter-based hash (`sim.rng`), so draws do not depend on the batch.
A checkpoint partner steps only the rows it drives this episode (`forward_eval(..., active=)` on CPU); its memory
has one row per partner slot and is reset by the new episode that hands it a row. `task()` gives each row's
partner index: the label of the privileged auxiliary loss (`PPOConfig.aux_task_coef`), never a policy input.

    pop = build_population(["never_yield", "yield"], [0.5, 0.5], env)
    Rollout(env, policy, ..., coplayers=pop)          # or TrainConfig.partners / EvalConfig.partners
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ttlab.drive.policy.dist import sample
from ttlab.drive.policy_io import load_policy
from ttlab.drive.sim import rng
from ttlab.drive.sim.dynamics import NUM_STEER

STREAM = 17  # sim.rng stream of the per-episode partner draw (the env's own draws use streams 0-4)
STRAIGHT = NUM_STEER // 2  # steering index of zero steering


@dataclass(frozen=True)
class TimedType:
    """A scripted partner: at rest until trial tick `go`, then longitudinal action `lon` (0..6: -4 .. +4 m/s^2 in
    4/3 steps) up to `cruise` m/s, then coasting; steering straight."""

    go: int
    lon: int
    cruise: float = 10.0


SCRIPTED: dict[str, TimedType] = {
    "never_yield": TimedType(go=0, lon=6),
    "yield": TimedType(go=14, lon=6),
    "never_yield_late": TimedType(go=1, lon=6),  # held out: goes a tick later
    "yield_soon": TimedType(go=12, lon=6),  # held out: waits 0.2 s less
}
TRAIN_PARTNERS = ("never_yield", "yield")
HELD_OUT_PARTNERS = ("never_yield_late", "yield_soon")


class ScriptedPartner:
    """A `TimedType` driving every slot it is asked for; `act(env)` -> (E, A) discrete actions."""

    memoryless = True

    def __init__(self, name: str):
        if name not in SCRIPTED:
            raise ValueError(f"unknown scripted partner {name!r}; known: {', '.join(SCRIPTED)}")
        self.name, self.t = name, SCRIPTED[name]

    def act(self, env) -> torch.Tensor:
        st = env.state
        moving = (env.trial_step >= self.t.go).unsqueeze(1)  # (E, 1)
        lon = torch.where(st.speed < self.t.cruise, self.t.lon, 3)  # (E, A): accelerate, then coast
        lon = torch.where(moving, lon, torch.zeros_like(lon))  # brake at rest = stay
        return lon * NUM_STEER + STRAIGHT


def draw_partner(env, weights: torch.Tensor) -> torch.Tensor:
    """(E,) long: the partner index of each env's current episode, a pure function of (seed, env, episode)."""
    u = rng.uniform(env.env_ids, env.episode, env.seed, STREAM)  # (E,)
    cum = torch.cumsum(weights, 0)
    return torch.searchsorted(cum / cum[-1], u, right=True).clamp(max=len(weights) - 1)


class PartnerPopulation:
    """Slot 0 of every env is the learner; every other slot is driven by the episode's partner (see module doc)."""

    def __init__(self, env, partners: list, names: list[str], weights: list[float] | None = None):
        if not partners:
            raise ValueError("a partner population needs at least one partner")
        weights = [1.0] * len(partners) if not weights else list(weights)
        if len(weights) != len(partners) or any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"partner weights {weights}: expected {len(partners)} non-negative numbers, not all 0")
        self.env, self.partners, self.names = env, partners, list(names)
        self.weights = torch.tensor(weights, dtype=torch.float32, device=env.device)
        E, A = env.num_envs, env.num_agents
        slot = torch.arange(A, device=env.device).repeat(E)  # (N,)
        self._learner = slot == 0
        self.rows = (~self._learner).nonzero().squeeze(1)  # (n,) partner rows, fixed
        self.policies = [p.eval().requires_grad_(False) if not isinstance(p, ScriptedPartner) else p for p in partners]
        self.states = [None if isinstance(p, ScriptedPartner) else p.initial_state(int(self.rows.numel()), env.device)
                       for p in self.policies]

    @property
    def learner(self) -> torch.Tensor:
        return self._learner  # (N,)

    def current(self) -> torch.Tensor:
        """(E,) long: the partner index of each env's current episode."""
        return draw_partner(self.env, self.weights)

    def task(self) -> torch.Tensor:
        """(N,) long: the partner index of each row's env (a training target of the task head only)."""
        return self.current().repeat_interleave(self.env.num_agents)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, terminals: torch.Tensor, removed: torch.Tensor, actions: torch.Tensor,
            active: torch.Tensor | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """Replace the partner rows' actions with their partner's: obs (N, D), terminals/removed (N,), actions (N,);
        `active` (N,) bool (CPU): the agents whose actions the env uses."""
        actions = actions.clone()
        who = self.task()  # (N,)
        r = self.rows
        for i, p in enumerate(self.policies):
            mine = who[r] == i  # (n,) partner rows this partner drives now
            if isinstance(p, ScriptedPartner):
                a = p.act(self.env).reshape(-1)[r]  # (n,)
            else:
                act_i = None if active is None else mine & active[r]
                logits, _, self.states[i] = p.forward_eval(obs[r], self.states[i], terminals[r], removed[r],
                                                           active=act_i)
                a = sample(logits, p.continuous, generator)
            actions[r] = torch.where(mine, a.to(actions.dtype), actions[r])
        return actions


def build_population(specs: list[str] | tuple[str, ...], weights: list[float] | tuple[float, ...] | None, env,
                     device: torch.device | str | None = None) -> PartnerPopulation:
    """Partners by name (`SCRIPTED`) or checkpoint stem, with sampling weights (default: uniform)."""

    if getattr(env.cfg, "action", "discrete") != "discrete":
        raise ValueError("a partner population needs discrete actions (scripted partners act on the discrete grid)")
    dev = torch.device(device) if device is not None else env.device
    for s in specs:
        if s not in SCRIPTED and not Path(str(s) + ".json").is_file():
            raise ValueError(f"partner {s!r}: not a scripted type ({', '.join(SCRIPTED)}) and no checkpoint {s}.json")
    partners = [ScriptedPartner(s) if s in SCRIPTED else load_policy(s, env, dev) for s in specs]
    return PartnerPopulation(env, partners, list(specs), list(weights) if weights else None)
