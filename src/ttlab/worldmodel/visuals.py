"""Frames to pictures: uint8 conversion, GT-beside-prediction layouts, upscaled mp4s of predictions, strips and
rollout GIFs."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import torch
from PIL import Image, ImageDraw


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


def strip_png(path: str | Path, rows: list[tuple[str, torch.Tensor]], scale: int = 2) -> Path:
    """rows of (label, frames (T, C, H, W) in [-1, 1]) -> one PNG, frames left to right, rows top to bottom."""
    path = Path(path)
    label_w, pad = 96, 2
    H, W = rows[0][1].shape[-2:]
    width = label_w + max(len(f) for _, f in rows) * (W * scale + pad)
    img = Image.new("RGB", (width, len(rows) * (H * scale + pad)), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for r, (label, frames) in enumerate(rows):
        y = r * (H * scale + pad)
        draw.text((2, y + H * scale // 2 - 5), label, fill=(0, 0, 0))
        for k, fr in enumerate(to_uint8(frames)):
            tile = Image.fromarray(fr).resize((W * scale, H * scale), Image.NEAREST)
            img.paste(tile, (label_w + k * (W * scale + pad), y))
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def rollout_gif(path: str | Path, columns: list[tuple[str, torch.Tensor]], scale: int = 2, fps: int = 4) -> Path:
    """columns of (label, frames (N, T, C, H, W) in [-1, 1]) -> a GIF: episodes as rows, predictors as columns."""
    path = Path(path)
    N, T, _, H, W = columns[0][1].shape
    pad, head = 2, 12
    frames = []
    for t in range(T):
        img = Image.new("RGB", (len(columns) * (W * scale + pad), head + N * (H * scale + pad)), (255, 255, 255))
        draw = ImageDraw.Draw(img)
        for c, (label, v) in enumerate(columns):
            draw.text((c * (W * scale + pad) + 2, 0), label, fill=(0, 0, 0))
            for n in range(N):
                tile = Image.fromarray(to_uint8(v[n, t])).resize((W * scale, H * scale), Image.NEAREST)
                img.paste(tile, (c * (W * scale + pad), head + n * (H * scale + pad)))
        draw.text((2, img.height - 10), f"frame {t}", fill=(200, 0, 0))
        frames.append(img.convert("P", palette=Image.ADAPTIVE, colors=32))
    path.parent.mkdir(parents=True, exist_ok=True)
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0, optimize=True)
    return path
