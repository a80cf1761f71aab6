"""Object-level scores of PushT frames: what a blurred prediction cannot fake.

- Ink: pixels of the T block's colour and of the agent's colour (gym-pusht draws the T LightSlateGray and
  the agent RoyalBlue on white, over a LightGreen goal), counted per frame; a prediction is scored by its
  count over the true frame's (1.0 = all kept; a blur that fades the T to grey-white keeps little).
- Pose, by matching against the simulator's geometry (`read_poses`): the agent is the centroid of its colour;
  the T's pose is the (position, angle) whose rasterised T (gym-pusht's two boxes, drawn as the renderer
  draws them: world / 8 = pixels at 64x64) best overlaps (IoU) the T-coloured pixels, searched over 10-degree
  steps around the colour centroid and refined. Its error on true frames is the floor; on predicted frames it
  says where the model put the objects, in pixels and degrees. A frame with no T (or agent) ink gets the
  image centre (angle 0) as its reading: a blur that erases an object pays for it.

Frames are float (..., 3, H, W) in [-1, 1], as everywhere in the world model.
"""

from __future__ import annotations

import math

import numpy as np
import torch
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


BAR = (-60.0, 60.0, 0.0, 30.0)  # the T's two boxes in its body frame: x0, x1, y0, y1 (gym-pusht `add_tee`)
STEM = (-15.0, 15.0, 30.0, 120.0)
AREA_CENTROID = (0.0, (3600.0 * 15.0 + 2700.0 * 75.0) / 6300.0)  # the centroid of the T's area, body frame


