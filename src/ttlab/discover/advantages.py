"""Advantage estimators for GRPO-style test-time training (pure functions on numpy arrays).

Samples are grouped by the state id they were proposed from. A group's rewards are first put on a fixed
scale, failures included (`group_rewards`):

- `fail_mode="floor"` (default): valid rewards are mapped affinely onto [0, 1] (worst valid 0, best 1;
  all valid at 0 when they tie or there is one), and every failure sits at -1, one valid spread below
  the worst valid sample. Failures rank below every valid sample AND the valid samples keep their own
  ranking (scoring failures as 0 on the raw scale, as the reference does, makes 2.60 and 2.62 look
  alike next to the zeros).
- `fail_mode="zero"` (the paper's reference): failures get raw reward 0, then the group is mapped onto
  [0, 1].

Then, over the WHOLE group (N samples, failures included):

- `entropic`: beta solves KL(softmax(beta x) || uniform) = target by a bounded bisection, then the
  leave-one-out advantage A_i = exp(beta x_i) / Z_{-i} - 1, Z_{-i} = mean_{j != i} exp(beta x_j).
  target = ln 2 (the paper) when reachable; KL saturates at ln(N / #argmax), so for tiny groups or
  groups where half the samples tie at the top the target is min(ln 2, ln(N / #argmax) / 2). This is
  what keeps every group shape finite: the previous estimator (valid samples only, beta at its cap when
  the target was unreachable) gave ~1e13 to one sample of any group with exactly two valid rewards.
- `grpo`: A = (x - mean) / (std + eps).

Bounds: entropic advantages are >= -1 and, because the KL to uniform is at most ln 2, the top weight is
bounded away from 1: A <= 7.1 for N = 2, <= 17 for N = 3, ~27 for N = 64 (tests check every shape). A
group is dropped (mask False) when it carries no signal: all failed, or all valid with one reward.
"""

from __future__ import annotations

import math

import numpy as np

LN2 = math.log(2.0)
BETA_MAX = 1e4
"""Upper end of the beta search on the [0, 1]-scaled rewards (reached only by near-ties at the top)."""


def kl_to_uniform(r: np.ndarray, beta: float) -> float:
    """KL(softmax(beta r) || uniform) = log N - H(softmax(beta r))."""
    z = beta * (r - r.max())
    p = np.exp(z)
    p /= p.sum()
    nz = p[p > 0]
    return float(math.log(r.size) + np.sum(nz * np.log(nz)))


def reachable_target(r: np.ndarray, target: float = LN2, tol: float = 1e-12) -> float:
    """min(target, ln(N / #argmax) / 2): the KL a finite beta can reach (0.0 for constant rewards)."""
    r = np.asarray(r, dtype=np.float64)
    spread = float(r.max() - r.min()) if r.size else 0.0
    if r.size < 2 or spread <= 0.0:
        return 0.0
    k = int(np.sum(r >= r.max() - tol * spread))
    return min(target, 0.5 * math.log(r.size / k))


def solve_beta(r: np.ndarray, target: float = LN2, iters: int = 60) -> float:
    """beta >= 0 with KL(softmax(beta r) || uniform) = reachable_target(r, target), by bisection.

    The search runs on r / spread (beta is returned for the original scale) and never leaves
    [0, BETA_MAX / spread]; 0.0 for constant rewards.
    """
    r = np.asarray(r, dtype=np.float64)
    t = reachable_target(r, target)
    if t <= 0.0:
        return 0.0
    spread = float(r.max() - r.min())
    x = (r - r.min()) / spread
    lo, hi = 0.0, 1.0
    while kl_to_uniform(x, hi) < t and hi < BETA_MAX:
        hi = min(BETA_MAX, hi * 2.0)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if kl_to_uniform(x, mid) < t:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi) / spread


def entropic_loo(r: np.ndarray, beta: float | None = None) -> np.ndarray:
    """A_i = exp(beta r_i) / Z_{-i} - 1 for one group (beta by `solve_beta` if None)."""
    r = np.asarray(r, dtype=np.float64)
    if r.size < 2:
        return np.zeros_like(r)
    b = solve_beta(r) if beta is None else beta
    w = np.exp(b * (r - r.max()))  # the shift cancels in the ratio; every w in (0, 1]
    z_loo = (w.sum() - w) / (r.size - 1)
    return w / np.maximum(z_loo, np.finfo(np.float64).tiny) - 1.0


