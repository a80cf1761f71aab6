"""The guide's ablations on the evidence configuration: prediction target and action injection, equal steps, several
seeds, scored with the PushT scorecard. Resumable arm by arm. Prints ONE JSON line last.

Every arm is the evidence configuration (`python benchmarks/wm_evidence.py --abs-actions --action-map gaussian
--compile`: the `pusht_cpu` preset, PushT 64x64 from the smooth pusher, 2 clean context frames + 3 predicted, the
diffusion on the change from the last context frame, uniform per-frame levels, absolute action targets with the
Gaussian action map, fused AdamW, one thread; bf16 autocast where the CPU has bf16 units, float32 elsewhere, and
each arm records which) with ONE axis changed, trained for the same optimizer
steps and batch, and sampled with the evidence sampler's step count:

  target arms (`pred_*`): each target in its native schedule -- v and x: cosine + zero-terminal SNR (x is the
      evidence configuration itself); eps: linear, no ZTSNR; flow: no ZTSNR, no SNR weighting (Euler sampler);
  injection arms (`inj_*`): the x target with each of the five injections; `inj_additive` IS `pred_x` (the evidence
      configuration's injection), so it is trained once and reported under both names.

The old recipe (the scripted-pusher data, one context frame, the regressor preset) is gone: it measured a different
model on different data, and keeping it would have doubled every option.

Scoring (`ttlab.worldmodel.scorecard`, the evidence scorer's functions) on a fixed held-out subset: windows (PSNR /
SSIM per lag beside copy-last, mean frame and the fitted blend; T pose error and its ratio to copy-last's; T and
agent ink kept; true vs another episode's actions) and 24-frame rollouts. Every seed shares one held-out split
(`split_seed` 0); the seed changes init, batch order and noise. Each arm's loss curve is kept with the slope of its
last 20% of steps. Every finished arm is written to the JSON at once (commit, load, wall time) and skipped on a
rerun; an arm cut short resumes from its last checkpoint. Processes running different arms (`--arms`) into one
`--out` keep each other's arms.

    python benchmarks/wm_ablation.py --compile --steps 600 --seeds 0 1 --injection-seeds 0 \\
        --out benchmarks/results/wm_ablation/wm_ablation.json
    python benchmarks/wm_ablation.py --table --out benchmarks/results/wm_ablation/wm_ablation.json
    python benchmarks/wm_ablation.py --plot --out benchmarks/results/wm_ablation/wm_ablation.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

import wm_ablation_plot as plots
from ttlab.common.data import repo_relative
from ttlab.worldmodel.config import TrainConfig
from ttlab.worldmodel.data.windows import ActionStats
from ttlab.worldmodel.diffusion import native_diffusion
from ttlab.worldmodel.model import count_parameters
from ttlab.worldmodel.presets import pusht_cpu, pusht_cpu_debug
from ttlab.worldmodel.scorecard import Baselines, fit_baselines, score_rollouts, score_windows
from ttlab.worldmodel.train import build_datasets, train
from ttlab.worldmodel.visuals import strip_png
from ttlab.worldmodel.weights import load_world_model
from wm_ablation_plot import COLORS, ema

ROOT = Path(__file__).resolve().parent.parent

TARGETS = ("v", "x", "eps", "flow")
INJECTIONS = ("additive", "adaln", "adaln_fuse", "film", "cross_attention")
TARGET_ARMS = tuple(f"pred_{t}" for t in TARGETS)
INJECTION_ARMS = tuple(f"inj_{i}" for i in INJECTIONS)
ARMS = TARGET_ARMS + INJECTION_ARMS
SAME_RUN = {"inj_additive": "pred_x"}
"""Arms that are another arm's run: the evidence configuration's own injection with its own target."""
PRESETS = {"pusht_cpu": pusht_cpu, "pusht_cpu_debug": pusht_cpu_debug}

# The guide's tables (nano-world-model docs/training.md): PSNR / SSIM of NanoWM-B/2 after 50k steps on RT-1
# (every arm), and PSNR / SSIM after 30k steps on DINO-WM PushT (injection arms only). Quoted, not measured here.
GUIDE_RT1 = {"pred_v": (23.07, 0.760), "pred_x": (23.37, 0.783), "pred_eps": (21.89, 0.739),
             "pred_flow": (23.54, 0.772), "inj_additive": (23.07, 0.760), "inj_adaln": (23.19, 0.762),
             "inj_adaln_fuse": (23.10, 0.762), "inj_film": (23.20, 0.763), "inj_cross_attention": (20.82, 0.721)}
GUIDE_PUSHT = {"inj_additive": (26.20, 0.962), "inj_adaln_fuse": (26.17, 0.961), "inj_adaln": (26.09, 0.960),
               "inj_cross_attention": (25.95, 0.959), "inj_film": (25.88, 0.960)}


def git_rev() -> str:
    """HEAD, with -dirty when tracked files differ from it."""
    run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    return run("rev-parse", "HEAD") + ("-dirty" if run("status", "--porcelain", "--untracked-files=no") else "")


CODE_COMMIT = git_rev()
"""The code this process runs (read at start); an arm's `commit` is HEAD when the arm started, which later commits
during a long job can move past the code that ran."""


def run_of(arm: str) -> str:
    """The arm whose training run `arm` is (itself unless it is another arm's configuration)."""
    return SAME_RUN.get(arm, arm)


def arm_config(arm: str, seed: int, steps: int, data: str, preset: str = "pusht_cpu", compile: bool = False,
               threads: int = 1, root: str = "runs", hidden: int = 0) -> TrainConfig:
    """The TrainConfig of one arm and seed (pure: same inputs, same config); `hidden` > 0 changes the width of
    every arm (its runs are named `..._h<hidden>`), 0 keeps the preset's."""
    if arm not in ARMS:
        raise ValueError(f"--arms: unknown arm {arm!r}; expected some of {', '.join(ARMS)}")
    base = PRESETS[preset]()
    arm = run_of(arm)
    cfg = replace(base, data=data, relative_actions=False, action_map="gaussian", compile=compile, threads=threads,
                  max_steps=steps, warmup_steps=min(base.warmup_steps, max(1, steps // 10)),
                  checkpoint_every=max(1, min(base.checkpoint_every, steps // 4)), log_every=min(base.log_every, 5), seed=seed,
                  split_seed=0, run_name=f"abl_{arm}_s{seed}" + (f"_h{hidden}" if hidden else ""), root=root,
                  resume=True, time_limit="", budget_minutes=0.0, hidden=hidden or base.hidden)
    axis, value = arm.split("_", 1)
    if axis == "pred":
        return replace(cfg, diffusion=native_diffusion(base.diffusion, value))
    return replace(cfg, injection=value)


def tail_slope(steps: list[int], losses: list[float], frac: float = 0.2) -> dict:
    """Least-squares slope of the loss over the last `frac` of the steps: per 1000 steps, and as the fraction of
    the window's mean loss it changes by over the window (negative: still falling)."""
    s, y = np.asarray(steps, float), np.asarray(losses, float)
    keep = s >= s.max() - frac * s.max()
    if keep.sum() < 3:
        return {"per_1000_steps": None, "relative_over_window": None, "points": int(keep.sum())}
    k = np.polyfit(s[keep], y[keep], 1)[0]
    span = s[keep].max() - s[keep].min()
    return {"per_1000_steps": round(float(k * 1000), 6), "relative_over_window": round(float(k * span / y[keep].mean()), 4),
            "points": int(keep.sum()), "from_step": int(s[keep].min())}


def merged_curve(old: list, new: list) -> list:
    """A resumed run's loss curve: the points logged before the resume, then this process's."""
    first = new[0][0] if new else float("inf")
    return [p for p in old if p[0] < first] + list(new)


class HeldOut:
    """The held-out windows, episodes and the cheap predictors, built once per process (every seed shares the
    split, so every arm is scored on the same frames)."""

    def __init__(self, cfg: TrainConfig, stats: Path, max_lag: int = 24):
        _, self.val = build_datasets(cfg, stats)
        train_eps = np.setdiff1d(np.arange(len(self.val.source)), self.val.episodes)
        self.baselines: Baselines = fit_baselines(self.val.source, train_eps, cfg.frame_interval, max_lag=max_lag)
        self.episodes = [int(e) for e in self.val.episodes]


def _r(x, n=4):
    return [round(float(v), n) for v in x] if isinstance(x, list) else round(float(x), n)


STRIP_FRAMES = 12
"""Rollout frames shown in a strip (the figures stay small; the scores use the whole horizon)."""


def write_strip(path: Path, x: torch.Tensor, pred: torch.Tensor, gt: torch.Tensor, roll: torch.Tensor) -> Path:
    """Two windows (truth above model) and two rollouts cut to `STRIP_FRAMES`, frames (N, T, C, H, W) in [-1, 1]."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = STRIP_FRAMES
    return strip_png(path, [("win truth", x[0]), ("win model", pred[0]), ("win truth", x[1]), ("win model", pred[1]),
                            ("roll truth", gt[0, :n]), ("roll model", roll[0, :n]), ("roll truth", gt[1, :n]),
                            ("roll model", roll[1, :n])], scale=1)


def redraw_strips(res: dict, out_dir: Path, root: str, threads: int) -> list[str]:
    """The seed-0 strips again from the saved runs (2 held-out windows, 2 rollouts): the figures without rescoring."""
    pr = res["protocol"]
    horizon = min(STRIP_FRAMES, pr["rollout_horizon"])
    held, done = None, []
    for k, r in sorted(res["runs"].items()):
        if r["seed"] != 0:
            continue
        cfg = arm_config(r["arm"], 0, pr["steps"], pr["data"], pr["preset"], False, threads, root, pr.get("hidden", 0))
        run_dir = Path(cfg.root) / "wm" / cfg.run_name
        if not (run_dir / "checkpoints").is_dir():
            print(f"{k}: no run at {run_dir}, strip not redrawn", flush=True)
            continue
        held = held or HeldOut(cfg, run_dir / "action_stats.json", max_lag=horizon)
        wm = load_world_model(run_dir)
        w = score_windows(wm.model, wm.obj, held.val, held.baselines, cfg.n_ctx, cfg.sample_steps, count=2, stlpips=False)
        ro = score_rollouts(wm.model, wm.obj, held.val, held.baselines, cfg.n_ctx, cfg.sample_steps,
                            horizon=horizon, max_episodes=2, batch=2, stlpips=False)
        x, p1, _, _ = w["_first"]
        gt, rp, _ = ro["_first"]
        name = f"strips/{r['arm']}_s0.png"
        write_strip(out_dir / name, x, p1, gt, rp)
        done.append(name)
    return done


def score_arm(run_dir: Path, cfg: TrainConfig, held: HeldOut, windows: int, rollouts: int, horizon: int,
              strip: Path | None) -> dict:
    """The scorecard numbers that order the arms (the model beside copy-last / mean frame / blend)."""
    wm = load_world_model(run_dir)
    val = held.val
    own = ActionStats.load(run_dir / "action_stats.json")  # every run of the split has the same statistics
    if not (np.allclose(own.mean, val.action_stats.mean) and np.allclose(own.std, val.action_stats.std)):
        _, val = build_datasets(cfg, run_dir / "action_stats.json")
    w = score_windows(wm.model, wm.obj, val, held.baselines, cfg.n_ctx, cfg.sample_steps, count=windows, stlpips=False)
    ro = score_rollouts(wm.model, wm.obj, val, held.baselines, cfg.n_ctx, cfg.sample_steps, horizon=horizon,
                        max_episodes=rollouts, batch=min(16, rollouts), stlpips=False)
    x, p1, _, _ = w.pop("_first")
    gt, rp, _ = ro.pop("_first")
    if strip is not None:
        write_strip(strip, x, p1, gt, rp)

    def pick(res: dict, name: str, keys: tuple[str, ...]) -> dict:
        return {k: _r(res[f"{name}/{k}"]) for k in keys} | {f"{k}/by_lag": _r(res[f"{name}/{k}/by_lag"]) for k in keys}

    keys = ("psnr", "ssim", "tee_px", "tee_deg", "agent_px", "tee_ink_ratio", "agent_ink_ratio")
    win = pick(w, "model", keys)
    win["tee_px_ratio_to_copy_last/by_lag"] = _r([m / c for m, c in zip(w["model/tee_px/by_lag"],
                                                                        w["copy_last/tee_px/by_lag"], strict=True)])
    win["other_actions_psnr"] = _r(w["model_other_actions/psnr"])
    win["true_minus_other_actions_db"] = _r(w["model/psnr"] - w["model_other_actions/psnr"])
    win["seed_pair_psnr"] = _r(w["seed_pair/psnr"])
    rol = pick(ro, "model", keys)
    rol["tee_ink_at_frame_8"] = _r(ro["model/tee_ink_ratio/by_lag"][8 - ro["n_ctx"]]) if ro["horizon"] > 8 else None
    base_keys = ("psnr", "ssim", "tee_px", "tee_ink_ratio")
    baselines = {"windows": {n: pick(w, n, base_keys) for n in ("copy_last", "mean_frame", "blend")},
                 "rollouts": {n: pick(ro, n, base_keys) for n in ("copy_last", "mean_frame", "blend")}}
    return {"windows": win | {"count": w["count"]}, "rollouts": rol | {"episodes": ro["episodes"],
            "horizon": ro["horizon"]}, "baselines": baselines, "params_M": round(count_parameters(wm.model) / 1e6, 3),
            "ema_step": wm.step}


def load_results(path: Path, protocol: dict) -> dict:
    if not path.exists():
        return {"benchmark": "wm_ablation", "protocol": protocol, "runs": {}}
    res = json.loads(path.read_text())
    if res.get("protocol") != protocol or "runs" not in res:
        sys.exit(f"wm_ablation: error: {repo_relative(path)} was written with another protocol "
                 f"({res.get('protocol')}); pass --out NEW.json or the same settings")
    return res


def save_arm(out: Path, res: dict, k: str, protocol: dict) -> dict:
    """Write `res` with its arm `k` to `out`, keeping the arms another process (`--arms`) has written there since
    `res` was read; returns what was written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with _locked(out.parent):  # two arms finishing together must not drop each other
        if out.exists():
            res = res | {"runs": load_results(out, protocol)["runs"] | {k: res["runs"][k]}}
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(res, indent=1) + "\n")
        tmp.replace(out)
    return res


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive advisory lock on the directory `path`, which leaves no file behind (no-op without `fcntl`)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def key(arm: str, seed: int) -> str:
    return f"{run_of(arm)}@{seed}"


def jobs(arms: list[str], seeds: list[int], injection_seeds: list[int]) -> list[tuple[str, int]]:
    """(arm, seed) in priority order: target arms for each seed, then injection arms for each of their seeds;
    an arm that is another arm's run appears once."""
    out: list[tuple[str, int]] = []
    for group, group_seeds in ((TARGET_ARMS, seeds), (INJECTION_ARMS, injection_seeds)):
        for s in group_seeds:
            for a in group:
                if a in arms and (run_of(a), s) not in out:
                    out.append((run_of(a), s))
    return out


def stat(res: dict, arm: str, get) -> list[float]:
    """`get(run)` for every seed of `arm` that ran."""
    return [get(r) for k, r in sorted(res["runs"].items()) if k.split("@")[0] == run_of(arm)]


def fmt(vals: list[float], n: int = 2) -> str:
    """'mean (a / b)' over seeds, or the one value (None: not measured)."""
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    if len(vals) == 1:
        return f"{vals[0]:.{n}f}"
    return f"{np.mean(vals):.{n}f} ({' / '.join(f'{v:.{n}f}' for v in vals)})"


def markdown_table(res: dict) -> str:
    """The README table: each arm (mean and every seed) beside the cheap predictors and the guide's numbers."""
    rows = ["| arm | seeds | windows PSNR | windows SSIM | T pose / copy-last, lag 1-3 | rollout PSNR | rollout SSIM | "
            "T ink, rollout frame 8 | loss change, last 20% | guide RT-1 | guide PushT |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm in ARMS:
        g1 = "{:.2f} / {:.3f}".format(*GUIDE_RT1[arm])
        g2 = "{:.2f} / {:.3f}".format(*GUIDE_PUSHT[arm]) if arm in GUIDE_PUSHT else "-"
        runs = stat(res, arm, lambda r: r)
        name = arm + (f" (= {run_of(arm)})" if arm in SAME_RUN else "")
        if not runs:
            rows.append(f"| {name} | not run | | | | | | | | {g1} | {g2} |")
            continue
        ratio = [float(np.mean(r["score"]["windows"]["tee_px_ratio_to_copy_last/by_lag"])) for r in runs]
        slope = [(r["loss"]["tail_slope"] or {}).get("relative_over_window") for r in runs]
        rows.append(
            f"| {name} | {len(runs)} | {fmt([r['score']['windows']['psnr'] for r in runs])} | "
            f"{fmt([r['score']['windows']['ssim'] for r in runs], 3)} | {fmt(ratio)} | "
            f"{fmt([r['score']['rollouts']['psnr'] for r in runs])} | {fmt([r['score']['rollouts']['ssim'] for r in runs], 3)} | "
            f"{fmt([r['score']['rollouts']['tee_ink_at_frame_8'] for r in runs])} | "
            f"{fmt(slope, 3)} | {g1} | {g2} |")
    b = res.get("baselines")
    for n in ("copy_last", "mean_frame", "blend") if b else ():
        w, ro = b["windows"][n], b["rollouts"][n]
        ratio = [p / c for p, c in zip(w["tee_px/by_lag"], b["windows"]["copy_last"]["tee_px/by_lag"], strict=True)]
        ink = ro["tee_ink_ratio/by_lag"]
        n_ctx = res["protocol"]["rollout_horizon"] - len(ink)  # the rollout's lists start after its context
        ink8 = f"{ink[8 - n_ctx]:.2f}" if res["protocol"]["rollout_horizon"] > 8 else "-"
        rows.append(f"| {n} | | {w['psnr']:.2f} | {w['ssim']:.3f} | {np.mean(ratio):.2f} | {ro['psnr']:.2f} | "
                    f"{ro['ssim']:.3f} | {ink8} | | | |")
    return "\n".join(rows)


def plot(res: dict, out_dir: Path) -> list[str]:
    """loss_curves.png (EMA of each run's loss; seed 0 solid, seed 1 dashed) and metrics.png (bars per arm, seed 0
    dark and seed 1 light, the cheap predictors as dashed lines)."""
    runs = res["runs"]
    groups = []
    for title, group in (("target arms: training loss (EMA)", TARGET_ARMS),
                         ("injection arms (x target): training loss (EMA)", INJECTION_ARMS)):
        curves = []
        for i, arm in enumerate(group):
            for k, r in sorted(runs.items()):
                if k.split("@")[0] == run_of(arm) and r["loss"]["curve"]:
                    curves.append((f"{arm} s{r['seed']}", r["loss"]["curve"], COLORS[i], r["seed"] != 0))
        groups.append((title, curves))
    steps = sorted({r["train"]["steps"] for r in runs.values()})
    note = f"{'/'.join(map(str, steps))} steps per arm; losses of different targets are on different scales"
    plots.save_loss_curves(out_dir / "loss_curves.png", groups, note)

    metrics = (("windows PSNR (dB)", lambda s: s["windows"]["psnr"], "windows", "psnr"),
               ("windows SSIM", lambda s: s["windows"]["ssim"], "windows", "ssim"),
               ("T pose error / copy-last's, lags 1-3", lambda s: float(np.mean(
                   s["windows"]["tee_px_ratio_to_copy_last/by_lag"])), None, None),
               ("rollout PSNR (dB)", lambda s: s["rollouts"]["psnr"], "rollouts", "psnr"),
               ("rollout SSIM", lambda s: s["rollouts"]["ssim"], "rollouts", "ssim"),
               ("T ink kept, rollout frame 8", lambda s: s["rollouts"]["tee_ink_at_frame_8"], None, None))
    arms = [a for a in ARMS if a not in SAME_RUN and stat(res, a, lambda r: r)]
    panels = []
    for title, get, where, m in metrics:
        bars = [(a, stat(res, a, lambda r, get=get: get(r["score"])), COLORS[ARMS.index(a) % len(COLORS)]) for a in arms]
        lines = {n: res["baselines"][where][n][m] for n in ("copy_last", "mean_frame", "blend")} \
            if where and res.get("baselines") else ({"copy_last": 1.0} if title.startswith("T pose") else {})
        panels.append((title, bars, lines))
    plots.save_bars(out_dir / "metrics.png", panels, f"arms at {'/'.join(map(str, steps))} steps; dark bar seed 0, "
                    f"light bar seed 1; inj_additive is pred_x")
    return ["loss_curves.png", "metrics.png"]


def parse_arms(text: str) -> list[str]:
    arms = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad or not arms:
        sys.exit(f"wm_ablation: error: --arms {text!r}: unknown arm(s) {bad}; expected some of {', '.join(ARMS)}")
    return arms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {','.join(ARMS)}")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds of the target arms")
    ap.add_argument("--injection-seeds", type=int, nargs="+", default=None,
                    help="seeds of the injection arms (default: --seeds)")
    ap.add_argument("--steps", type=int, default=600, help="optimizer steps per arm (the same for every arm)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="pusht_cpu",
                    help="base configuration (pusht_cpu_debug: a tiny model for tests)")
    ap.add_argument("--compile", action="store_true", help="train through torch.compile (the evidence configuration)")
    ap.add_argument("--hidden", type=int, default=0, help="every arm at this width instead of the preset's (0 keeps "
                    "it; the runs are named ..._h<hidden>)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default="data/pusht64_smooth", help="PushT dataset (wm_evidence.py generates it)")
    ap.add_argument("--eval-windows", type=int, default=32, help="held-out windows scored per arm")
    ap.add_argument("--rollout-episodes", type=int, default=8, help="held-out episodes rolled out per arm")
    ap.add_argument("--rollout-horizon", type=int, default=24)
    ap.add_argument("--root", default="runs", help="runs root: arm runs are ROOT/wm/abl_<arm>_s<seed>")
    ap.add_argument("--out", default="runs/bench/wm_ablation/wm_ablation.json")
    ap.add_argument("--table", action="store_true", help="print the README table of the results JSON and exit")
    ap.add_argument("--plot", action="store_true", help="redraw the figures of the results JSON and exit")
    ap.add_argument("--strips", action="store_true", help="redraw the seed-0 strips from the saved runs under --root "
                    "(2 held-out windows and 2 rollouts each) and exit")
    args = ap.parse_args()
    out = Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out
    if args.strips:
        if not out.exists():
            sys.exit(f"wm_ablation: error: --out {args.out}: no results file there")
        torch.set_num_threads(args.threads)
        print(json.dumps({"strips": redraw_strips(json.loads(out.read_text()), out.parent, args.root, args.threads)}))
        return
    if args.table or args.plot:
        if not out.exists():
            sys.exit(f"wm_ablation: error: --out {args.out}: no results file there")
        res = json.loads(out.read_text())
        if args.table:
            print(markdown_table(res))
        else:
            print(json.dumps({"figures": plot(res, out.parent)}))
        return
    arms = parse_arms(args.arms)
    if args.hidden < 0:
        sys.exit(f"wm_ablation: error: --hidden {args.hidden}: must be >= 0")
    if args.steps < 1:
        sys.exit(f"wm_ablation: error: --steps {args.steps}: must be >= 1")
    if not (Path(args.data) / "states.pth").exists():
        sys.exit(f"wm_ablation: error: --data {args.data}: no PushT dataset there; `python benchmarks/wm_evidence.py` "
                 f"generates it, or `ttlab wm data pusht`")
    inj_seeds = args.injection_seeds if args.injection_seeds is not None else args.seeds
    torch.set_num_threads(args.threads)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    protocol = {"preset": args.preset, "steps": args.steps, "data": args.data, "eval_windows": args.eval_windows,
                "rollout_episodes": args.rollout_episodes, "rollout_horizon": args.rollout_horizon,
                "compile": args.compile, **({"hidden": args.hidden} if args.hidden else {})}
    res = load_results(out, protocol)
    held = None
    todo = jobs(arms, args.seeds, inj_seeds)
    print(f"{len(todo)} runs: {', '.join(key(a, s) for a, s in todo)}", flush=True)
    for arm, seed in todo:
        k = key(arm, seed)
        if k in res["runs"]:
            print(f"{k}: done, skipped", flush=True)
            continue
        t0, commit, load_before = time.perf_counter(), git_rev(), os.getloadavg()
        cfg = arm_config(arm, seed, args.steps, args.data, args.preset, args.compile, args.threads, args.root,
                         args.hidden)
        run_dir = Path(cfg.root) / "wm" / cfg.run_name
        curve_file = run_dir / "loss_curve.json"
        old_curve = json.loads(curve_file.read_text())["steps_losses"] if curve_file.exists() else []
        print(f"{k}: training {cfg.max_steps} steps", flush=True)
        tr = train(cfg)
        curve = merged_curve(old_curve, tr["loss_curve"])
        t1 = time.perf_counter()
        if held is None:
            held = HeldOut(cfg, run_dir / "action_stats.json", max_lag=args.rollout_horizon)
        strip = out.parent / "strips" / f"{run_of(arm)}_s{seed}.png" if seed == min(args.seeds) else None
        score = score_arm(run_dir, cfg, held, args.eval_windows, args.rollout_episodes, args.rollout_horizon, strip)
        t2 = time.perf_counter()
        res["baselines"] = score.pop("baselines")
        d = cfg.diffusion
        res["runs"][k] = {
            "arm": run_of(arm), "seed": seed, "axis": "target" if arm.startswith("pred") else "injection",
            "also": [a for a, b in SAME_RUN.items() if b == run_of(arm)],
            "config": {"target": d.target, "schedule": d.schedule, "zero_terminal_snr": d.zero_terminal_snr,
                       "snr_gamma": d.snr_gamma, "levels": d.timestep_sampling, "delta": d.delta,
                       "injection": cfg.injection, "sample_steps": cfg.sample_steps, "hidden": cfg.hidden,
                       "depth": cfg.depth, "batch": cfg.batch_size, "lr": cfg.lr, "compile": cfg.compile,
                       "params_M": score.pop("params_M")},
            "train": {"steps": tr["steps"], "max_steps": cfg.max_steps, "seconds": round(tr["seconds"], 1),
                      "s_per_step": round(tr["seconds"] / max(1, tr["steps"]), 3),
                      "precision": tr.get("precision")},
            "loss": {"log_every": cfg.log_every, "tail_slope": tail_slope(*zip(*curve, strict=True)) if curve else None,
                     "last_ema": round(ema([v for _, v in curve])[-1], 6) if curve else None,
                     "curve": [[int(s), round(float(v), 6)] for s, v in curve]},
            "score": score, "score_seconds": round(t2 - t1, 1),
            "strip": str(strip.relative_to(out.parent)) if strip is not None else None,
            "run_dir": repo_relative(run_dir.resolve()),
            "commit": commit, "commit_at_end": git_rev(), "code_commit": CODE_COMMIT, "nproc": os.cpu_count(), "torch_threads": args.threads,
            "loadavg_before": _r(list(load_before), 2), "loadavg_end": _r(list(os.getloadavg()), 2),
            "wall_seconds": round(time.perf_counter() - t0, 1),
        }
        res = save_arm(out, res, k, protocol)  # each finished arm is kept at once
        s = res["runs"][k]["score"]
        print(f"{k}: windows {s['windows']['psnr']} dB / {s['windows']['ssim']}, rollouts {s['rollouts']['psnr']} dB, "
              f"train {tr['seconds']:.0f} s, score {t2 - t1:.0f} s", flush=True)
    figures = plot(res, out.parent) if res["runs"] else []
    summary = {"benchmark": "wm_ablation", "out": repo_relative(out), "done": sorted(res["runs"]),
               "missing": [key(a, s) for a, s in todo if key(a, s) not in res["runs"]], "figures": figures,
               "windows_psnr": {k: r["score"]["windows"]["psnr"] for k, r in res["runs"].items()},
               "rollout_psnr": {k: r["score"]["rollouts"]["psnr"] for k, r in res["runs"].items()}}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
