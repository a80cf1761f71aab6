"""Frame-quality metrics on predicted frames only (context frames excluded), plus copy-last, gray and
mean-frame baselines on the same frames.

Frames are float tensors (..., C, H, W) in [-1, 1]. PSNR and SSIM are always available (pure torch;
SSIM is Wang et al. 2004 with an 11x11 Gaussian window, sigma 1.5, K1 = 0.01, K2 = 0.03, on the
[0, 1] range, averaged over channels). LPIPS, FID and FVD need network weights; they run only when the
weight file is given by path (`MetricWeights`), and otherwise are reported as skipped with the reason
-- never downloaded. The PushT scorecard's perceptual distance is ST-LPIPS, whose weights ship in a wheel
(`perceptual.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ttlab.worldmodel import perceptual

PSNR_CAP_DB = 80.0
"""An exact frame scores this (the official metric's cap), not infinity or a value set by an epsilon."""


def psnr(pred: torch.Tensor, target: torch.Tensor, cap_db: float = PSNR_CAP_DB) -> torch.Tensor:
    """Per-frame PSNR in dB of (..., C, H, W) frames in [-1, 1] (peak-to-peak 2), at most `cap_db`. Returns (...)."""
    mse = (pred.float() - target.float()).pow(2).mean(dim=(-3, -2, -1))
    return (10 * torch.log10(4.0 / mse.clamp(min=1e-30))).clamp(max=cap_db)


def _gaussian(size: int = 11, sigma: float = 1.5, device=None) -> torch.Tensor:
    x = torch.arange(size, dtype=torch.float32, device=device) - (size - 1) / 2
    g = torch.exp(-(x**2) / (2 * sigma**2))
    return g / g.sum()  # (size,)


def ssim(pred: torch.Tensor, target: torch.Tensor, window: int = 11, sigma: float = 1.5) -> torch.Tensor:
    """Per-frame SSIM of (..., C, H, W) frames in [-1, 1], computed on [0, 1]; 'valid' windows. Returns (...)."""
    lead = pred.shape[:-3]
    C, H, W = pred.shape[-3:]
    x = (pred.float().reshape(-1, C, H, W) + 1) / 2  # (N, C, H, W)
    y = (target.float().reshape(-1, C, H, W) + 1) / 2
    win = min(window, H, W)
    g = _gaussian(win, sigma, x.device)
    k = (g[:, None] * g[None, :]).expand(C, 1, win, win)  # (C, 1, w, w) depthwise

    def blur(z: torch.Tensor) -> torch.Tensor:
        return F.conv2d(z, k, groups=C)

    mx, my = blur(x), blur(y)
    sxx, syy, sxy = blur(x * x) - mx**2, blur(y * y) - my**2, blur(x * y) - mx * my
    c1, c2 = 0.01**2, 0.03**2
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx**2 + my**2 + c1) * (sxx + syy + c2))  # (N, C, h, w)
    return s.mean(dim=(1, 2, 3)).reshape(lead)


def quantize(x: torch.Tensor) -> torch.Tensor:
    """Frames in [-1, 1] -> the nearest 8-bit value (what a saved prediction holds), still in [-1, 1]."""
    return ((x.float().clamp(-1, 1) + 1) * 127.5).round() / 127.5 - 1


def frame_metrics(pred: torch.Tensor, target: torch.Tensor, n_ctx: int,
                  mean_frame: torch.Tensor | None = None, per_lag: bool = False) -> dict[str, float]:
    """PSNR/SSIM of predicted frames (index >= n_ctx) of (B, F, C, H, W) clips, and of the baselines on the
    same frames: copy-last-context, a mid-gray frame (0), and `mean_frame` (C, H, W) when given (the mean
    training frame: what a model that ignores context and actions converges to under MSE).

    Means are over every predicted frame (per-frame PSNR, capped at 80 dB, then averaged). `per_lag` adds
    `<name>/lagK` for K = 1 .. F - n_ctx (K frames after the last context frame).
    Host sync: returns python floats (called once per evaluation batch, not inside a step).
    """
    p, t = pred[:, n_ctx:], target[:, n_ctx:]  # (B, Fp, C, H, W)
    base = target[:, n_ctx - 1:n_ctx].expand_as(t)  # copy the last context frame forward
    per_frame = {"psnr": psnr(p, t), "ssim": ssim(p, t),  # each (B, Fp)
                 "baseline_copy_last/psnr": psnr(base, t), "baseline_copy_last/ssim": ssim(base, t),
                 "baseline_gray/psnr": psnr(torch.zeros_like(t), t)}
    if mean_frame is not None:
        mf = mean_frame.to(t).expand_as(t)
        per_frame.update({"baseline_mean_frame/psnr": psnr(mf, t), "baseline_mean_frame/ssim": ssim(mf, t)})
    out = {k: float(v.mean()) for k, v in per_frame.items()}
    if per_lag:
        for k, v in per_frame.items():
            for lag in range(v.shape[1]):
                out[f"{k}/lag{lag + 1}"] = float(v[:, lag].mean())
    return out