def grpo(r: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    r = np.asarray(r, dtype=np.float64)
    return (r - r.mean()) / (r.std() + eps)


def group_rewards(r: np.ndarray, ok: np.ndarray, fail_mode: str = "floor", tol: float = 1e-12) -> np.ndarray | None:
    """One group's rewards on the [-1, 1] (floor) or [0, 1] (zero) scale; None when it carries no signal."""
    r = np.asarray(r, dtype=np.float64)
    ok = np.asarray(ok, dtype=bool)
    if not ok.any():
        return None  # all failed
    rv = r[ok]
    spread = float(rv.max() - rv.min())
    constant = spread <= tol * float(np.abs(rv).max())  # relative: 1e-300-scale rewards still rank
    if constant and ok.all():
        return None  # one outcome only
    if fail_mode == "floor":
        x = np.full(r.shape, -1.0)
        x[ok] = 0.0 if constant else (rv - rv.min()) / spread
        return x
    if fail_mode == "zero":
        raw = np.where(ok, r, 0.0)
        s = float(raw.max() - raw.min())
        if s <= tol * float(np.abs(raw).max()):
            return None  # e.g. valid samples that all score 0
        return (raw - raw.min()) / s
    raise ValueError(f"unknown fail_mode {fail_mode!r}; use floor or zero")


def _check(rewards, valid, group_ids, method: str, fail_mode: str) -> tuple[np.ndarray, np.ndarray]:
    rewards = np.asarray(rewards, dtype=np.float64)
    valid = np.asarray(valid, dtype=bool)
    if rewards.shape != valid.shape or len(group_ids) != rewards.shape[0]:
        raise ValueError(f"rewards {rewards.shape}, valid {valid.shape}, group_ids {len(group_ids)} must agree")
    if method not in ("entropic", "grpo"):
        raise ValueError(f"unknown advantage method {method!r}; use entropic or grpo")
    if fail_mode not in ("floor", "zero"):
        raise ValueError(f"unknown fail_mode {fail_mode!r}; use floor or zero")
    return rewards, valid & np.isfinite(rewards)  # a non-finite reward is a failure, never a statistic


def scaled_groups(rewards: np.ndarray, valid: np.ndarray, group_ids: list, fail_mode: str = "floor",
                  tol: float = 1e-12):
    """Yield (indices, x) per group that carries a signal, x = `group_rewards` of the group (what the estimators see)."""
    groups: dict = {}
    for i, g in enumerate(group_ids):
        groups.setdefault(g, []).append(i)
    for idx in groups.values():
        ix = np.asarray(idx)
        r = rewards[ix]
        if valid[ix].any():
            r = r / max(1.0, float(np.abs(r[valid[ix]]).max()))  # overflow-proof spread of huge rewards
        x = group_rewards(r, valid[ix], fail_mode, tol)
        if x is not None:
            yield ix, x


def group_advantages(rewards: np.ndarray, valid: np.ndarray, group_ids: list, method: str = "entropic",
                     fail_mode: str = "floor", tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """Advantages for a flat batch. Returns (advantages (B,), keep mask (B,)).

    `group_ids` are the state ids the samples came from; rewards of failed samples are ignored
    (`fail_mode` places them). Every advantage is finite whatever the rewards (1e300 or -1e300 included).
    """
    rewards, valid = _check(rewards, valid, group_ids, method, fail_mode)
    adv = np.zeros_like(rewards)
    keep = np.zeros(rewards.shape, dtype=bool)
    for ix, x in scaled_groups(rewards, valid, group_ids, fail_mode, tol):
        adv[ix] = entropic_loo(x) if method == "entropic" else grpo(x)
        keep[ix] = True
    return adv, keep


def group_betas(rewards: np.ndarray, valid: np.ndarray, group_ids: list, fail_mode: str = "floor",
                tol: float = 1e-12) -> list[float]:
    """The beta `group_advantages(..., "entropic")` solves for each kept group, on that group's scaled rewards
    (`group_rewards`, so beta is on the [-1, 1] / [0, 1] scale, not on the raw reward's)."""
    rewards, valid = _check(rewards, valid, group_ids, "entropic", fail_mode)
    return [solve_beta(x) for _, x in scaled_groups(rewards, valid, group_ids, fail_mode, tol)]


def beta_at_cap(x: np.ndarray, beta: float, rel: float = 1e-6) -> bool:
    """Whether `solve_beta(x)` = beta stopped at its cap BETA_MAX / spread (the group's adaptive beta is then fixed)."""
    spread = float(np.max(x) - np.min(x)) if np.size(x) else 0.0
    return spread > 0.0 and beta * spread >= BETA_MAX * (1.0 - rel)


def group_betas_at_cap(rewards: np.ndarray, valid: np.ndarray, group_ids: list, fail_mode: str = "floor",
                       tol: float = 1e-12) -> list[bool]:
    """Per kept group (as `group_betas`): is its solved beta at the cap?"""
    rewards, valid = _check(rewards, valid, group_ids, "entropic", fail_mode)
    return [beta_at_cap(x, solve_beta(x)) for _, x in scaled_groups(rewards, valid, group_ids, fail_mode, tol)]
