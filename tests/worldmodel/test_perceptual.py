"""ST-LPIPS from the weights the stlpips-pytorch wheel ships: the package's own numbers, and what it sees that
PSNR does not (a blur, the mean frame)."""

import sys
import types

import pytest
import torch

from ttlab.worldmodel import perceptual
from ttlab.worldmodel.data.pusht import rollout_episode
from ttlab.worldmodel.data.windows import to_model_frames
from ttlab.worldmodel.metrics import psnr
from ttlab.worldmodel.objects import blur_frames

needs_weights = pytest.mark.skipif(perceptual.weights_path() is None, reason="stlpips-pytorch is not installed")


@needs_weights
def test_matches_the_packages_own_forward(monkeypatch):
    # the package imports torchvision, IPython and torchsummary at import time; its shift-tolerant AlexNet uses none
    for name in ("torchvision", "torchvision.models", "IPython", "torchsummary"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    for name in [m for m in sys.modules if m.startswith("stlpips_pytorch")]:  # imported again, then dropped
        monkeypatch.delitem(sys.modules, name)
    sys.modules["torchvision"].models = sys.modules["torchvision.models"]
    sys.modules["IPython"].embed = lambda *a, **k: None
    sys.modules["torchsummary"].summary = lambda *a, **k: None
    from stlpips_pytorch import stlpips

    ref = stlpips.LPIPS(net="alex", variant="shift_tolerant", verbose=False)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4, 3, 64, 64, generator=g) * 2 - 1
    y = (x + 0.3 * torch.randn(4, 3, 64, 64, generator=g)).clamp(-1, 1)
    with torch.no_grad():
        expected = ref(x, y).flatten()
    got = perceptual.load()(x, y)
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-7)
    assert (got > 0).all()


@needs_weights
def test_zero_on_equal_frames_symmetric_and_growing_with_noise():
    net = perceptual.load()
    g = torch.Generator().manual_seed(1)
    x = torch.rand(3, 3, 32, 32, generator=g) * 2 - 1
    noise = torch.randn(3, 3, 32, 32, generator=g)
    assert torch.allclose(net(x, x), torch.zeros(3))
    d = [net(x, (x + s * noise).clamp(-1, 1)) for s in (0.05, 0.2, 0.6)]
    assert (d[0] < d[1]).all() and (d[1] < d[2]).all()
    y = (x + 0.2 * noise).clamp(-1, 1)
    assert torch.allclose(net(x, y), net(y, x), rtol=1e-5, atol=1e-8)


@needs_weights
def test_prefers_the_next_true_frame_to_a_blur_and_to_the_mean_frame_where_psnr_prefers_the_mean():
    # (10, 3, 64, 64), 5 raw steps apart: the presets' frame interval
    frames = to_model_frames(rollout_episode(3, resolution=64, max_steps=60)["frames"][:50:5])
    target, moved = frames[:-1], frames[1:]  # the next model frame: the agent and the T a few px on
    blurred = blur_frames(target)
    mean = frames.mean(0, keepdim=True).expand_as(target)
    net = perceptual.load()
    assert (net(moved, target) < net(blurred, target)).all()
    assert (net(moved, target) < net(mean, target)).all()
    assert (net(mean, target) < net(blurred, target)).all()
    assert psnr(mean, target).mean() > psnr(moved, target).mean()  # what a pixel metric rewards


@needs_weights
def test_frame_distance_takes_clips_and_target_features():
    net = perceptual.load()
    g = torch.Generator().manual_seed(2)
    true = torch.rand(2, 3, 3, 24, 24, generator=g) * 2 - 1  # (B, T, C, H, W)
    pred = (true + 0.1 * torch.randn(2, 3, 3, 24, 24, generator=g)).clamp(-1, 1)
    tf = perceptual.frame_features(net, true)
    d = perceptual.frame_distance(net, pred, tf)  # (B, T)
    each = torch.stack([net(pred[:, t], true[:, t]) for t in range(3)], 1)  # (B, T), frame by frame
    assert d.shape == (2, 3) and torch.allclose(d, each, rtol=1e-5, atol=1e-8)
    # a prediction expanded from one frame per clip (copy-last) or one frame for all (the mean frame) is embedded
    # once and scores as its materialised copy does
    last = true[:, :1].expand_as(true)
    assert torch.allclose(perceptual.frame_distance(net, last, tf),
                          perceptual.frame_distance(net, last.contiguous(), tf), rtol=1e-5, atol=1e-8)
    mean = true.mean((0, 1)).expand_as(true)
    assert torch.allclose(perceptual.frame_distance(net, mean, tf),
                          perceptual.frame_distance(net, mean.contiguous(), tf), rtol=1e-5, atol=1e-8)


def test_small_frames_and_a_missing_wheel_are_skipped_with_a_reason(monkeypatch):
    small = torch.zeros(1, 3, perceptual.MIN_SIZE - 1, 40)
    assert perceptual.load_for(small) is None
    if perceptual.weights_path() is not None:
        assert "below" in perceptual.skipped_reason(perceptual.MIN_SIZE - 1)
        assert perceptual.skipped_reason(64) is None
        with pytest.raises(RuntimeError):  # the size limit is the network's own
            perceptual.load()(small, small)
        assert "RGB" in perceptual.skipped_for(torch.zeros(1, 4, 64, 64))
        assert perceptual.load_for(torch.zeros(1, 4, 64, 64)) is None
    monkeypatch.setattr(perceptual, "weights_path", lambda: None)
    assert "pip install stlpips-pytorch" in perceptual.skipped_reason(64)
