"""Pixel-aligned action conditioning: an action that is a point in the image, drawn as a map beside the frame.

PushT's action is the PD target of the agent, a position in the workspace the frame images. The global
injections (`injection.py`) give the model that position as one vector per frame, so to use it the model must
learn a map from a 2-D coordinate to a place in the image. Here the same points are also *drawn*: each of the
`frame_interval` raw targets that led to frame t becomes a Gaussian blob (`sigma` pixels) in its own channel,
patch-embedded with frame t, so the token of a patch knows "the agent is being pulled here" (the inductive bias
of pixel-aligned action conditioning in robot video models). Both paths coexist.

The denoiser receives the *normalised* actions (B, F, 2 K): K raw (x, y) points per frame. `NanoWMConfig.
action_pixels` = (sx, ox, sy, oy) maps a normalised point to pixel coordinates (column = x sx + ox, row =
y sy + oy; pixel centres at integers); `pixel_affine` builds it from the dataset's declared workspace side and
the action statistics. Frame 0 gets an empty map (nothing led to it: the null action).
"""

from __future__ import annotations

import torch

ACTION_MAPS = ("none", "gaussian")


def check_action_map(name: str, action_dim: int, sigma: float) -> str:
    if name not in ACTION_MAPS:
        raise ValueError(f"action_map {name!r}: expected one of {', '.join(ACTION_MAPS)}")
    if name != "none" and (action_dim % 2 or action_dim < 2):
        raise ValueError(f"action_map {name!r}: actions must be (x, y) points, action_dim={action_dim} is not even")
    if name != "none" and sigma <= 0:
        raise ValueError(f"action_map_sigma {sigma}: must be > 0 pixels")
    return name


def pixel_affine(extent: float, size: int, mean, std) -> tuple[float, float, float, float]:
    """(sx, ox, sy, oy) taking a normalised action (a - mean) / std of a point in a square workspace of side
    `extent` (imaged by a `size`-pixel frame, x -> column, y -> row) to pixel coordinates, centres at integers."""
    s = size / extent
    return (float(std[0]) * s, float(mean[0]) * s - 0.5, float(std[1]) * s, float(mean[1]) * s - 0.5)


def action_points(actions: torch.Tensor, affine: tuple[float, float, float, float]) -> torch.Tensor:
    """(B, F, 2 K) normalised actions -> (B, F, K, 2) pixel coordinates (column, row)."""
    sx, ox, sy, oy = affine
    p = actions.float().unflatten(-1, (-1, 2))  # (B, F, K, 2)
    scale = torch.tensor([sx, sy], device=p.device)
    shift = torch.tensor([ox, oy], device=p.device)
    return p * scale + shift  # (B, F, K, 2)


def gaussian_maps(points: torch.Tensor, size: int, sigma: float) -> torch.Tensor:
    """(B, F, K, 2) pixel coordinates -> (B, F, K, size, size): one unit-peak Gaussian blob per point."""
    grid = torch.arange(size, device=points.device, dtype=torch.float32)  # (S,)
    dx = (grid - points[..., 0, None]) ** 2  # (B, F, K, S) over columns
    dy = (grid - points[..., 1, None]) ** 2  # (B, F, K, S) over rows
    inv = -0.5 / sigma**2
    return torch.exp(inv * dy)[..., :, None] * torch.exp(inv * dx)[..., None, :]  # (B, F, K, S, S)


def render_action_maps(actions: torch.Tensor, affine: tuple[float, float, float, float], size: int,
                       sigma: float) -> torch.Tensor:
    """(B, F, 2 K) normalised actions -> (B, F, K, size, size) maps; frame 0's map is empty (the null action)."""
    maps = gaussian_maps(action_points(actions, affine), size, sigma)  # (B, F, K, S, S)
    keep = torch.ones(maps.shape[1], device=maps.device)
    keep[0] = 0.0
    return maps * keep.view(1, -1, 1, 1, 1)
