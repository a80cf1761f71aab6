"""The figures of `wm_ablation.py`: each run's training loss curve, and the scorecard metrics as bars per arm and
seed beside the cheap predictors. Used by `wm_ablation.py` (`--plot` redraws them from the JSON)."""

from __future__ import annotations

from pathlib import Path

import charts

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


def loss_panel(ax: charts.Axes, title: str, curves: list[tuple[str, list, tuple, bool]]) -> None:
    """curves: (label, [(step, loss)], rgb, dashed); EMA of the loss on a log axis."""
    if not any(v > 0 for _, c, _, _ in curves for _, v in c):
        ax.set_title(title + " (no data)")
        return
    for label, c, rgb, dashed in curves:
        charts.series(ax, [s for s, _ in c], ema([v for _, v in c]), charts.rgb(rgb), dashed=dashed, label=label)
    ax.set_yscale("log")
    ax.set_xlim(0, max(s for _, c, _, _ in curves for s, _ in c) or 1)
    ax.set_title(title)
    ax.set_xlabel("step")
    charts.legend_outside(ax)


def bar_panel(ax: charts.Axes, title: str, bars: list[tuple[str, list[float], tuple]],
              lines: dict[str, float]) -> None:
    """bars: (arm, a value per seed, rgb): seed 0 dark, later seeds light; lines: baseline name -> value."""
    bars = [(arm, [v for v in vs if v is not None], rgb) for arm, vs, rgb in bars]
    vals = [v for _, vs, _ in bars for v in vs] + list(lines.values())
    if not vals:
        ax.set_title(title + " (no data)")
        return
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.15 or abs(hi) * 0.1 or 1.0
    charts.grouped_bars(ax, [arm.replace("pred_", "").replace("inj_", "i:") for arm, _, _ in bars],
                        [[(v, charts.rgb(rgb if j == 0 else lighter(rgb))) for j, v in enumerate(vs)]
                         for _, vs, rgb in bars])
    for name, v in lines.items():
        ax.axhline(v, color=charts.rgb(BASELINE_COLORS.get(name, (0, 0, 0))), lw=1, ls="--", label=f"{name} {v:.3g}")
    ax.set_ylim(lo - pad, hi + 2 * pad)  # the baselines' legend in one row above the highest bar or line
    ax.set_title(title)
    if lines:
        ax.legend(loc="upper center", ncols=len(lines), fontsize=7, frameon=False, handlelength=1.5,
                  columnspacing=1.0, borderaxespad=0.2)


def save_loss_curves(path: Path, groups: list[tuple[str, list[tuple[str, list, tuple, bool]]]], note: str) -> Path:
    """One loss panel per group (e.g. target arms, injection arms), side by side."""
    fig, axes = charts.panels(len(groups), size=(6.2, 3.8), note=note)
    for ax, (title, curves) in zip(axes, groups, strict=True):
        loss_panel(ax, title, curves)
    return charts.save(fig, path)


def save_bars(path: Path, panels: list[tuple[str, list[tuple[str, list[float], tuple]], dict[str, float]]],
              note: str, cols: int = 3) -> Path:
    """A grid of bar panels (title, bars, baseline lines)."""
    fig, axes = charts.panels(len(panels), cols=min(cols, len(panels)), size=(4.0, 3.0), note=note)
    for ax, (title, bars, lines) in zip(axes, panels, strict=True):
        bar_panel(ax, title, bars, lines)
    return charts.save(fig, path)
