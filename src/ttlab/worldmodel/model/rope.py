"""Rotary position embeddings: 1-D over frames (temporal blocks), 2-D over the patch grid (spatial blocks).

Convention: a head vector of size `d` is split into halves `(x1, x2)`; the pair `(x1[i], x2[i])` is rotated
by angle `pos * freq[i]`. In 2-D, the first half of the frequency slots follows the row index and the
second half the column index, so attention scores depend only on the (row, col) offset between patches.
"""

from __future__ import annotations

import torch


def rope_freqs(dim: int, base: float = 10000.0) -> torch.Tensor:
    """Inverse frequencies for `dim // 2` rotation pairs: base^(-2i/dim). Returns (dim // 2,)."""
    if dim % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {dim}")
    return base ** (-torch.arange(0, dim // 2, dtype=torch.float64) * 2.0 / dim)


def rope_1d(length: int, dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (length, dim // 2), for positions 0..length-1."""
    pos = torch.arange(length, dtype=torch.float64)  # (L,)
    ang = pos[:, None] * rope_freqs(dim, base)[None]  # (L, dim/2)
    return ang.cos().float(), ang.sin().float()


def rope_2d(h: int, w: int, dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (h*w, dim // 2), row-major over the grid; rows use the first dim/4 pairs, cols the rest."""
    if dim % 4:
        raise ValueError(f"2-D RoPE needs a head dimension divisible by 4, got {dim}")
    f = rope_freqs(dim // 2, base)  # (dim/4,)
    rows = torch.arange(h, dtype=torch.float64).repeat_interleave(w)  # (h*w,)
    cols = torch.arange(w, dtype=torch.float64).repeat(h)  # (h*w,)
    ang = torch.cat([rows[:, None] * f[None], cols[:, None] * f[None]], dim=-1)  # (h*w, dim/2)
    return ang.cos().float(), ang.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x` (..., L, d) by per-position angles; cos/sin (L, d/2). Computed in x's dtype."""
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]  # (..., L, d/2)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., L, d)
