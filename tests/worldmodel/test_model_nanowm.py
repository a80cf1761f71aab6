"""NanoWM denoiser: sizes match the guide, adaLN-Zero init, frame causality, every injection uses the action."""

from __future__ import annotations

import pytest
import torch

from ttlab.worldmodel.model import NanoWM, count_parameters, forward_flops, size_config
from ttlab.worldmodel.model.injection import INJECTIONS
from ttlab.worldmodel.model.rope import apply_rope, rope_1d, rope_2d


def _meta_params(name: str, **kw) -> int:
    with torch.device("meta"):
        return count_parameters(NanoWM(size_config(name, action_dim=7, **kw)))


@pytest.mark.parametrize("name,expected,tol", [("S/2", 39.8e6, 0.05e6), ("B/2", 158.6e6, 0.05e6), ("L/2", 460e6, 10e6)])
def test_size_presets_match_guide_parameter_counts(name, expected, tol):
    assert abs(_meta_params(name) - expected) <= tol


@pytest.mark.parametrize("inj,expected", [("film", 172.8e6), ("cross_attention", 187.0e6)])
def test_injection_parameter_counts_match_guide_b2(inj, expected):
    assert abs(_meta_params("B/2", injection=inj) - expected) <= 0.1e6


def _randomize(model: torch.nn.Module, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def _inputs(B=2, F=4, A=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, F, 3, 16, 16, generator=g)
    t = torch.rand(B, F, generator=g) * 1000
    a = torch.randn(B, F, A, generator=g)
    return x, t, a


@pytest.mark.parametrize("inj", INJECTIONS)
def test_output_is_exactly_zero_at_init(inj):
    model = NanoWM(size_config("tiny", injection=inj))
    out = model(*_inputs())
    assert out.shape == (2, 4, 3, 16, 16)
    assert torch.count_nonzero(out) == 0


@pytest.mark.parametrize("inj", INJECTIONS)
def test_frame_causality_changing_frame_k_leaves_earlier_frames(inj):
    torch.manual_seed(0)
    model = NanoWM(size_config("tiny", injection=inj)).eval()
    _randomize(model)
    x, t, a = _inputs()
    k = 2
    x2, t2, a2 = x.clone(), t.clone(), a.clone()
    x2[:, k:] += torch.randn_like(x2[:, k:])
    t2[:, k:] = 17.0
    a2[:, k:] += 1.0
    out1, out2 = model(x, t, a), model(x2, t2, a2)
    assert torch.allclose(out1[:, :k], out2[:, :k], atol=1e-5)
    assert not torch.allclose(out1[:, k:], out2[:, k:], atol=1e-3)


@pytest.mark.parametrize("inj", INJECTIONS)
def test_each_injection_uses_the_action(inj):
    model = NanoWM(size_config("tiny", injection=inj))
    _randomize(model, seed=1)
    x, t, a = _inputs()
    a.requires_grad_(True)
    out = model(x, t, a)
    out.pow(2).sum().backward()
    assert a.grad is not None and a.grad.abs().sum() > 0
    assert a.grad[:, 1:].abs().sum() > 0


@pytest.mark.parametrize("inj", INJECTIONS)
def test_action_path_learns_from_zero_init(inj):
    """At init the action path is zero, but the zeroed layers get a gradient (no dead double-zero gate)."""
    torch.manual_seed(0)
    model = NanoWM(size_config("tiny", injection=inj))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x, t, a = _inputs()
    for _ in range(5):
        opt.zero_grad()
        (model(x, t, a) - x).pow(2).mean().backward()
        opt.step()
    with torch.no_grad():
        diff = (model(x, t, a) - model(x, t, a + 1.0)).abs().max()
    assert diff > 1e-7


def test_rope_relative_position_property():
    cos, sin = rope_1d(16, 8)
    q, k = torch.randn(8), torch.randn(8)
    qs = apply_rope(q.expand(16, 8), cos, sin)
    ks = apply_rope(k.expand(16, 8), cos, sin)
    s = qs @ ks.T  # scores depend only on i - j
    assert torch.allclose(s[3, 1], s[10, 8], atol=1e-5)
    assert torch.allclose(s[0, 0], q @ k, atol=1e-5)
    cos2, sin2 = rope_2d(4, 4, 8)
    q2 = apply_rope(q.expand(16, 8), cos2, sin2)
    k2 = apply_rope(k.expand(16, 8), cos2, sin2)
    s2 = q2 @ k2.T  # (r, c) offsets: (1,1)-(0,0) equals (3,2)-(2,1)
    assert torch.allclose(s2[1 * 4 + 1, 0], s2[3 * 4 + 2, 2 * 4 + 1], atol=1e-5)


def test_bad_shapes_are_named():
    model = NanoWM(size_config("tiny"))
    x, t, a = _inputs()
    with pytest.raises(ValueError, match="actions"):
        model(x, t, a[..., :1])
    with pytest.raises(ValueError, match="do not match"):
        model(x[:, :, :2], t, a)


def test_forward_flops_matches_torch_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    cfg = size_config("tiny", input_size=32, hidden=128, heads=4)
    model = NanoWM(cfg)
    x = torch.randn(1, 4, 3, 32, 32)
    with FlopCounterMode(display=False) as fc:
        model(x, torch.rand(1, 4) * 1000, torch.randn(1, 4, 2))
    counted = fc.get_total_flops()  # the CPU SDPA kernel is not counted by FlopCounterMode
    assert abs(forward_flops(cfg, 4, attention=False) - counted) / counted < 0.02
    attn = forward_flops(cfg, 4) - forward_flops(cfg, 4, attention=False)
    assert attn == 2 * 2 * (4 * 256 * 256 + 256 * 4 * 4) * 128 * 2  # QK^T + AV, spatial + temporal, 2 pairs
