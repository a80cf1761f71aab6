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

from PIL import Image, ImageDraw

PANELS = (("follow_rate", "follow rate (chance 0.5)"),
          ("agent_px_swap_followed", "swapped actions: agent px to the branch told"),
          ("agent_px_swap_own", "swapped actions: agent px to its own branch"),
          ("psnr_true_vs_swap", "true vs swapped predictions agree (dB)"))


def to_px(x: float, y: float, box: tuple, xmax: float, span: tuple[float, float]) -> tuple[float, float]:
    """A (step, value) point -> image coordinates inside box (x0, y0, x1, y1) for values in span (lo, hi)."""
    x0, y0, x1, y1 = box
    lo, hi = span
    return x0 + (x1 - x0) * x / xmax, y1 - (y1 - y0) * (y - lo) / max(hi - lo, 1e-9)


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
    colours = [(120, 120, 120), (31, 119, 180), (214, 39, 40), (44, 160, 44)]
    W, H, pad = 330, 300, 45
    img = Image.new("RGB", (W * len(PANELS), H + 40), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    xmax = max(p["step"] for c in curves for p in c)
    for i, (key, title) in enumerate(PANELS):
        x0, y0, x1, y1 = i * W + pad, 30, (i + 1) * W - 10, H - 30  # the panel's plot box
        vals = [p[key] for c in curves for p in c] + ([0.0, 1.0] if key == "follow_rate" else [0.0])
        lo, hi = min(vals), max(vals)
        box, span = (x0, y0, x1, y1), (lo, hi)
        draw.rectangle([x0, y0, x1, y1], outline=(0, 0, 0))
        draw.text((x0, 8), title, fill=(0, 0, 0))
        draw.text((x0 - 40, y0 - 5), f"{hi:.3g}", fill=(0, 0, 0))
        draw.text((x0 - 40, y1 - 5), f"{lo:.3g}", fill=(0, 0, 0))
        draw.text((x1 - 30, y1 + 4), f"{xmax}", fill=(0, 0, 0))
        draw.text((x0, y1 + 4), "step 0", fill=(0, 0, 0))
        if key == "follow_rate":
            draw.line([to_px(0, 0.5, box, xmax, span), to_px(xmax, 0.5, box, xmax, span)], fill=(200, 200, 200), width=1)
        for c, rgb in zip(curves, colours, strict=False):
            pts = [to_px(p["step"], p[key], box, xmax, span) for p in c]
            draw.line(pts, fill=rgb, width=2)
    legend = "   ".join(f"{name}: {lab}" for lab, name in zip(labels, ("grey", "blue", "red", "green"), strict=False))
    draw.text((pad, H + 12), legend + "   (held-out contexts; chance follow rate 0.5)", fill=(0, 0, 0))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    img.save(args.out)
    last = {lab: {k: c[-1][k] for k, _ in PANELS} | {"step": c[-1]["step"]} for c, lab in zip(curves, labels,
                                                                                               strict=True)}
    print(json.dumps({"benchmark": "wm_action_probe_plot", "png": args.out.name, "last": last}))


if __name__ == "__main__":
    main()
