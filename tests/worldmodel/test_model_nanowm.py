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


@pytest.mark.parametrize("name,expected,tol", [("S/2", 39.8e6, 0.05e6), ("B/2", 158.6e6, 0.05e6),
                                               ("L/2", 558.66e6, 0.01e6)])
def test_size_presets_match_official_parameter_counts(name, expected, tol):
    assert abs(_meta_params(name) - expected) <= tol


def _formula_params(cfg) -> int:
    """Parameters of NanoWM written out by hand (independent of the module code)."""
    D, hd, m, p, C, A = cfg.hidden, cfg.hidden // cfg.heads, int(cfg.hidden * cfg.mlp_ratio), cfg.patch_size, \
        cfg.in_channels, cfg.action_dim
    block = (3 * D * D + 3 * D) + (D * D + D) + 2 * hd + 3 * D * m + (6 * D * D + 6 * D)
    block += {"adaln": 6 * D * D + 6 * D, "film": 2 * D * D + 2 * D,
              "cross_attention": 4 * D * D + 4 * D}.get(cfg.injection, 0)
    embed = (C * p * p * D + D) + cfg.tokens_per_frame * D + (256 * D + D + D * D + D) + (A * D + D + D * D + D)
    head = (2 * D * D + 2 * D) + (D * p * p * C + p * p * C)
    return cfg.depth * block + embed + head


@pytest.mark.parametrize("inj", INJECTIONS)
def test_official_l2_is_24_blocks_558m_not_the_guides_460m(inj):
    cfg = size_config("L/2", action_dim=2, injection=inj)
    assert (cfg.hidden, cfg.depth, cfg.heads, cfg.patch_size) == (1024, 24, 16, 2)  # the published NanoWM_L_2
    with torch.device("meta"):
        model = NanoWM(cfg)
    assert count_parameters(model) == _formula_params(cfg)
    if inj == "additive":
        assert round(count_parameters(model) / 1e6, 2) == 558.66


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


def test_adaln_fuse_final_layer_is_modulated_by_the_timestep_only():
    model = NanoWM(size_config("tiny", injection="adaln_fuse"))
    _randomize(model, seed=2)
    seen = {}
    model.final_ada.register_forward_hook(lambda mod, inp, out: seen.update(inp=inp[0]))  # returns None
    x, t, a = _inputs()
    model(x, t, a)
    expected = torch.nn.functional.silu(model.t_embed(t))[:, :, None]  # (B, F, 1, D): no action in it
    assert torch.allclose(seen["inp"], expected, atol=1e-6)
    # and the blocks still see timestep + action: the output depends on the actions of frames > 0
    assert not torch.allclose(model(x, t, a), model(x, t, a + 1.0), atol=1e-4)


@pytest.mark.parametrize("inj", INJECTIONS)
def test_frame0_gets_the_null_action_whatever_the_data_holds(inj):
    model = NanoWM(size_config("tiny", injection=inj))
    _randomize(model, seed=3)  # biases too: the embedding of a zero action is not zero
    x, t, a = _inputs()
    a0 = a.clone()
    a0[:, 0] = torch.randn(2, 2) * 5
    assert torch.allclose(model(x, t, a), model(x, t, a0), atol=1e-6)
    # the old behaviour (embedding the pipeline's zeros = the mean action) is a different conditioning
    old = NanoWM(size_config("tiny", injection=inj, null_first_action=False))
    old.load_state_dict(model.state_dict())
    a[:, 0] = 0
    assert not torch.allclose(model(x, t, a), old(x, t, a), atol=1e-4)


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
    counted = fc.get_total_flops()  # on CPU attention is two explicit matmuls, which the counter sees
    assert abs(forward_flops(cfg, 4) - counted) / counted < 0.02
    attn = forward_flops(cfg, 4) - forward_flops(cfg, 4, attention=False)
    assert attn == 2 * 2 * (4 * 256 * 256 + 256 * 4 * 4) * 128 * 2  # QK^T + AV, spatial + temporal, 2 pairs


def test_cpu_attention_matches_the_fused_kernel():
    from ttlab.worldmodel.model.nanowm import attention

    q, k, v = torch.randn(3, 2, 4, 6, 16, generator=torch.Generator().manual_seed(0)).unbind(0)
    for causal in (True, False):
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(attention(q, k, v, causal), ref, atol=1e-5, rtol=1e-5)


def test_conditioning_channels_reach_the_output_and_are_checked():
    cfg = size_config("tiny", input_size=16, cond_channels=3)
    model = NanoWM(cfg)
    for p in model.final.parameters():  # the zero-init output would hide the path
        torch.nn.init.normal_(p, std=0.1)
    x, t, a = torch.randn(2, 3, 3, 16, 16), torch.rand(2, 3) * 1000, torch.randn(2, 3, 2)
    c = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert not torch.allclose(model(x, t, a, cond=c), model(x, t, a, cond=-c))
    with pytest.raises(ValueError, match="cond"):
        model(x, t, a)


def test_refiner_starts_as_the_model_without_it_and_stays_frame_causal():
    torch.manual_seed(0)
    plain = NanoWM(size_config("tiny", cond_channels=3)).eval()
    _randomize(plain)
    refined = NanoWM(size_config("tiny", cond_channels=3, refiner=8)).eval()
    missing, unexpected = refined.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and missing and all(k.startswith("refine.") for k in missing)
    x, t, a = _inputs()
    c = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(refined(x, t, a, cond=c), plain(x, t, a, cond=c))  # the last conv starts at zero
        for p in refined.refine.parameters():
            p.copy_(torch.randn_like(p) * 0.1)
        out = refined(x, t, a, cond=c)
        assert not torch.allclose(out, plain(x, t, a, cond=c), atol=1e-3)
        # per pixel and per frame: changing frame k leaves the frames before it
        x2, t2 = x.clone(), t.clone()
        x2[:, 2:] += 1.0
        t2[:, 2:] = 17.0
        out2 = refined(x2, t2, a, cond=c)
        assert torch.allclose(out[:, :2], out2[:, :2], atol=1e-5) and not torch.allclose(out[:, 2:], out2[:, 2:])


def test_refiner_gets_a_gradient_from_zero_init_and_is_counted_in_the_flops():
    from torch.utils.flop_counter import FlopCounterMode

    cfg = size_config("tiny", input_size=16, refiner=8, cond_channels=3)
    model = NanoWM(cfg)
    x, t, a, c = torch.randn(1, 3, 3, 16, 16), torch.rand(1, 3) * 1000, torch.randn(1, 3, 2), torch.randn(1, 3, 16, 16)
    (model(x, t, a, cond=c) - x).square().mean().backward()  # the output starts at zero, the target does not
    assert model.refine.conv3.weight.grad.abs().sum() > 0
    with FlopCounterMode(display=False) as fc:
        model(x, t, a, cond=c)
    assert abs(forward_flops(cfg, 3) - fc.get_total_flops()) / fc.get_total_flops() < 0.02
    with pytest.raises(ValueError, match="refiner"):
        size_config("tiny", refiner=-1)
