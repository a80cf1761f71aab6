"""Object-level scores of PushT frames: what a blurred prediction cannot fake.

- Ink: pixels of the T block's colour and of the agent's colour (gym-pusht draws the T LightSlateGray and
  the agent RoyalBlue on white, over a LightGreen goal), counted per frame; a prediction is scored by its
  count over the true frame's (1.0 = all kept; a blur that fades the T to grey-white keeps little).
- Pose: a small CNN (`PoseProbe`) trained on real frames against the simulator's state reads the agent's
  position and the T's centre and angle from any frame. Its error on true frames is the floor; on
  predicted frames it measures where the model put the objects, in pixels and degrees.

Frames are float (..., 3, H, W) in [-1, 1], as everywhere in the world model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ttlab.worldmodel.data.pusht import tee_centre

TEE_RGB = (119, 136, 153)  # LightSlateGray
AGENT_RGB = (65, 105, 225)  # RoyalBlue
WORLD = 512.0  # gym-pusht's workspace side in world units


def colour_mask(frames: torch.Tensor, rgb: tuple[int, int, int], tol: float = 40.0) -> torch.Tensor:
    """(..., 3, H, W) frames in [-1, 1] -> bool (..., H, W): pixels within `tol` (0..255, max over channels)."""
    c = torch.tensor(rgb, dtype=torch.float32, device=frames.device).view(3, 1, 1) / 127.5 - 1.0
    return ((frames.float() - c).abs().amax(dim=-3) * 127.5) <= tol


def ink_counts(frames: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-frame pixel counts of the T's and the agent's colours: {"tee": (...), "agent": (...)}."""
    return {"tee": colour_mask(frames, TEE_RGB).sum(dim=(-2, -1)).float(),
            "agent": colour_mask(frames, AGENT_RGB).sum(dim=(-2, -1)).float()}


def pose_targets(states: np.ndarray) -> np.ndarray:
    """(N, 5) simulator states (agent x, y, block x, y, angle) -> (N, 6) probe targets: agent x, y and T centre
    x, y in [0, 1] of the workspace, cos and sin of the T's angle."""
    s = np.asarray(states, np.float64)
    centres = np.stack([tee_centre(b) for b in s[:, 2:5]]) if len(s) else np.zeros((0, 2))
    return np.concatenate([s[:, :2] / WORLD, centres / WORLD, np.cos(s[:, 4:5]), np.sin(s[:, 4:5])],
                          axis=1).astype(np.float32)