@dataclass
class MetricWeights:
    """Local weight files for the learned metrics; None = skip that metric."""

    lpips: Path | None = None
    """TorchScript LPIPS network (x, y in [-1, 1] -> distance), e.g. exported from the `lpips` package."""
    i3d: Path | None = None
    """TorchScript I3D feature extractor (the StyleGAN-V / FVD `i3d_torchscript.pt`) for FVD; fed the predicted
    frames only, in [0, 1], resized to 224 (B, C, T, 224, 224)."""
    inception: Path | None = None
    """TorchScript Inception feature extractor (2048-d pool features) for FID."""


def frechet_distance(mu1, sigma1, mu2, sigma2) -> float:
    """||mu1 - mu2||^2 + Tr(S1 + S2 - 2 sqrt(S1 S2)), float64 numpy/scipy."""
    from scipy import linalg  # deferred on purpose: scipy is optional, only the FID needs it

    covmean, _ = linalg.sqrtm(sigma1 @ sigma2, disp=False)
    covmean = np.real(covmean)
    return float(((mu1 - mu2) ** 2).sum() + np.trace(sigma1 + sigma2 - 2 * covmean))


def feature_stats(feats: torch.Tensor):
    f = feats.double().cpu().numpy()
    return f.mean(0), np.cov(f, rowvar=False)


def i3d_input(frames: torch.Tensor, size: int = 224) -> torch.Tensor:
    """(B, T, C, H, W) frames in [-1, 1] -> (B, C, T, size, size) in [0, 1], bilinearly resized: the input the
    official FVD protocol feeds I3D."""
    B, T, C, H, W = frames.shape
    x = ((frames.float() + 1) / 2).clamp(0, 1).flatten(0, 1)  # (B T, C, H, W)
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return x.reshape(B, T, C, size, size).transpose(1, 2)  # (B, C, T, size, size)


class LearnedMetrics:
    """LPIPS / FID / FVD from TorchScript weights given by path, and ST-LPIPS from its wheel (model and copy-last);
    `skipped` says why a metric is absent."""

    def __init__(self, weights: MetricWeights, device: torch.device):
        self.nets, self.skipped = {}, {}
        for name, path in (("lpips", weights.lpips), ("fvd", weights.i3d), ("fid", weights.inception)):
            if path is None:
                self.skipped[name] = f"no weight file given (--metrics.{ {'fvd': 'i3d', 'fid': 'inception'}.get(name, name)} PATH)"
                continue
            p = Path(path)
            if not p.exists():
                raise FileNotFoundError(f"{name} weights not found: {p}")
            self.nets[name] = torch.jit.load(str(p), map_location=device).eval()
        self.lp, self.real, self.fake, self.vreal, self.vfake = [], [], [], [], []
        # ST-LPIPS needs no path: its weights ship in a wheel (scored on CPU, beside copy-last on the same frames)
        self.stl_net = perceptual.load() if perceptual.skipped_reason() is None else None
        if self.stl_net is None:
            self.skipped["stlpips"] = perceptual.skipped_reason()
        self.stl, self.stl_copy = [], []

    @torch.no_grad()
    def update(self, pred: torch.Tensor, target: torch.Tensor, n_ctx: int) -> None:
        p, t = pred[:, n_ctx:], target[:, n_ctx:]  # (B, Fp, C, H, W): predicted frames only
        if self.stl_net is not None and perceptual.skipped_for(t) is not None:
            self.stl_net, self.skipped["stlpips"] = None, perceptual.skipped_for(t)
        if self.stl_net is not None:
            tc = t.detach().float().cpu()
            tf = perceptual.frame_features(self.stl_net, tc)
            self.stl.append(perceptual.frame_distance(self.stl_net, p.detach().float().cpu(), tf).flatten())
            last = target[:, n_ctx - 1:n_ctx].detach().float().cpu().expand_as(tc)
            self.stl_copy.append(perceptual.frame_distance(self.stl_net, last, tf).flatten())
        if "lpips" in self.nets:
            self.lp.append(self.nets["lpips"](p.flatten(0, 1), t.flatten(0, 1)).flatten())
        if "fid" in self.nets:
            self.fake.append(self.nets["fid"](p.flatten(0, 1)))
            self.real.append(self.nets["fid"](t.flatten(0, 1)))
        if "fvd" in self.nets:
            try:
                self.vfake.append(self.nets["fvd"](i3d_input(p)))
                self.vreal.append(self.nets["fvd"](i3d_input(t)))
            except (RuntimeError, torch.jit.Error) as e:  # I3D's temporal pooling cannot take very short clips
                del self.nets["fvd"]
                self.vfake, self.vreal = [], []
                self.skipped["fvd"] = (f"I3D cannot embed clips of {p.shape[1]} predicted frames (the official protocol "
                                       f"scores 16); evaluate longer windows for FVD. I3D said: {str(e)[:200]}")

    def compute(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.stl:
            out["stlpips"] = float(torch.cat(self.stl).mean())
            out["baseline_copy_last/stlpips"] = float(torch.cat(self.stl_copy).mean())
        if self.lp:
            out["lpips"] = float(torch.cat(self.lp).mean())
        for name, real, fake in (("fid", self.real, self.fake), ("fvd", self.vreal, self.vfake)):
            if real:
                r, f = torch.cat(real), torch.cat(fake)
                if r.shape[0] < 2:
                    self.skipped[name] = "needs at least 2 samples"
                    continue
                out[name] = frechet_distance(*feature_stats(r), *feature_stats(f))
        return out
