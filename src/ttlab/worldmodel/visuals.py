"""Frames to pictures: uint8 conversion, GT-beside-prediction layouts and upscaled mp4s of predictions."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import torch


def write_mp4(path: str | Path, frames: np.ndarray, fps: int = 8, upscale: int = 4) -> Path:
    """uint8 (T, H, W, 3) -> H.264 mp4 via PyAV (nearest-neighbour upscaled, even sides)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    f = np.repeat(np.repeat(frames, upscale, axis=1), upscale, axis=2)
    f = f[:, : f.shape[1] // 2 * 2, : f.shape[2] // 2 * 2]
    with av.open(str(path), mode="w") as box:
        st = box.add_stream("libx264", rate=fps)
        st.width, st.height, st.pix_fmt = f.shape[2], f.shape[1], "yuv420p"
        for fr in f:
            for pkt in st.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(fr), format="rgb24")):
                box.mux(pkt)
        for pkt in st.encode():
            box.mux(pkt)
    return path


def to_uint8(x: torch.Tensor) -> np.ndarray:
    """(..., C, H, W) in [-1, 1] -> uint8 (..., H, W, C)."""
    y = ((x.float().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    return y.movedim(-3, -1).cpu().numpy()


def side_by_side(gt: torch.Tensor, pred: torch.Tensor) -> np.ndarray:
    """(N, T, C, H, W) pairs -> uint8 (T, N H, 2 W + 2, 3): GT left | prediction right, clips stacked."""
    sep = torch.ones_like(gt[..., :2])
    rows = torch.cat([gt, sep, pred], dim=-1)  # (N, T, C, H, 2W+2)
    return to_uint8(torch.cat(list(rows), dim=-2))  # (T, N H, 2W+2, 3)