def tee_masks(pos: torch.Tensor, angle: torch.Tensor, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """Rasterise T poses (K, 2) world position, (K,) angle at pixel centres with world coordinates xs (W,)
    (columns) and ys (H,) (rows) -> bool (K, H, W): inside the T."""
    dx = xs.view(1, 1, -1) - pos[:, 0].view(-1, 1, 1)  # (K, 1, W)
    dy = ys.view(1, -1, 1) - pos[:, 1].view(-1, 1, 1)  # (K, H, 1)
    c, s = torch.cos(angle).view(-1, 1, 1), torch.sin(angle).view(-1, 1, 1)
    qx, qy = c * dx + s * dy, -s * dx + c * dy  # (K, H, W) body frame
    inside = lambda b: (qx >= b[0]) & (qx <= b[1]) & (qy >= b[2]) & (qy <= b[3])  # noqa: E731
    return inside(BAR) | inside(STEM)


def _centroid(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """bool (N, S, S) -> world centroids (N, 2) and pixel counts (N,)."""
    S = mask.shape[-1]
    g = (torch.arange(S, dtype=torch.float32) + 0.5) * (WORLD / S)
    n = mask.sum(dim=(-2, -1)).float()
    cx = (mask.float().sum(-2) * g).sum(-1) / n.clamp(min=1)
    cy = (mask.float().sum(-1) * g).sum(-1) / n.clamp(min=1)
    return torch.stack([cx, cy], -1), n


def _match_tee(mask: torch.Tensor, centroid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The T pose (block position (2,), angle) whose rasterisation best overlaps one bool (S, S) mask, searched
    in a window around the mask's centroid: 36 angles, then +-10 degrees by 2, then +-1 px shifts."""
    S = mask.shape[-1]
    step = WORLD / S
    r = int(round(90.0 / step))  # the T reaches < 90 world units from its area centroid
    c0, r0 = (int(v) for v in (centroid / step).floor())
    cols = torch.arange(max(c0 - r, 0), min(c0 + r + 1, S))
    rows = torch.arange(max(r0 - r, 0), min(r0 + r + 1, S))
    m = mask[rows][:, cols]  # (h, w) the window
    xs, ys = (cols.float() + 0.5) * step, (rows.float() + 0.5) * step
    ac = torch.tensor(AREA_CENTROID)

    def best(angles: torch.Tensor, shift: torch.Tensor):
        rot = torch.stack([torch.cos(angles) * ac[0] - torch.sin(angles) * ac[1],
                           torch.sin(angles) * ac[0] + torch.cos(angles) * ac[1]], -1)  # (K, 2)
        pos = centroid[None] + shift - rot  # (K, 2) block origin putting the area centroid at centroid + shift
        t = tee_masks(pos, angles, xs, ys)  # (K, h, w)
        iou = (t & m).sum(dim=(-2, -1)).float() / (t | m).sum(dim=(-2, -1)).float().clamp(min=1)
        k = int(iou.argmax())
        return pos[k], angles[k]

    _, a = best(torch.arange(36) * (2 * math.pi / 36), torch.zeros(1, 2))
    _, a = best(a + torch.arange(-5, 6) * math.radians(2.0), torch.zeros(1, 2))
    d = torch.arange(-2, 3, dtype=torch.float32) * (step / 2)  # +-1 px in half-pixel steps
    shifts = torch.stack(torch.meshgrid(d, d, indexing="ij"), -1).reshape(-1, 2)  # (25, 2)
    return best(a.expand(len(shifts)).clone(), shifts)


@torch.no_grad()
def read_poses(frames: torch.Tensor, min_tee_pixels: int = 8, min_agent_pixels: int = 2) -> torch.Tensor:
    """(..., 3, S, S) frames in [-1, 1] -> (..., 6) readings in `pose_targets`' layout: agent colour centroid,
    matched T centre, cos and sin of the matched T angle. Missing ink reads as the image centre, angle 0."""
    lead = frames.shape[:-3]
    f = frames.reshape(-1, *frames.shape[-3:]).float()
    agent_c, agent_n = _centroid(colour_mask(f, AGENT_RGB))
    tee_m = colour_mask(f, TEE_RGB)
    tee_c, tee_n = _centroid(tee_m)
    out = torch.zeros(f.shape[0], 6)
    centre = torch.full((2,), WORLD / 2)
    for i in range(f.shape[0]):
        out[i, 0:2] = (agent_c[i] if agent_n[i] >= min_agent_pixels else centre) / WORLD
        if tee_n[i] >= min_tee_pixels:
            pos, a = _match_tee(tee_m[i], tee_c[i])
            out[i, 2:4] = torch.from_numpy(tee_centre(np.array([pos[0], pos[1], a]))).float() / WORLD
            out[i, 4], out[i, 5] = torch.cos(a), torch.sin(a)
        else:
            out[i, 2:4], out[i, 4], out[i, 5] = centre / WORLD, 1.0, 0.0
    return out.reshape(*lead, 6)


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


def _near(mask: torch.Tensor, px: int) -> torch.Tensor:
    """bool (..., H, W) -> the pixels within `px` (Chebyshev) of a True pixel."""
    lead = mask.shape[:-2]
    m = mask.reshape(-1, 1, *mask.shape[-2:]).float()
    return (F.max_pool2d(m, 2 * px + 1, stride=1, padding=px) > 0).reshape(*lead, *mask.shape[-2:])


def ink_in_place(pred: torch.Tensor, true: torch.Tensor, rgb: tuple[int, int, int] = TEE_RGB,
                 px: int = 1) -> dict[str, torch.Tensor]:
    """Where a colour's ink is, not only how much: per frame of (..., 3, H, W) frames,
    `kept` = share of the true ink with predicted ink within `px` pixels (1 when there is no true ink), and
    `placed` = share of the predicted ink within `px` pixels of true ink (1 when nothing is drawn). A rigid copy
    shifted by <= px scores 1 and 1; a blurred-away object low `kept`; a speckle cloud around it low `placed`."""
    mp, mt = colour_mask(pred, rgb), colour_mask(true, rgb)
    n_p, n_t = mp.sum(dim=(-2, -1)).float(), mt.sum(dim=(-2, -1)).float()
    kept = (mt & _near(mp, px)).sum(dim=(-2, -1)).float()
    placed = (mp & _near(mt, px)).sum(dim=(-2, -1)).float()
    return {"kept": torch.where(n_t > 0, kept / n_t.clamp(min=1.0), torch.ones_like(n_t)),
            "placed": torch.where(n_p > 0, placed / n_p.clamp(min=1.0), torch.ones_like(n_p))}


def object_scores(pred: torch.Tensor, true: torch.Tensor, true_pose: torch.Tensor) -> dict:
    """Per-frame object scores of predicted frames (..., 3, H, W) against the true frames and the simulator's
    poses (..., 6): ink ratios (pred count / true count, per frame), the T's ink kept and placed
    (`ink_in_place`) and pose errors of `read_poses`."""
    ip, it = ink_counts(pred), ink_counts(true)
    tee = ink_in_place(pred, true)
    err = pose_errors(read_poses(pred), true_pose, pred.shape[-1])
    return {"tee_ink_ratio": ip["tee"] / it["tee"].clamp(min=1.0), "agent_ink_ratio": ip["agent"] / it["agent"].clamp(
        min=1.0), "tee_kept": tee["kept"], "tee_placed": tee["placed"], **err}


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
