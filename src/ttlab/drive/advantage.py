"""Generalised advantage estimation with the three boundary signals of the trial contract.

Buffer convention (time-aligned to the decision): row b, step t holds the observation the agent acted
on, the value `V_t` of it, and the reward `r_t` and flags the env returned for that action. `stop[b, t]`
is True when nothing after step t may be bootstrapped into step t:

    stop_t = terminals_t | truncations_t | removed_{t+1}

- terminals: the episode (K trials) is over, the next observation belongs to a new scenario;
- truncations: the trial is over and every entity went back to its start state; the contract stops the
  bootstrap here (each trial's return is its own), while the policy's memory is kept;
- removed: the ego reached its goal (or a wrong candidate) and sits in limbo until the trial ends; the
  limbo steps are masked out of the loss and their values never leak back into the reaching step.

    delta_t = r_t + gamma * (1 - stop_t) * V_{t+1} - V_t
    A_t     = delta_t + gamma * lam * (1 - stop_t) * A_{t+1}
    R_t     = A_t + V_t

`V_T` (the value of the observation after the last step) is `next_value`.
`gae` is the fast path (vectorised over rows, one reverse scan over time); `gae_reference` is the
plain double loop it is tested against.
"""

from __future__ import annotations

import torch


def stop_flags(terminals: torch.Tensor, truncations: torch.Tensor, next_removed: torch.Tensor) -> torch.Tensor:
    """`stop_t = terminals_t | truncations_t | removed_{t+1}`; all (B, T) bool."""
    return terminals | truncations | next_removed  # (B, T)


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_value: torch.Tensor,
    stop: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns, both (B, T) float32.

    rewards, values: (B, T); next_value: (B,) value of the observation after step T-1; stop: (B, T) bool.
    """
    B, T = rewards.shape
    rewards = rewards.float()
    values = values.float()
    cont = (~stop.bool()).float()  # (B, T)
    next_values = torch.cat([values[:, 1:], next_value.float()[:, None]], dim=1)  # (B, T)
    deltas = rewards + gamma * cont * next_values - values  # (B, T)
    decay = gamma * lam * cont  # (B, T)
    adv = torch.empty_like(deltas)  # (B, T)
    last = torch.zeros(B, dtype=deltas.dtype, device=deltas.device)  # (B,)
    for t in range(T - 1, -1, -1):  # one scan over time, vectorised over rows
        last = deltas[:, t] + decay[:, t] * last
        adv[:, t] = last
    return adv, adv + values


def gae_reference(
    rewards: list[list[float]],
    values: list[list[float]],
    next_value: list[float],
    stop: list[list[bool]],
    gamma: float,
    lam: float,
) -> list[list[float]]:
    """The textbook loop, one row and one step at a time (plain Python floats)."""
    out = []
    for b in range(len(rewards)):
        T = len(rewards[b])
        adv = [0.0] * T
        running = 0.0
        for t in reversed(range(T)):
            nv = next_value[b] if t == T - 1 else values[b][t + 1]
            if stop[b][t]:
                delta = rewards[b][t] - values[b][t]
                running = delta
            else:
                delta = rewards[b][t] + gamma * nv - values[b][t]
                running = delta + gamma * lam * running
            adv[t] = running
        out.append(adv)
    return out
