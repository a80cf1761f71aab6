"""Advantage estimators for GRPO-style test-time training (pure functions on numpy arrays).

Samples are grouped by the state id they were proposed from. Within a group:

- `grpo`: A = (r - mean) / (std + eps) over the VALID samples.
- `entropic`: adaptive-beta leave-one-out. beta solves KL(softmax(beta r) || uniform) = ln 2 by bisection,
  then A_i = exp(beta r_i) / Z_{-i} - 1 with Z_{-i} = mean_{j != i} exp(beta r_j) (valid samples only).

Failed samples (invalid program/construction) get `fail_advantage` (default -1, the entropic floor) and are
left OUT of the statistics: scoring them as reward 0 inside the group (the reference) makes the valid
rewards look alike next to the zeros, so beta collapses and all valid advantages become nearly equal.
A group is dropped (mask False) when it carries no signal: all failed, or one valid outcome only.
"""

from __future__ import annotations

import math

import numpy as np

LN2 = math.log(2.0)
BETA_SPREAD_MAX = 30.0


def kl_to_uniform(r: np.ndarray, beta: float) -> float:
    """KL(softmax(beta r) || uniform) = log N - H(softmax(beta r))."""
    z = beta * (r - r.max())
    p = np.exp(z)
    p /= p.sum()
    nz = p[p > 0]
    return float(math.log(r.size) + np.sum(nz * np.log(nz)))


def solve_beta(r: np.ndarray, target: float = LN2, iters: int = 100) -> float:
    """beta >= 0 with KL(softmax(beta r) || uniform) = target (bisection; KL increases with beta).

    beta is capped at BETA_SPREAD_MAX / spread (weights within e^30 of each other, so every leave-one-out
    normaliser stays positive); when the target is out of reach (KL saturates at log(N / #argmax) < target,
    e.g. N = 2) the cap is returned. 0.0 for constant rewards.
    """
    r = np.asarray(r, dtype=np.float64)
    spread = float(r.max() - r.min())
    if r.size < 2 or spread <= 0.0:
        return 0.0
    lo, hi, cap = 0.0, 1.0 / spread, BETA_SPREAD_MAX / spread
    while kl_to_uniform(r, hi) < target and hi < cap:
        hi = min(cap, hi * 2.0)
    if kl_to_uniform(r, hi) < target:
        return hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if kl_to_uniform(r, mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def entropic_loo(r: np.ndarray, beta: float | None = None) -> np.ndarray:
    """A_i = exp(beta r_i) / Z_{-i} - 1 for one group of valid rewards (beta by `solve_beta` if None)."""
    r = np.asarray(r, dtype=np.float64)
    if r.size < 2:
        return np.zeros_like(r)
    b = solve_beta(r) if beta is None else beta
    w = np.exp(b * (r - r.max()))  # the shift cancels in the ratio
    z_loo = (w.sum() - w) / (r.size - 1)
    return w / z_loo - 1.0


def grpo(r: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    r = np.asarray(r, dtype=np.float64)
    return (r - r.mean()) / (r.std() + eps)


def group_advantages(rewards: np.ndarray, valid: np.ndarray, group_ids: list, method: str = "entropic",
                     fail_advantage: float = -1.0, tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """Advantages for a flat batch. Returns (advantages (B,), keep mask (B,)).

    `rewards` of failed samples are ignored; `group_ids` are the state ids the samples came from.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    valid = np.asarray(valid, dtype=bool)
    if rewards.shape != valid.shape or len(group_ids) != rewards.shape[0]:
        raise ValueError(f"rewards {rewards.shape}, valid {valid.shape}, group_ids {len(group_ids)} must agree")
    if method not in ("entropic", "grpo"):
        raise ValueError(f"unknown advantage method {method!r}; use entropic or grpo")
    adv = np.zeros_like(rewards)
    keep = np.zeros(rewards.shape, dtype=bool)
    groups: dict = {}
    for i, g in enumerate(group_ids):
        groups.setdefault(g, []).append(i)
    for idx in groups.values():
        ix = np.asarray(idx)
        v = ix[valid[ix]]
        f = ix[~valid[ix]]
        if v.size == 0:
            continue  # all failed: no signal
        rv = rewards[v]
        constant = float(rv.max() - rv.min()) <= tol * max(1.0, abs(float(rv.max())))
        if constant and f.size == 0:
            continue  # constant rewards: no signal
        if constant or v.size < 2:
            adv[v] = 0.0
        else:
            adv[v] = entropic_loo(rv) if method == "entropic" else grpo(rv)
        adv[f] = fail_advantage
        keep[ix] = True
    return adv, keep