class PoseProbe(nn.Module):
    """(N, 3, H, W) frames in [-1, 1] -> (N, 6): agent x, y, T centre x, y (workspace fraction), cos, sin."""

    def __init__(self, width: int = 24):
        super().__init__()
        w = width
        self.net = nn.Sequential(  # 64 -> 32 -> 16 -> 8 -> 4, then an MLP on the 4x4 map (keeps where things are)
            nn.Conv2d(5, w, 4, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(w, 2 * w, 4, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(2 * w, 4 * w, 4, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(4 * w, 4 * w, 3, padding=1), nn.GELU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
            nn.Linear(64 * w, 256), nn.GELU(), nn.Linear(256, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N, _, H, W = x.shape
        ys = torch.linspace(-1, 1, H, device=x.device).view(1, 1, H, 1).expand(N, 1, H, W)
        xs = torch.linspace(-1, 1, W, device=x.device).view(1, 1, 1, W).expand(N, 1, H, W)
        return self.net(torch.cat([x.float(), xs, ys], dim=1))  # (N, 6); coordinate channels (CoordConv)


def pose_errors(pred: torch.Tensor, true: torch.Tensor, resolution: int = 64) -> dict[str, torch.Tensor]:
    """Probe outputs (..., 6) vs targets (..., 6) -> per-frame errors: agent and T position in pixels at
    `resolution`, T angle in degrees (the angle of the predicted (cos, sin), wrapped to [0, 180])."""
    px = float(resolution)  # workspace fraction -> pixels
    agent = (pred[..., 0:2] - true[..., 0:2]).norm(dim=-1) * px
    tee = (pred[..., 2:4] - true[..., 2:4]).norm(dim=-1) * px
    a_p = torch.atan2(pred[..., 5], pred[..., 4])
    a_t = torch.atan2(true[..., 5], true[..., 4])
    d = torch.remainder(a_p - a_t + math.pi, 2 * math.pi) - math.pi
    return {"agent_px": agent, "tee_px": tee, "tee_deg": d.abs() * 180.0 / math.pi}


@dataclass
class ProbeReport:
    steps: int
    train_frames: int
    heldout_frames: int
    heldout_agent_px: float
    heldout_tee_px: float
    heldout_tee_deg: float
    seconds: float


def train_pose_probe(frames: torch.Tensor, targets: torch.Tensor, val_frames: torch.Tensor,
                     val_targets: torch.Tensor, steps: int = 1500, batch: int = 64, lr: float = 3e-3,
                     seed: int = 0) -> tuple[PoseProbe, ProbeReport]:
    """Fit a `PoseProbe` on (N, 3, H, W) frames and (N, 6) targets (AdamW, cosine LR, light pixel-shift-free
    training: the probe must read exact positions); report its error on held-out frames."""
    import time

    t0 = time.perf_counter()
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    probe = PoseProbe()
    opt = torch.optim.AdamW(probe.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    w = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.5, 0.5])  # (cos, sin) vary over [-1, 1], positions over ~[0.1, 0.9]
    for _ in range(steps):
        idx = torch.randint(0, frames.shape[0], (batch,), generator=g)
        x, y = frames[idx].float(), targets[idx]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = probe(x)
        loss = ((out.float() - y).pow(2) * w).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    probe.eval().requires_grad_(False)
    err = pose_errors(read_poses(probe, val_frames), val_targets, frames.shape[-1])
    rep = ProbeReport(steps, int(frames.shape[0]), int(val_frames.shape[0]), float(err["agent_px"].mean()),
                      float(err["tee_px"].mean()), float(err["tee_deg"].mean()), time.perf_counter() - t0)
    return probe, rep


@torch.no_grad()
def read_poses(probe: PoseProbe, frames: torch.Tensor, batch: int = 256) -> torch.Tensor:
    """(..., 3, H, W) frames -> (..., 6) probe readings."""
    lead = frames.shape[:-3]
    flat = frames.reshape(-1, *frames.shape[-3:])
    out = torch.cat([probe(flat[i:i + batch]) for i in range(0, flat.shape[0], batch)]) if flat.shape[0] else \
        torch.zeros(0, 6)
    return out.reshape(*lead, 6)


def object_scores(pred: torch.Tensor, true: torch.Tensor, true_pose: torch.Tensor, probe: PoseProbe) -> dict:
    """Per-frame object scores of predicted frames (..., 3, H, W) against the true frames and true poses
    (..., 6): ink ratios (pred count / true count, per frame) and probe pose errors."""
    ip, it = ink_counts(pred), ink_counts(true)
    err = pose_errors(read_poses(probe, pred), true_pose, pred.shape[-1])
    return {"tee_ink_ratio": ip["tee"] / it["tee"].clamp(min=1.0), "agent_ink_ratio": ip["agent"] / it["agent"].clamp(
        min=1.0), **err}


def blur_frames(frames: torch.Tensor, sigma: float = 1.5) -> torch.Tensor:
    """Gaussian blur of (..., 3, H, W) frames (for tests: a blurred frame must lose ink)."""
    k = int(2 * math.ceil(3 * sigma) + 1)
    x = torch.arange(k, dtype=torch.float32) - k // 2
    g = torch.exp(-x**2 / (2 * sigma**2))
    g = g / g.sum()
    lead = frames.shape[:-3]
    f = frames.reshape(-1, *frames.shape[-3:]).float()
    C = f.shape[1]
    f = F.conv2d(F.pad(f, (k // 2,) * 4, mode="replicate"), g.view(1, 1, 1, k).expand(C, 1, 1, k), groups=C)
    f = F.conv2d(f, g.view(1, 1, k, 1).expand(C, 1, k, 1), groups=C)
    return f.reshape(*lead, *f.shape[1:])
