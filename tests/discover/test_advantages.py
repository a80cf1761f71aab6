import math

import numpy as np
import pytest
from scipy.optimize import brentq

from ttlab.discover.advantages import (
    entropic_loo,
    group_advantages,
    group_betas,
    group_rewards,
    grpo,
    kl_to_uniform,
    reachable_target,
    solve_beta,
)


def _ref_entropic(x: np.ndarray, target: float) -> np.ndarray:
    """Independent reference: brentq on the KL, then the leave-one-out formula written out."""
    b = brentq(lambda beta: kl_to_uniform(x, beta) - target, 0.0, 1e4 / (x.max() - x.min()))
    w = np.exp(b * (x - x.max()))
    return np.array([w[i] / (np.delete(w, i).mean()) - 1.0 for i in range(x.size)])


def _adv(r, ok, **kw):
    r = np.asarray(r, dtype=float)
    return group_advantages(r, np.asarray(ok, dtype=bool), ["g"] * r.size, **kw)


def test_kl_to_uniform_golden():
    # softmax(beta r) with r = [0, ln 3], beta = 1 -> p = [1/4, 3/4]; KL = ln 2 + 1/4 ln 1/4 + 3/4 ln 3/4
    r = np.array([0.0, math.log(3.0)])
    want = math.log(2) + 0.25 * math.log(0.25) + 0.75 * math.log(0.75)
    assert kl_to_uniform(r, 1.0) == pytest.approx(want, abs=1e-12)


def test_beta_hits_ln2_when_reachable_and_half_the_ceiling_otherwise():
    r = np.array([1.0, 2.0, 3.0, 4.0, 5.5])
    assert kl_to_uniform(r, solve_beta(r)) == pytest.approx(math.log(2), abs=1e-9)
    two = np.array([1.0, 2.0])  # KL <= ln 2 only at beta = inf: the target becomes ln(2)/2
    assert reachable_target(two) == pytest.approx(0.5 * math.log(2))
    assert kl_to_uniform(two, solve_beta(two)) == pytest.approx(0.5 * math.log(2), abs=1e-9)
    assert solve_beta(np.array([3.0, 3.0])) == 0.0


def test_entropic_loo_golden_hand_computed():
    r = np.array([0.0, 1.0, 2.0])
    b = 0.5
    w = np.exp(b * r)
    want = np.array([w[0] / ((w[1] + w[2]) / 2), w[1] / ((w[0] + w[2]) / 2), w[2] / ((w[0] + w[1]) / 2)]) - 1
    np.testing.assert_allclose(entropic_loo(r, beta=b), want, rtol=1e-12)


def test_grpo_golden():
    np.testing.assert_allclose(grpo(np.array([1.0, 3.0]), eps=0.0), [-1.0, 1.0])


# ---- every group shape: golden values, finite, bounded ----------------------------------------
def test_all_failed_group_is_dropped():
    adv, keep = _adv([0.0] * 8, [False] * 8)
    assert not keep.any() and np.all(adv == 0)


def test_one_valid_one_failed_golden():
    adv, keep = _adv([2.6, 0.0], [True, False])
    # x = [0, -1], target ln(2)/2: p solves H(p) = ln(2)/2, A = [p/(1-p) - 1, (1-p)/p - 1]
    p = brentq(lambda q: -q * math.log(q) - (1 - q) * math.log(1 - q) - 0.5 * math.log(2), 0.5, 1 - 1e-12)
    np.testing.assert_allclose(adv, [p / (1 - p) - 1, (1 - p) / p - 1], rtol=1e-7)
    assert adv[0] == pytest.approx(7.0886, abs=1e-4) and keep.all()


def test_one_valid_in_64_golden_and_bounded():
    r, ok = [2.6] + [0.0] * 63, [True] + [False] * 63
    adv, _ = _adv(r, ok)
    x = group_rewards(np.array(r), np.array(ok))
    np.testing.assert_allclose(adv, _ref_entropic(x, math.log(2)), rtol=1e-7)
    assert adv[0] == pytest.approx(27.79, abs=0.01) and np.all(adv[1:] == adv[1]) and adv[1] > -1


