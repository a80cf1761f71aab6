"""PSNR/SSIM golden numbers, context exclusion, copy-last baseline, learned metrics need local weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ttlab.worldmodel import perceptual
from ttlab.worldmodel.metrics import (
    LearnedMetrics,
    MetricWeights,
    frame_metrics,
    frechet_distance,
    psnr,
    ssim,
)


def test_psnr_golden():
    a = torch.zeros(1, 3, 4, 4)
    b = torch.full((1, 3, 4, 4), 0.1)  # mse 0.01 on a peak-to-peak range of 2
    assert psnr(a, b).item() == pytest.approx(10 * math.log10(4 / 0.01), abs=1e-4)


def test_ssim_identity_and_golden_against_torchmetrics():
    from torchmetrics.functional.image import structural_similarity_index_measure as tm_ssim

    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 32, 32, generator=g) * 2 - 1
    y = (x + 0.2 * torch.randn(2, 3, 32, 32, generator=g)).clamp(-1, 1)
    assert torch.allclose(ssim(x, x), torch.ones(2))
    ref = torch.stack([tm_ssim((y[i:i + 1] + 1) / 2, (x[i:i + 1] + 1) / 2, data_range=1.0,
                               gaussian_kernel=True, sigma=1.5, kernel_size=11) for i in range(2)])
    # torchmetrics pads (reflect) before blurring and crops after: border windows differ slightly.
    assert torch.allclose(ssim(y, x), ref, atol=2e-3)
    a, b = 0.2, 0.6  # constant frames (in [0, 1] units): SSIM = (2ab + c1) / (a^2 + b^2 + c1) exactly
    ca, cb = torch.full((1, 1, 16, 16), a * 2 - 1), torch.full((1, 1, 16, 16), b * 2 - 1)
    assert ssim(ca, cb).item() == pytest.approx((2 * a * b + 1e-4) / (a * a + b * b + 1e-4), rel=2e-4)


def test_frame_metrics_exclude_context_and_report_copy_last():
    gt = torch.zeros(1, 3, 3, 8, 8)
    gt[:, 1:] = 0.5
    pred = gt.clone()
    pred[:, 0] = 1.0  # a wrong context frame must not count
    m = frame_metrics(pred, gt, n_ctx=1)
    assert m["psnr"] == 80.0  # perfect: the official metric's 80 dB cap, not an epsilon's 106 dB
    assert m["baseline_copy_last/psnr"] == pytest.approx(10 * math.log10(4 / 0.25), abs=1e-4)


def test_psnr_is_capped_at_80_db_only_where_the_error_is_that_small():
    x = torch.zeros(2, 3, 8, 8)
    y = x.clone()
    y[1] += 2e-4  # mse 4e-8 would be 80 dB on a peak-to-peak range of 2...
    y[1, 0, 0, 0] += 1.0  # ...one wrong pixel puts it well below the cap
    p = psnr(y, x)
    assert p[0].item() == 80.0 and p[1].item() == pytest.approx(10 * math.log10(4 / ((1 + 2e-4) ** 2 / 192)), abs=1e-3)


def test_frame_metrics_per_lag_average_to_the_mean_and_baselines_share_the_frames():
    g = torch.Generator().manual_seed(0)
    gt = torch.rand(3, 4, 3, 8, 8, generator=g) * 2 - 1
    pred = (gt + 0.1 * torch.randn(gt.shape, generator=g)).clamp(-1, 1)
    m = frame_metrics(pred, gt, n_ctx=1, mean_frame=torch.zeros(3, 8, 8), per_lag=True)
    for key in ("psnr", "ssim", "baseline_copy_last/psnr", "baseline_mean_frame/psnr"):
        lags = [m[f"{key}/lag{k}"] for k in (1, 2, 3)]
        assert sum(lags) / 3 == pytest.approx(m[key], abs=1e-5)
    assert "psnr/lag4" not in m
    lag2_copy = psnr(gt[:, :1], gt[:, 2:3]).mean().item()  # frame 2 against the context frame 0
    assert m["baseline_copy_last/psnr/lag2"] == pytest.approx(lag2_copy, abs=1e-5)


def test_quantize_rounds_to_the_8_bit_grid():
    from ttlab.worldmodel.metrics import quantize

    x = torch.tensor([-1.0, 1.0, 0.001, 0.006, 2.0])
    q = quantize(x)
    assert torch.allclose((q + 1) * 127.5, ((q + 1) * 127.5).round())
    assert q[0] == -1 and q[1] == 1 and q[4] == 1
    assert abs(q[2] - x[2]) <= 1 / 255 and abs(q[3] - x[3]) <= 1 / 255


def test_learned_metrics_skip_without_weights_and_refuse_missing_files(tmp_path):
    lm = LearnedMetrics(MetricWeights(), torch.device("cpu"))
    assert set(lm.skipped) - {"stlpips"} == {"lpips", "fid", "fvd"} and lm.compute() == {}
    with pytest.raises(FileNotFoundError, match="lpips weights not found"):
        LearnedMetrics(MetricWeights(lpips=tmp_path / "nope.pt"), torch.device("cpu"))


def test_frechet_distance_golden():
    mu1, mu2 = np.zeros(2), np.array([1.0, 0.0])
    s1, s2 = np.eye(2), 4 * np.eye(2)
    assert frechet_distance(mu1, s1, mu2, s2) == pytest.approx(1 + (1 + 4 - 4) * 2)


class _FakeI3D(torch.nn.Module):
    """Stands in for the I3D TorchScript: records its input; fails on clips shorter than 4 frames."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[2] < 4:
            raise RuntimeError("input too small in the temporal dimension")
        return torch.cat([x.mean(dim=(1, 2, 3, 4))[:, None], x.amin(dim=(1, 2, 3, 4))[:, None],
                          x.amax(dim=(1, 2, 3, 4))[:, None], torch.tensor(float(x.shape[3])).expand(x.shape[0], 1)],
                         dim=1)


