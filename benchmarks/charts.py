"""The benchmarks' charts: matplotlib on the Agg backend (files only, no display) and the few pieces the scripts'
figures share. A script imports it as a sibling module (`python benchmarks/X.py` puts `benchmarks/` on `sys.path`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display, PNGs only
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

plt.rcParams.update({"font.size": 9, "axes.titlesize": 9, "legend.fontsize": 8, "axes.grid": True,
                     "grid.alpha": 0.3})

Colour = Any  # anything matplotlib takes as a colour: a name, "#rrggbb", an (r, g, b) of floats in [0, 1]


def rgb(c: Sequence[int]) -> tuple[float, ...]:
    """A 0-255 colour, e.g. (31, 119, 180), as matplotlib's floats in [0, 1]."""
    return tuple(v / 255 for v in c)


def panels(n: int, cols: int | None = None, size: tuple[float, float] = (5.0, 3.6), title: str = "",
           note: str = "", span_last: bool = False) -> tuple[Figure, list[Axes]]:
    """A figure of `n` >= 1 panels, `cols` to a row (default: one row), each about `size` inches; `title` above
    them, `note` (a caption) below (without a legend below: see `legend_below`). `span_last`: the last panel takes
    its whole row."""
    cols = max(1, min(cols or n, n))
    rows = math.ceil(n / cols) if not span_last else math.ceil((n - 1) / cols) + 1
    fig = plt.figure(figsize=(size[0] * cols, size[1] * rows), layout="constrained")
    grid = fig.add_gridspec(rows, cols)
    axes = [fig.add_subplot(grid[divmod(k, cols)]) for k in range(n - 1 if span_last else n)]
    if span_last:
        axes.append(fig.add_subplot(grid[rows - 1, :]))
    if title:
        fig.suptitle(title, fontsize=10)
    if note:
        fig.supxlabel(note, fontsize=9)
    return fig, axes


def save(fig: Figure, path: Path, dpi: int = 110) -> Path:
    """Write the figure as a PNG at `path` (its folder made if missing) and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def series(ax: Axes, xs: Sequence[float], ys: Sequence[float], colour: Colour, dashed: bool = False,
           label: str | None = None, span: tuple[float, float] | None = None, **kw: Any) -> None:
    """One line, dashed or solid; NaN (and None) points are left out and the line joins across them. With `span`
    (lo, hi) the values are clamped into it, so one off the axis shows at its edge. `kw` go to `Axes.plot` (e.g.
    `lw`, `marker`, `drawstyle`)."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None and y == y]
    if span:
        pts = [(x, min(max(y, span[0]), span[1])) for x, y in pts]
    kw.setdefault("lw", 1.5)
    ax.plot([x for x, _ in pts], [y for _, y in pts], "--" if dashed else "-", color=colour, label=label, **kw)


def reference(ax: Axes, y: float, label: str, colour: Colour = "0.5", below: bool = False) -> None:
    """A horizontal reference line across the panel, labelled at its right end, just above the line (or `below`
    it, for two lines close together)."""
    ax.axhline(y, color=colour, lw=1, zorder=1)
    ax.annotate(label, (1, y), xycoords=("axes fraction", "data"), xytext=(-4, -2 if below else 2),
                textcoords="offset points", ha="right", va="top" if below else "bottom", fontsize=8, color=colour)


def _labelled(axes: Sequence[Axes]) -> dict[str, Any]:
    """Every label drawn on the panels once (the first line or patch to carry it), in the order drawn."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    return seen


def legend_outside(ax: Axes) -> None:
    """The panel's legend (each label once) to the right of it, off the data."""
    seen = _labelled([ax])
    ax.legend(seen.values(), seen.keys(), loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)


def legend_below(fig: Figure, axes: Sequence[Axes], title: str = "") -> None:
    """One legend for all the panels (each label once), below them; `title` above its entries (a figure with a
    legend below takes its caption here, not as a `panels` note, which would sit in the same place)."""
    seen = _labelled(axes)
    fig.legend(seen.values(), seen.keys(), loc="outside lower center", ncols=min(len(seen), 6), frameon=False,
               title=title or None, title_fontsize=9)


def trial_curves(score_ax: Axes, delta_ax: Axes,
                 runs: Sequence[tuple[Sequence[float], Sequence[Sequence[float]], Sequence[Colour]]]) -> None:
    """Learning curves over trials (the driving benchmarks), runs = (agent-steps, the values of each trial, the colour
    of each trial) each: trial 0 dashed and every later trial solid on `score_ax` (in [0, 1]), trial k - trial 0
    for each k >= 1 on `delta_ax` (in [-0.5, 1], a line at zero); values off those ranges drawn at their edge."""
    xmax = 1.0
    for xs, trials, colours in runs:
        for k, (ys, colour) in enumerate(zip(trials, colours, strict=True)):
            series(score_ax, xs, ys, colour, dashed=k == 0, span=(0.0, 1.0), lw=1.0 if k == 0 else 1.5)
            if k:
                series(delta_ax, xs, [b - a for a, b in zip(trials[0], ys, strict=True)], colour, span=(-0.5, 1.0))
        xmax = max([xmax, *xs])
    for ax, span in ((score_ax, (0.0, 1.0)), (delta_ax, (-0.5, 1.0))):
        ax.set_ylim(*span)
        ax.set_xlim(0, xmax)
        ax.set_xlabel("agent-steps")
    delta_ax.axhline(0, color="0.6", lw=1, zorder=1)


def grouped_bars(ax: Axes, names: Sequence[str], cells: Sequence[Sequence[tuple[float | None, Colour]]]) -> None:
    """Bars side by side for each category: `cells[i]` = (value, colour) of each bar of `names[i]`; a NaN or None
    value leaves its place empty. The names label the x axis."""
    for i, row in enumerate(cells):
        w = 0.8 / max(len(row), 1)
        for j, (v, colour) in enumerate(row):
            if v is not None and v == v:
                ax.bar(i - 0.4 + (j + 0.5) * w, v, w, color=colour)
    ax.set_xticks(range(len(names)), names, fontsize=8, rotation=30 if len(names) > 6 else 0, ha="right"
                  if len(names) > 6 else "center")
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.grid(axis="x", visible=False)


def key(where: Figure | Axes, entries: Sequence[tuple[str, Colour]], **kw: Any) -> None:
    """A legend of colour swatches, (label, colour) each, on a panel or (below the panels) on the figure; `kw` go to
    `legend` (e.g. `title`, the figure's caption)."""
    if not entries:
        return
    handles = [Patch(color=c, label=label) for label, c in entries]
    if isinstance(where, Figure):
        kw = {"loc": "outside lower center", "ncols": len(handles), **kw}
    where.legend(handles=handles, fontsize=8, frameon=False, **kw)