def test_exactly_two_valid_in_64_stays_finite_and_ranked():
    """The issue's blow-up: two valid, different rewards, 62 failures -> the old estimator gave ~1e13."""
    r, ok = [2.60, 2.61] + [0.0] * 62, [True, True] + [False] * 62
    adv, keep = _adv(r, ok)
    assert keep.all() and np.all(np.isfinite(adv)) and adv.max() < 30
    assert adv[1] > adv[0] > adv[2] and np.all(adv[2:] == adv[2])  # best valid > worse valid > failures
    assert adv[1] == pytest.approx(25.94, abs=0.01) and adv[0] == pytest.approx(2.72, abs=0.01)
    assert adv[2] == pytest.approx(-0.338, abs=0.001)
    x = group_rewards(np.array(r), np.array(ok))
    np.testing.assert_allclose(adv, _ref_entropic(x, math.log(2)), rtol=1e-7)


def test_ties():
    adv, keep = _adv([2.0, 2.0, 0.0], [True, True, False])  # tied valid samples over one failure
    assert keep.all() and adv[0] == adv[1] > 0 > adv[2]
    adv, keep = _adv([2.0, 2.0, 2.0], [True] * 3)  # one outcome only: no signal
    assert not keep.any()
    adv, keep = _adv([1.0, 3.0, 3.0, 3.0], [True] * 4)  # 3 of 4 tie at the top: target ln(4/3)/2
    assert keep.all() and np.all(np.isfinite(adv)) and adv[1] == adv[2] == adv[3] > 0 > adv[0]


@pytest.mark.parametrize("r", [[1e300, -1e300, 1e299], [1e-300, 2e-300, 0.0], [-5e12, 7e15, 3.0, 3.0 + 1e-9]])
def test_huge_and_tiny_rewards_finite(r):
    adv, keep = _adv(r, [True] * len(r))
    assert keep.all() and np.all(np.isfinite(adv)) and adv.min() >= -1 and adv.max() < 30


def test_affine_invariance_of_the_floor_scale():
    rng = np.random.default_rng(3)
    r = rng.uniform(2.5, 2.7, 16)
    ok = rng.random(16) < 0.5
    ok[:2] = True
    a1, _ = _adv(r, ok)
    a2, _ = _adv(r * 1e6 - 3e6, ok)
    np.testing.assert_allclose(a1, a2, rtol=1e-6, atol=1e-9)


def test_bounded_in_every_random_group_shape():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 65))
        ok = rng.random(n) < rng.uniform(0, 1)
        scale = 10.0 ** rng.uniform(-200, 200)
        r = np.where(rng.random(n) < 0.3, 2.6, rng.uniform(2.5, 2.7, n)) * scale
        for method in ("entropic", "grpo"):
            for mode in ("floor", "zero"):
                adv, keep = _adv(r, ok, method=method, fail_mode=mode)
                assert np.all(np.isfinite(adv)) and np.all(adv[~keep] == 0)
                assert np.abs(adv).max() <= (30 if method == "entropic" else math.sqrt(n) + 1e-6)


def test_zero_mode_is_the_reference_rule():
    """fail_mode='zero': failures scored 0 and entropic over the whole group (the reference)."""
    r = np.array([2.600, 2.610, 2.620, 2.625, 0.0, 0.0, 0.0, 0.0])
    ok = r > 0
    adv, keep = _adv(r, ok, fail_mode="zero")
    np.testing.assert_allclose(adv, entropic_loo(np.where(ok, r, 0.0)), rtol=1e-6)
    # ... which barely ranks the valid samples; the floor scale keeps them apart
    assert adv[3] - adv[0] < 0.3 * adv[0]
    floor, _ = _adv(r, ok)
    assert floor[3] > 2 * max(floor[0], 0.5) and floor[0] < floor[1] < floor[2] < floor[3]


