"""The fast slot pools compute the same function, with the same gradients, as the plain per-slot MLP."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ttlab.drive.policy import ObsEncoder, ObsLayout
from ttlab.drive.policy.encoders import closest_approach, fold_slot_mlp, masked_max, slot_max_pool

LAYOUT = ObsLayout(ego_dim=5, partner_slots=6, partner_dim=4, road_slots=9, road_dim=5, road_type_col=4,
                   num_road_types=4)


def _obs(n: int, seed: int = 1) -> torch.Tensor:
    """Random observations with padding: partners all-zero in some slots, road type 0 in some slots, and
    one row with no valid slot at all."""
    g = torch.Generator().manual_seed(seed)
    L = LAYOUT
    obs = torch.randn(n, L.obs_dim, generator=g)
    p0, r0 = L.ego_dim, L.ego_dim + L.partner_slots * L.partner_dim
    partners = obs[:, p0:r0].reshape(n, L.partner_slots, L.partner_dim)
    partners[torch.rand(n, L.partner_slots, generator=g) < 0.6] = 0.0
    road = obs[:, r0:].reshape(n, L.road_slots, L.road_dim)
    road[..., L.road_type_col] = torch.randint(0, L.num_road_types, (n, L.road_slots), generator=g).float()
    partners[0] = 0.0
    road[0, :, L.road_type_col] = 0.0
    obs[:, p0:r0] = partners.reshape(n, -1)
    obs[:, r0:] = road.reshape(n, -1)
    return obs


def _encoder() -> ObsEncoder:
    torch.manual_seed(0)
    enc = ObsEncoder(LAYOUT, embed=8, hidden=16)
    for p in enc.parameters():  # non-trivial LayerNorm affine too
        p.data.add_(0.1 * torch.randn_like(p))
    return enc


def test_folded_slot_mlp_is_the_same_function():
    enc = _encoder()
    x = torch.randn(50, LAYOUT.partner_dim)
    m, q, b, eps = fold_slot_mlp(enc.partner)
    x1 = torch.cat([x, torch.ones(50, 1)], dim=1)
    y = (x1 @ m.T) * torch.rsqrt(((x1 @ q) * x1).sum(-1, keepdim=True) + eps) + b
    assert torch.allclose(y, enc.partner(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("grad", [False, True])
def test_fast_encoder_equals_the_reference_in_values(grad):
    enc = _encoder()
    obs = _obs(40).reshape(4, 10, -1)
    with torch.set_grad_enabled(grad):
        fast, ref = enc(obs), enc.reference(obs)
    assert fast.shape == (4, 10, 16)
    assert torch.allclose(fast, ref, atol=1e-5, rtol=0), (fast - ref).abs().max()


def test_fast_encoder_equals_the_reference_in_gradients():
    enc = _encoder()
    obs = _obs(40)
    w = torch.randn(40, 16)

    def grads(fn):
        enc.zero_grad()
        x = obs.clone().requires_grad_(True)
        (fn(x) * w).sum().backward()
        return [p.grad.clone() for p in enc.parameters()], x.grad

    g_fast, x_fast = grads(enc)
    g_ref, x_ref = grads(enc.reference)
    for a, b in zip(g_fast, g_ref, strict=True):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4), (a - b).abs().max()
    assert torch.allclose(x_fast, x_ref, atol=1e-4, rtol=1e-4)


def test_rows_without_a_valid_slot_pool_to_zero_and_get_no_gradient():
    enc = _encoder()
    x = torch.randn(3, 5, LAYOUT.partner_dim, requires_grad=True)
    valid = torch.tensor([[True, False, True, False, False], [False] * 5, [True] * 5])
    out = slot_max_pool(enc.partner, x, valid)
    assert torch.equal(out[1], torch.zeros(8))
    assert torch.allclose(out, masked_max(enc.partner(x), valid), atol=1e-5, rtol=0)
    out.sum().backward()
    assert x.grad[1].abs().max().item() == 0.0
    assert x.grad[0, [1, 3, 4]].abs().max().item() == 0.0  # padding slots get nothing


def _mlp_encoder() -> ObsEncoder:
    torch.manual_seed(0)
    return ObsEncoder(LAYOUT, embed=8, hidden=16, partner_encoder="mlp")


def test_mlp_partner_encoder_equals_its_reference_with_padding_dropped():
    enc = _mlp_encoder()
    obs = _obs(40).reshape(4, 10, -1)
    fast, ref = enc(obs), enc.reference(obs)
    assert torch.allclose(fast, ref, atol=1e-5, rtol=0), (fast - ref).abs().max()


def test_mlp_partner_encoder_reads_the_ego_speed_per_partner():
    """The same partners with a different ego speed give a different partner embedding (the linear encoder's
    partner embedding cannot depend on the ego at all)."""
    enc, lin = _mlp_encoder(), _encoder()
    obs = _obs(8)
    faster = obs.clone()
    faster[:, 2] += 1.0  # ego speed column
    ego, partners, valid, _, _ = enc._split(obs)
    ego2, _, _, _, _ = enc._split(faster)
    rows = valid.any(1)
    d = (enc._partners(ego, partners, valid) - enc._partners(ego2, partners, valid))[rows]
    assert d.abs().max() > 1e-3
    assert torch.equal(lin._partners(ego, partners, valid), lin._partners(ego2, partners, valid))


def test_unknown_partner_encoder_is_named():
    with pytest.raises(ValueError, match="partner_encoder 'deep'"):
        ObsEncoder(LAYOUT, partner_encoder="deep")


def test_closest_approach_of_two_cars_meeting_at_a_crossing():
    # ego at the origin heading +x at speed 1; a partner at (1, -1) heading +y (rel heading 90 deg) at speed 1:
    # both reach (1, 0) at t = 1, so they meet: t* = 1, d* = 0, relative velocity (-1, 1)
    row = torch.tensor([[[1.0, -1.0, 0.0, 1.0, 1.0]]])  # (1, 1, 5)
    out = closest_approach(row, torch.tensor([1.0]))[0, 0]
    torch.testing.assert_close(out, torch.tensor([-1.0, 1.0, 1.0, 0.0]), atol=1e-5, rtol=0)
    # the same partner half a unit later (at (1, -1.5)) passes behind: closest at t* = 1.25, distance sqrt(2)/4
    out = closest_approach(torch.tensor([[[1.0, -1.5, 0.0, 1.0, 1.0]]]), torch.tensor([1.0]))[0, 0]
    torch.testing.assert_close(out[2:], torch.tensor([1.25, 2 ** 0.5 / 4]), atol=1e-5, rtol=0)
    # moving apart: t* clips to 0 and d* is the current distance
    out = closest_approach(torch.tensor([[[-1.0, 0.0, 1.0, 0.0, 0.5]]]), torch.tensor([1.0]))[0, 0]
    torch.testing.assert_close(out[2:], torch.tensor([0.0, 1.0]), atol=1e-5, rtol=0)


def test_kinematic_partner_encoder_equals_its_reference():
    layout = dataclasses.replace(LAYOUT, partner_dim=7)
    torch.manual_seed(0)
    enc = ObsEncoder(layout, embed=8, hidden=16, partner_encoder="kinematic")
    g = torch.Generator().manual_seed(2)
    obs = torch.randn(40, layout.obs_dim, generator=g)
    p0, r0 = layout.ego_dim, layout.ego_dim + layout.partner_slots * layout.partner_dim
    partners = obs[:, p0:r0].reshape(40, layout.partner_slots, 7)
    partners[torch.rand(40, layout.partner_slots, generator=g) < 0.5] = 0.0
    partners[:, :2] = 0.0  # every row has padding, so the fast path's slot compaction (_drop_padding) does work
    obs[:, p0:r0] = partners.reshape(40, -1)
    road = obs[:, r0:].reshape(40, layout.road_slots, layout.road_dim)
    road[..., layout.road_type_col] = torch.randint(0, layout.num_road_types, (40, layout.road_slots), generator=g).float()
    obs[:, r0:] = road.reshape(40, -1)
    assert int((partners.abs().sum(-1) > 0).sum(1).amax()) < layout.partner_slots
    fast, ref = enc(obs), enc.reference(obs)
    assert torch.allclose(fast, ref, atol=1e-5, rtol=0), (fast - ref).abs().max()
    assert enc.partner[0].in_features == 7 + 5
    with pytest.raises(ValueError, match="kinematic reads"):
        ObsEncoder(LAYOUT, partner_encoder="kinematic")
