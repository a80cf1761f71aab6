"""Plot `wm_action_probe.py --overfit` curves side by side (follow rate, agent error, true-vs-swapped agreement).
Prints ONE JSON line last.

    python benchmarks/wm_action_probe_plot.py benchmarks/results/wm_evidence/action_probe/pool256.json \
        benchmarks/results/wm_evidence/action_probe/pool256_map.json --labels "global only (rel)" "map + global (abs)" \
        --out benchmarks/results/wm_evidence/action_probe/pool256_map.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import charts

PANELS = (("follow_rate", "follow rate (chance 0.5)"),
          ("agent_px_swap_followed", "swapped actions: agent px to the branch told"),
          ("agent_px_swap_own", "swapped actions: agent px to its own branch"),
          ("psnr_true_vs_swap", "true vs swapped predictions agree (dB)"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="+", help="probe JSON files (overfit mode, with a curve)")
    ap.add_argument("--labels", nargs="+", help="one label per run (default: the file names)")
    ap.add_argument("--out", type=Path, required=True, help="PNG to write")
    args = ap.parse_args()
    labels = args.labels or [p.stem for p in args.runs]
    if len(labels) != len(args.runs):
        sys.exit(f"--labels: {len(labels)} labels for {len(args.runs)} runs")
    curves = []
    for p in args.runs:
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"{p}: not a readable probe JSON ({type(e).__name__})")
        if not d.get("curve"):
            sys.exit(f"{p}: no training curve (run the probe with --overfit)")
        curves.append(d["curve"])
    colours = ["0.47", "tab:blue", "tab:red", "tab:green"]
    xmax = max(p["step"] for c in curves for p in c)
    fig, axes = charts.panels(len(PANELS), size=(3.6, 3.2))
    for ax, (key, title) in zip(axes, PANELS, strict=True):
        if key == "follow_rate":
            charts.reference(ax, 0.5, "chance", "0.6")
        for c, colour, lab in zip(curves, colours, labels, strict=False):
            charts.series(ax, [p["step"] for p in c], [p[key] for p in c], colour, label=lab, lw=2)
        ax.set_ylim(min(0.0, *(p[key] for c in curves for p in c)), 1.0 if key == "follow_rate" else None)
        ax.set_title(title, fontsize=8)
        ax.set_xlim(0, xmax)
        ax.set_xlabel("step")
    charts.legend_below(fig, axes, title="held-out contexts; chance follow rate 0.5")
    charts.save(fig, args.out)
    last = {lab: {k: c[-1][k] for k, _ in PANELS} | {"step": c[-1]["step"]} for c, lab in zip(curves, labels,
                                                                                               strict=True)}
    print(json.dumps({"benchmark": "wm_action_probe_plot", "png": args.out.name, "last": last}))


if __name__ == "__main__":
    main()