def test_no_single_sample_dominates_an_update():
    """A TTT step (8 states x 64 rollouts) at the seed's first-step valid rate (4%): no sample carries
    more than 15% of the batch's total |advantage| (the old estimator put ~100% on one sample)."""
    rng = np.random.default_rng(1)
    g = list(np.repeat(np.arange(8), 64))
    worst = 0.0
    for _ in range(200):
        ok = rng.random(512) < 0.04
        ok[:2] = True  # at least one group with exactly two valid
        ok[2:64] = False
        r = np.where(ok, 2.6 + 0.02 * rng.random(512), 0.0)
        adv, keep = group_advantages(r, ok, g)
        worst = max(worst, float(np.abs(adv).max() / np.abs(adv).sum()))
    assert worst < 0.15


def test_groups_keyed_by_state_and_constant_groups_dropped():
    r = np.array([1.0, 1.0, 1.0, 0.5, 0.7, 0.0, 0.0])
    ok = np.array([True, True, True, True, True, False, False])
    g = ["a", "a", "a", "b", "b", "c", "c"]
    adv, keep = group_advantages(r, ok, g, method="grpo")
    assert not keep[:3].any() and keep[3:5].all() and not keep[5:].any()
    assert adv[4] > 0 > adv[3]


def test_non_finite_reward_counts_as_failure():
    adv, keep = _adv([np.nan, 2.0, np.inf], [True, True, True])
    assert keep.all() and adv[1] > 0 > adv[0] and adv[0] == adv[2]


def test_bad_method_named():
    with pytest.raises(ValueError, match="unknown advantage method"):
        group_advantages(np.ones(2), np.ones(2, bool), ["a", "a"], method="ppo")
    with pytest.raises(ValueError, match="fail_mode"):
        group_advantages(np.ones(2), np.ones(2, bool), ["a", "a"], fail_mode="drop")


@pytest.mark.parametrize("fail_mode", ["floor", "zero"])
def test_group_betas_are_the_betas_the_advantages_use(fail_mode):
    """The logged beta is the one solved on the group's scaled rewards (failures included), not on raw rewards."""
    rewards = np.array([2.5950, 2.5962, 0.0, 2.5951, 2.60, 2.61, 0.0, 2.62])
    valid = np.array([True, True, False, True, True, True, False, True])
    gids = ["a"] * 4 + ["b"] * 4
    adv, keep = group_advantages(rewards, valid, gids, fail_mode=fail_mode)
    betas = group_betas(rewards, valid, gids, fail_mode=fail_mode)
    assert len(betas) == 2 and keep.all()
    for k, (beta, sl) in enumerate(zip(betas, (slice(0, 4), slice(4, 8)), strict=True)):
        x = group_rewards(rewards[sl], valid[sl], fail_mode)
        assert np.allclose(entropic_loo(x, beta), adv[sl]), k
        assert beta != pytest.approx(solve_beta(rewards[sl][valid[sl]]))  # the stale raw-reward beta differs
    assert group_betas(np.ones(3), np.ones(3, bool), ["a"] * 3) == []  # no signal, no beta


def test_beta_at_cap_is_reported_when_valid_samples_nearly_tie_above_a_failure():
    from ttlab.discover.advantages import BETA_MAX, beta_at_cap, group_betas_at_cap, solve_beta

    ties = np.array([0.0] + [1.0 - 1e-9] * 6 + [1.0])  # a failure at 0, seven valid samples 1e-9 apart
    b = solve_beta(ties)
    assert b == pytest.approx(BETA_MAX, rel=1e-6) and beta_at_cap(ties, b)
    spread = np.array([0.0, 0.2, 0.4, 0.6, 1.0])
    assert not beta_at_cap(spread, solve_beta(spread))  # an even spread is solved well below the cap
    r = np.concatenate([ties * 2.6, [0.0, 2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6]])
    assert group_betas_at_cap(r, r > 0, [0] * 8 + [1] * 8, "zero") == [True, False]
