"""The figures of `wm_ablation.py` (PIL, no matplotlib): each run's training loss curve, and the scorecard metrics as
bars per arm and seed beside the cheap predictors. Used by `wm_ablation.py` (`--plot` redraws them from the JSON)."""

from __future__ import annotations

import math
from pathlib import Path

from PIL import Image, ImageDraw

COLORS = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
          (227, 119, 194), (127, 127, 127), (188, 189, 34))
BASELINE_COLORS = {"copy_last": (0, 0, 0), "mean_frame": (120, 120, 120), "blend": (200, 60, 160)}


def ema(values: list[float], decay: float = 0.9) -> list[float]:
    """Exponential moving average (bias-corrected) of a sequence."""
    out, m = [], 0.0
    for i, v in enumerate(values):
        m = decay * m + (1 - decay) * v
        out.append(m / (1 - decay ** (i + 1)))
    return out


def lighter(rgb: tuple[int, int, int], f: float = 0.5) -> tuple[int, int, int]:
    return tuple(int(c + (255 - c) * f) for c in rgb)


def _frame(draw: ImageDraw.ImageDraw, box: tuple, title: str, lo: float, hi: float, log: bool = False) -> None:
    x0, y0, x1, y1 = box
    draw.rectangle(box, outline=(0, 0, 0))
    draw.text((x0, y0 - 14), title, fill=(0, 0, 0))
    for f in (0.0, 0.5, 1.0):
        v = lo + f * (hi - lo)
        y = y1 - f * (y1 - y0)
        draw.line([(x0 - 4, y), (x0, y)], fill=(0, 0, 0))
        label = f"{10 ** v:.3g}" if log else f"{v:.3g}"
        draw.text((x0 - 44, y - 6), label, fill=(0, 0, 0))


def loss_panel(draw: ImageDraw.ImageDraw, box: tuple, title: str, curves: list[tuple[str, list, tuple, bool]]) -> None:
    """curves: (label, [(step, loss)], rgb, dashed); EMA of the loss on a log axis."""
    pts = [(s, v) for _, c, _, _ in curves for s, v in c if v > 0]
    if not pts:
        _frame(draw, box, title + " (no data)", 0, 1)
        return
    smooth = [ema([v for _, v in c]) for _, c, _, _ in curves]
    ys = [math.log10(v) for sm in smooth for v in sm if v > 0]
    lo, hi = min(ys), max(ys)
    hi = hi if hi > lo else lo + 1
    xmax = max(s for s, _ in pts) or 1
    _frame(draw, box, title, lo, hi, log=True)
    x0, y0, x1, y1 = box
    for (_, c, rgb, dashed), sm in zip(curves, smooth, strict=True):
        xy = [(x0 + (x1 - x0) * s / xmax, y1 - (y1 - y0) * (math.log10(v) - lo) / (hi - lo))
              for (s, _), v in zip(c, sm, strict=True) if v > 0]
        for i, (a, b) in enumerate(zip(xy, xy[1:], strict=False)):
            if not dashed or i % 2 == 0:
                draw.line([a, b], fill=rgb, width=2)
    for i, (label, _, rgb, dashed) in enumerate(curves):
        draw.text((x1 + 8, y0 + 12 * i), ("- - " if dashed else "--- ") + label, fill=rgb)
    draw.text((x0, y1 + 4), f"step 0 .. {xmax}", fill=(0, 0, 0))


def bar_panel(draw: ImageDraw.ImageDraw, box: tuple, title: str, bars: list[tuple[str, list[float], tuple]],
              lines: dict[str, float]) -> None:
    """bars: (arm, a value per seed, rgb): seed 0 dark, later seeds light; lines: baseline name -> value."""
    bars = [(arm, [v for v in vs if v is not None], rgb) for arm, vs, rgb in bars]
    vals = [v for _, vs, _ in bars for v in vs] + list(lines.values())
    if not vals:
        _frame(draw, box, title + " (no data)", 0, 1)
        return
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.15 or abs(hi) * 0.1 or 1.0
    lo, hi = lo - pad, hi + pad
    _frame(draw, box, title, lo, hi)
    x0, y0, x1, y1 = box

    def y(v: float) -> float:
        return y1 - (y1 - y0) * (v - lo) / (hi - lo)

    slot = (x1 - x0) / max(len(bars), 1)
    for i, (arm, vs, rgb) in enumerate(bars):
        w = slot * 0.8 / max(len(vs), 1)
        for j, v in enumerate(vs):
            bx = x0 + i * slot + slot * 0.1 + j * w
            draw.rectangle([bx, y(v), bx + w - 1, y1], fill=rgb if j == 0 else lighter(rgb))
        draw.text((x0 + i * slot + 2, y1 + 4 + 10 * (i % 2)), arm.replace("pred_", "").replace("inj_", "i:")[:10],
                  fill=(0, 0, 0))
    for k, (name, v) in enumerate(lines.items()):
        rgb = BASELINE_COLORS.get(name, (0, 0, 0))
        for xx in range(int(x0), int(x1), 8):
            draw.line([(xx, y(v)), (xx + 4, y(v))], fill=rgb, width=1)
        draw.text((x1 - 90, y0 + 4 + 11 * k), f"{name} {v:.3g}", fill=rgb)


def save_loss_curves(path: Path, groups: list[tuple[str, list[tuple[str, list, tuple, bool]]]], note: str) -> Path:
    """One loss panel per group (e.g. target arms, injection arms), side by side."""
    img = Image.new("RGB", (620 * len(groups), 380), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for i, (title, curves) in enumerate(groups):
        loss_panel(draw, (620 * i + 60, 30, 620 * i + 440, 330), title, curves)
    draw.text((60, 358), note, fill=(0, 0, 0))
    img.save(path)
    return path


def save_bars(path: Path, panels: list[tuple[str, list[tuple[str, list[float], tuple]], dict[str, float]]],
              note: str, cols: int = 3) -> Path:
    """A grid of bar panels (title, bars, baseline lines)."""
    rows = math.ceil(len(panels) / cols)
    img = Image.new("RGB", (cols * 400, rows * 300 + 30), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for k, (title, bars, lines) in enumerate(panels):
        r, c = divmod(k, cols)
        bar_panel(draw, (400 * c + 55, 300 * r + 30, 400 * c + 385, 300 * r + 260), title, bars, lines)
    draw.text((55, rows * 300 + 8), note, fill=(0, 0, 0))
    img.save(path)
    return path
