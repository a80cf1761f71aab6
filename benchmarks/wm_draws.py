"""How much of a world model's score is its sampling noise: several `wm_evidence.py --eval-only --noise-seed N`
scorings of one trained run with one sampler, summarised. Prints ONE JSON line last.

A diffusion model's rollouts depend on the noise it draws. The evidence scores one draw; this reads several
scorings that differ only in `--noise-seed` (same run, step, windows, episodes and sampler) and reports, for the
model's scores on windows and rollouts, the mean, the standard deviation over draws and the range, beside the
baselines (which draw no noise, so are the same in every scoring); and for each target, in how many draws it is met,
and whether it is met by the mean.

    for n in 0 1 2 3; do python benchmarks/wm_evidence.py ... --eval-only --noise-seed $n --out-dir OUT_n$n; done
    python benchmarks/wm_draws.py OUT_n0 OUT_n1 OUT_n2 OUT_n3 --out OUT_draws.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from ttlab.common.result_file import emit_result

KEYS = ("psnr", "ssim", "stlpips", "tee_px", "tee_kept", "tee_placed", "agent_ink_ratio")
BASELINES = ("copy_last", "mean_frame", "blend")


def load(path: str) -> dict:
    p = Path(path)
    p = p / "wm_evidence.json" if p.is_dir() else p
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable wm_evidence.json ({e})") from None
    if d.get("benchmark") != "wm_evidence":
        raise ValueError(f"{path}: not a wm_evidence.json (benchmark {d.get('benchmark')!r})")
    return d


def identity(d: dict) -> dict:
    """What must agree between draws: the run, its step count and the sampler apart from its noise seed (a scoring
    from before autoguidance was recorded is unguided)."""
    sampler = {"guide": None, "guidance": 1.0} | {k: v for k, v in d["model"]["sampler"].items() if k != "noise_seed"}
    return {"training_seed": d["train"]["run_config"].get("seed"), "steps": d["train"]["steps"],
            "model": {k: d["model"][k] for k in ("params_M", "hidden", "depth", "refiner")},
            "sample_steps": d["model"]["sample_steps"], "sampler": sampler}


def spread(values: list[float]) -> dict:
    return {"mean": round(statistics.fmean(values), 4),
            "sd": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0,
            "min": round(min(values), 4), "max": round(max(values), 4)}


def summarise(draws: list[dict]) -> dict:
    """Pure: the summary of several scorings of one run and sampler (see the module docstring)."""
    if len(draws) < 2:
        raise ValueError("give at least 2 scorings (one per --noise-seed)")
    ids = [identity(d) for d in draws]
    for i, x in enumerate(ids[1:], 1):
        if x != ids[0]:
            raise ValueError(f"scoring {i} is of another run or sampler: {x} against {ids[0]}")
    seeds = [d["model"]["sampler"].get("noise_seed", 0) for d in draws]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"noise seeds repeat: {seeds} (each scoring must draw its own noise)")
    out: dict = {"benchmark": "wm_draws", **ids[0], "noise_seeds": seeds, "draws": len(draws)}
    for part in ("windows", "rollouts"):
        model = {k: spread([d[part]["model"][k] for d in draws]) for k in KEYS if k in draws[0][part]["model"]}
        out[part] = {"model": model, **{b: {k: draws[0][part][b][k] for k in KEYS if k in draws[0][part][b]}
                                        for b in BASELINES}}
    targets = {}
    for name in draws[0]["targets"]:
        met = [bool(d["targets"][name]["met"]) for d in draws]
        targets[name] = {"met_in_draws": sum(met), "of": len(met)}
    for part in ("windows", "rollouts"):
        for k in ("psnr", "ssim"):
            best = max(out[part][b][k] for b in BASELINES)
            m = out[part]["model"][k]
            targets[f"{part}_{k}_beats_all_baselines"].update(
                {"model_mean": m["mean"], "model_sd": m["sd"], "best_baseline": best, "met_by_mean": m["mean"] > best,
                 "mean_minus_best_in_sd": round((m["mean"] - best) / m["sd"], 2) if m["sd"] else None})
    f8 = "tee_ink_at_rollout_frame_8_at_least_0.8"
    if f8 in targets:
        kept = [d["targets"][f8]["kept"] for d in draws]
        targets[f8].update({"kept": spread(kept), "met_by_mean": statistics.fmean(kept) >= 0.8})
    out["targets"] = targets
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scorings", nargs="+", help="wm_evidence output folders (or their wm_evidence.json)")
    ap.add_argument("--out", default="runs/bench/wm_draws/wm_draws.json")
    args = ap.parse_args(argv)
    try:
        res = summarise([load(p) for p in args.scorings])
    except (ValueError, KeyError) as e:
        print(f"wm_draws: error: {e}", file=sys.stderr)
        return 2
    emit_result(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