def test_fvd_feeds_i3d_predicted_frames_in_0_1_at_224_and_says_when_clips_are_too_short(tmp_path):
    path = tmp_path / "i3d.pt"
    torch.jit.script(_FakeI3D()).save(str(path))
    g = torch.Generator().manual_seed(0)
    clips = torch.rand(3, 6, 3, 16, 16, generator=g) * 2 - 1
    clips[:, 0] = -5.0  # context frame out of range: must not reach I3D
    lm = LearnedMetrics(MetricWeights(i3d=path), torch.device("cpu"))
    lm.update(clips, clips, n_ctx=1)
    feats = torch.cat(lm.vreal)
    assert (feats[:, 1] >= 0).all() and (feats[:, 2] <= 1).all() and (feats[:, 3] == 224).all()
    assert lm.compute()["fvd"] == pytest.approx(0.0, abs=1e-6)
    short = LearnedMetrics(MetricWeights(i3d=path), torch.device("cpu"))
    short.update(clips[:, :4], clips[:, :4], n_ctx=1)  # 3 predicted frames
    assert "fvd" not in short.compute() and "3 predicted frames" in short.skipped["fvd"]


@pytest.mark.skipif(perceptual.weights_path() is None, reason="stlpips-pytorch is not installed")
def test_st_lpips_needs_no_path_and_scores_the_model_beside_copy_last():
    g = torch.Generator().manual_seed(0)
    clips = torch.rand(2, 4, 3, 24, 24, generator=g) * 2 - 1  # (B, F, C, H, W), 1 context frame
    lm = LearnedMetrics(MetricWeights(), torch.device("cpu"))
    assert "stlpips" not in lm.skipped
    lm.update(clips, clips, n_ctx=1)  # a perfect model
    out = lm.compute()
    assert out["stlpips"] == pytest.approx(0.0, abs=1e-6) and out["baseline_copy_last/stlpips"] > 0.01
    small = LearnedMetrics(MetricWeights(), torch.device("cpu"))
    small.update(clips[..., :16, :16], clips[..., :16, :16], n_ctx=1)
    assert "stlpips" not in small.compute() and "below" in small.skipped["stlpips"]
