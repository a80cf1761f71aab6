import math

import numpy as np
import pytest

from ttlab.discover.advantages import entropic_loo, group_advantages, grpo, kl_to_uniform, solve_beta


def test_kl_to_uniform_golden():
    # softmax(beta r) with r = [0, ln 3], beta = 1 -> p = [1/4, 3/4]; KL = ln 2 + 1/4 ln 1/4 + 3/4 ln 3/4
    r = np.array([0.0, math.log(3.0)])
    want = math.log(2) + 0.25 * math.log(0.25) + 0.75 * math.log(0.75)
    assert kl_to_uniform(r, 1.0) == pytest.approx(want, abs=1e-12)


def test_beta_hits_ln2():
    r = np.array([1.0, 2.0, 3.0, 4.0, 5.5])
    b = solve_beta(r)
    assert kl_to_uniform(r, b) == pytest.approx(math.log(2), abs=1e-9)


def test_entropic_loo_golden_hand_computed():
    r = np.array([0.0, 1.0, 2.0])
    b = 0.5
    w = np.exp(b * r)
    want = np.array([w[0] / ((w[1] + w[2]) / 2), w[1] / ((w[0] + w[2]) / 2), w[2] / ((w[0] + w[1]) / 2)]) - 1
    np.testing.assert_allclose(entropic_loo(r, beta=b), want, rtol=1e-12)


def test_two_samples_stay_finite():
    a = entropic_loo(np.array([1.0, 2.0]))
    assert np.all(np.isfinite(a)) and a[1] > 0 > a[0]


def test_grpo_golden():
    np.testing.assert_allclose(grpo(np.array([1.0, 3.0]), eps=0.0), [-1.0, 1.0])


def test_half_failed_group_keeps_valid_advantages_spread():
    valid_r = np.array([2.600, 2.610, 2.620, 2.625])
    r = np.concatenate([valid_r, np.zeros(4)])
    ok = r > 0
    # the reference (failed scored as reward 0 inside the group) collapses the valid advantages
    ref = entropic_loo(r)[:4]
    assert ref.max() - ref.min() < 0.5 * (ref.max() + 1)
    adv, keep = group_advantages(r, ok, ["s"] * 8)
    assert keep.all()
    np.testing.assert_allclose(adv[:4], entropic_loo(valid_r))  # same as if the failures were absent
    assert adv[3] > 5 and adv[0] < -0.9  # clearly ranked
    np.testing.assert_allclose(adv[4:], -1.0)


def test_groups_keyed_by_state_and_constant_groups_dropped():
    r = np.array([1.0, 1.0, 1.0, 0.5, 0.7, 0.0, 0.0])
    ok = np.array([True, True, True, True, True, False, False])
    g = ["a", "a", "a", "b", "b", "c", "c"]
    adv, keep = group_advantages(r, ok, g, method="grpo")
    assert not keep[:3].any() and keep[3:5].all() and not keep[5:].any()
    assert adv[4] > 0 > adv[3]


def test_constant_valid_with_failures_is_kept():
    adv, keep = group_advantages(np.array([2.0, 2.0, 0.0]), np.array([True, True, False]), ["a"] * 3)
    assert keep.all()
    np.testing.assert_allclose(adv, [0.0, 0.0, -1.0])


def test_bad_method_named():
    with pytest.raises(ValueError, match="unknown advantage method"):
        group_advantages(np.ones(2), np.ones(2, bool), ["a", "a"], method="ppo")
