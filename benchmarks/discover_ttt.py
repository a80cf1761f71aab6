"""Evidence: TTT-Discover with SmolLM2-135M on Erdős, the trained model beside the same model frozen.

Both arms start from the same warm-started adapter (`warmstart.py`, cached under ~/.cache/ttlab) and the
same seed, use the same preset (`cpu_smollm2`: 1 state x 8 rollouts per step; `--states-per-step 2` for the
issue's 16) and therefore the same
sampling budget; the frozen arm samples, runs and verifies exactly like the trained one but never updates.
The two arms run as two single-thread processes side by side (2 cores). Per step: parse rate, valid rate,
mean and best verified reward, best C5 in the tree so far. Writes the JSON and a learning-curve PNG and
prints ONE JSON line last.

    python benchmarks/discover_ttt.py [--steps 10] [--states-per-step 2] [--lr 1e-4] [--seed 0]
                                      [--out benchmarks/results/discover_ttt.json] [--png ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ttlab.common.data import repo_relative

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("rollout/parse_rate", "rollout/valid_rate", "rollout/reward_mean", "rollout/reward_best",
        "rollout/score_best", "rollout/score_mean", "tree/best_score", "rollout/completion_tokens_mean",
        "rollout/finished_rate", "adv/kept_frac", "adv/abs_max_raw", "adv/beta_mean", "learn/samples", "learn/grad_norm",
        "learn/dlogp_pos", "learn/dlogp_neg",
        "time/step_s", "time/generate_s", "time/evaluate_s", "time/learn_s", "perf/gen_tokens_per_s")


def config(args, arm: str):
    from ttlab.discover.llm.presets import cpu_smollm2

    cfg = cpu_smollm2()
    cfg.steps, cfg.seed, cfg.frozen = args.steps, args.seed, arm == "frozen"
    cfg.root, cfg.run_name = str(Path(args.runs)), f"ttt_{arm}_{args.tag}"
    if args.lr:
        cfg.lr = args.lr
    if args.states_per_step:
        cfg.states_per_step = args.states_per_step
    if args.rollouts_per_state:
        cfg.rollouts_per_state = args.rollouts_per_state
    if args.fail_mode:
        cfg.fail_mode = args.fail_mode
    if args.temperature:
        cfg.policy.temperature = args.temperature
    cfg.probe_update = args.probe_update
    if args.bootstrap_steps:
        cfg.init_tree = str(bootstrap_tree(args))
    cfg.threads = args.threads
    return cfg


def bootstrap_tree(args) -> Path:
    """Where the shared bootstrap run (`--bootstrap-steps`) leaves its tree (both arms start from it)."""
    return Path(args.runs) / "discover" / f"ttt_boot_{args.tag}" / "tree.json"


def bootstrap(args, policy) -> list[dict]:
    """`--bootstrap-steps` frozen steps at `--bootstrap-temperature` from fresh roots, run ONCE before the arms:
    both arms then start from its tree (same states, no root phase in their first steps)."""
    from ttlab.discover.llm.presets import cpu_smollm2
    from ttlab.discover.llm.trainer import Trainer

    cfg = cpu_smollm2()
    cfg.steps, cfg.seed, cfg.frozen, cfg.warm_start = args.bootstrap_steps, args.seed, True, False
    cfg.policy.temperature = args.bootstrap_temperature
    cfg.root, cfg.run_name, cfg.threads = str(Path(args.runs)), f"ttt_boot_{args.tag}", args.threads
    if args.states_per_step:
        cfg.states_per_step = args.states_per_step
    if args.rollouts_per_state:
        cfg.rollouts_per_state = args.rollouts_per_state
    policy.cfg.temperature = cfg.policy.temperature
    tr = Trainer(cfg, policy=policy, log=lambda s: print(f"[bootstrap] {s}", flush=True))
    rows = run_steps(tr, cfg.steps, "bootstrap")
    if not bootstrap_tree(args).is_file():
        raise SystemExit(f"bootstrap: no tree at {bootstrap_tree(args)}")
    return rows


def run_arm(args) -> None:
    """Child process: one arm, metrics of every step to `args.arm_out`."""
    from ttlab.discover.llm.trainer import Trainer

    cfg = config(args, args.arm)
    tr = Trainer(cfg, log=lambda s: print(f"[{args.arm}] {s}", flush=True))
    run_steps(tr, cfg.steps, args.arm, lambda rows: Path(args.arm_out).write_text(
        json.dumps({"arm": args.arm, "steps": rows, "warm": tr.warm_info})))


def run_steps(tr, steps: int, name: str, after_step=None) -> list[dict]:
    """Step a Trainer to `steps`, one row of metrics per step (printed; `after_step(rows)` saves them as they
    come), and close it."""
    rows: list[dict] = []
    try:
        while tr.step_idx < steps:
            m = tr.step()
            rows.append({k.split("/")[-1] if k.startswith("rollout/") else k: m.get(k) for k in KEYS}
                        | {"step": tr.step_idx, "load1": round(os.getloadavg()[0], 2)})
            print(f"[{name}] step {tr.step_idx}: parse {m['rollout/parse_rate']:.2f} valid "
                  f"{m['rollout/valid_rate']:.2f} reward mean {m['rollout/reward_mean']:.4f} best C5 "
                  f"{m['tree/best_score']:.6f} ({m['time/step_s']:.0f} s: gen {m['time/generate_s']:.0f} "
                  f"learn {m['time/learn_s']:.0f})", flush=True)
            if after_step is not None:
                after_step(rows)
    finally:
        tr.close()
    return rows


def warm(args) -> tuple[dict, list[dict]]:
    """Train (or load) the shared warm start once, then run the shared bootstrap (if any), before the arms."""
    import torch

    from ttlab.discover.llm.policy import LLMPolicy
    from ttlab.discover.llm.warmstart import warm_start
    from ttlab.discover.prompts import ANSWER_PREFIXES
    from ttlab.discover.tasks import get_task

    cfg = config(args, "trained")
    torch.set_num_threads(max(1, args.threads))
    pol = LLMPolicy(cfg.policy, torch.device("cpu"), seed=args.seed,
                    answer_prefix=ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task)))
    info = warm_start(pol, cfg.warm, log=lambda s: print(s, flush=True))
    return info, (bootstrap(args, pol) if args.bootstrap_steps else [])


def summary(rows: list[dict]) -> dict:
    import numpy as np

    def mean(key, sl):
        v = [r[key] for r in rows[sl] if r.get(key) is not None]
        return float(np.mean(v)) if v else float("nan")

    return {"valid_first3": mean("valid_rate", slice(0, 3)), "valid_steps2to4": mean("valid_rate", slice(1, 4)),
            "reward_steps2to4": mean("reward_mean", slice(1, 4)), "valid_all": mean("valid_rate", slice(0, None)), "valid_last3": mean("valid_rate", slice(-3, None)),
            "reward_first3": mean("reward_mean", slice(0, 3)), "reward_last3": mean("reward_mean", slice(-3, None)),
            "parse_first3": mean("parse_rate", slice(0, 3)), "parse_last3": mean("parse_rate", slice(-3, None)),
            "best_c5": min((r["tree/best_score"] for r in rows if r.get("tree/best_score") is not None),
                           default=float("nan")),
            "step_s_mean": mean("time/step_s", slice(0, None))}


def plot_pil(res: dict, path: Path) -> None:
    """The same three panels drawn with PIL (matplotlib is not a ttlab dependency)."""
    from PIL import Image, ImageDraw

    W, H, pad = 420, 300, 40
    img = Image.new("RGB", (3 * W, H + 30), "white")
    d = ImageDraw.Draw(img)
    d.text((10, 5), f"TTT-Discover SmolLM2-135M Erdos, {res['rollouts_per_step']} rollouts/step, T {res.get('temperature', 0.5)}, lr {res['lr']}"
           f"{', shared bootstrap tree' if res.get('bootstrap', {}).get('steps') else ''}: trained (blue) vs frozen (orange)", fill="black")
    keys = (("valid_rate", "valid rate"), ("reward_mean", "mean reward (1/C5, invalid 0)"),
            ("tree/best_score", "best C5 so far"))
    for p, (key, title) in enumerate(keys):
        x0, y0 = p * W + pad, 30 + pad
        w, h = W - 2 * pad, H - 2 * pad
        series = {arm: [(r["step"], r[key]) for r in a.get("steps", []) if r.get(key) is not None]
                  for arm, a in res["arms"].items()}
        ys = [y for v in series.values() for _, y in v] or [0.0, 1.0]
        lo, hi = min(ys), max(ys)
        hi = hi if hi > lo else lo + 1.0
        n = max((x for v in series.values() for x, _ in v), default=1)
        d.rectangle([x0, y0, x0 + w, y0 + h], outline="gray")
        d.text((x0, y0 - 14), title, fill="black")
        d.text((x0 - 38, y0), f"{hi:.4g}", fill="black")
        d.text((x0 - 38, y0 + h - 10), f"{lo:.4g}", fill="black")
        d.text((x0 + w - 40, y0 + h + 4), f"step {n}", fill="black")
        for arm, color in (("trained", (31, 119, 180)), ("frozen", (255, 127, 14))):
            pts = [(x0 + w * (x - 1) / max(1, n - 1), y0 + h * (1 - (y - lo) / (hi - lo))) for x, y in series.get(arm, [])]
            if len(pts) > 1:
                d.line(pts, fill=color, width=2)
            for q in pts:
                d.ellipse([q[0] - 3, q[1] - 3, q[0] + 3, q[1] + 3], fill=color)
    img.save(path)


def plot(res: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        plot_pil(res, path)
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    for arm, style in (("trained", "-o"), ("frozen", "--s")):
        rows = res["arms"].get(arm, {}).get("steps", [])
        x = [r["step"] for r in rows]
        ax[0].plot(x, [r["valid_rate"] for r in rows], style, label=arm)
        ax[1].plot(x, [r["reward_mean"] for r in rows], style, label=arm)
        ax[2].plot(x, [r["tree/best_score"] for r in rows], style, label=arm)
    for a, t in zip(ax, ("valid rate per step", "mean verified reward (1/C5; invalid = 0)", "best C5 so far"),
                    strict=True):
        a.set_title(t)
        a.set_xlabel("TTT step")
        a.grid(alpha=0.3)
    ax[0].legend()
    fig.suptitle(f"TTT-Discover, SmolLM2-135M (warm-started LoRA), Erdős, {res['rollouts_per_step']} rollouts/step, "
                 f"T {res.get('temperature', 0.5)}, lr {res['lr']:g}, 2 CPU cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.0, help="override the preset's learning rate")
    ap.add_argument("--states-per-step", type=int, default=0, help="override the preset's states per step")
    ap.add_argument("--rollouts-per-state", type=int, default=0, help="override the preset's rollouts per state")
    ap.add_argument("--fail-mode", default="", choices=("", "floor", "zero"),
                    help="failed rollouts' place per group (default: the preset's)")
    ap.add_argument("--temperature", type=float, default=0.0, help="override the preset's sampling temperature")
    ap.add_argument("--probe-update", action="store_true",
                    help="trained arm: log each update's log-prob change of positive / negative-advantage completions")
    ap.add_argument("--bootstrap-steps", type=int, default=0,
                    help="frozen steps run once from fresh roots before the arms; both arms start from its tree")
    ap.add_argument("--bootstrap-temperature", type=float, default=0.5, help="sampling temperature of the bootstrap")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per arm (the arms run side by side)")
    ap.add_argument("--runs", default=str(ROOT / "runs"))
    ap.add_argument("--tag", default=time.strftime("%Y%m%d_%H%M%S"))
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "discover_ttt" / "discover_ttt.json"))
    ap.add_argument("--png", default=str(ROOT / "runs" / "bench" / "discover_ttt" / "discover_ttt.png"))
    ap.add_argument("--arms", default="trained,frozen", help="comma-separated subset of trained,frozen")
    ap.add_argument("--plot-only", default="", help="redraw the PNG of an existing result JSON and exit")
    ap.add_argument("--arm", default="", help=argparse.SUPPRESS)
    ap.add_argument("--arm-out", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plot_only:
        plot(json.loads(Path(args.plot_only).read_text()), Path(args.png))
        return
    if args.arm:
        run_arm(args)
        return
    t0 = time.time()
    load0 = os.getloadavg()
    commit0 = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    warm_info, boot_rows = warm(args)
    procs, outs = {}, {}
    for arm in [a.strip() for a in args.arms.split(",") if a.strip()]:
        if arm not in ("trained", "frozen"):
            raise SystemExit(f"--arms: unknown arm {arm!r} (trained, frozen)")
        outs[arm] = Path(args.runs) / f"ttt_{arm}_{args.tag}.json"
        outs[arm].parent.mkdir(parents=True, exist_ok=True)
        procs[arm] = subprocess.Popen([sys.executable, __file__, "--arm", arm, "--arm-out", str(outs[arm]),
                                       *sys.argv[1:], "--tag", args.tag], env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
    codes = {arm: p.wait() for arm, p in procs.items()}
    arms = {arm: json.loads(o.read_text()) if o.exists() else {"steps": []} for arm, o in outs.items()}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    res = {"benchmark": "discover_ttt", "model": "smollm2-135m (Q4_1 GGUF dequantised to float32)",
           "task": "erdos", "preset": "cpu_smollm2", "steps": args.steps, "lr": config(args, "trained").lr,
           "rollouts_per_step": config(args, "trained").states_per_step * config(args, "trained").rollouts_per_state,
           "states_per_step": config(args, "trained").states_per_step, "fail_mode": config(args, "trained").fail_mode,
           "seed": args.seed, "threads_per_arm": args.threads, "temperature": config(args, "trained").temperature,
           "bootstrap": {"steps": args.bootstrap_steps, "temperature": args.bootstrap_temperature, "rows": boot_rows,
                         "tree": repo_relative(bootstrap_tree(args)) if args.bootstrap_steps else ""}, "exit_codes": codes, "warm_start": warm_info,
           "summary": {arm: summary(a["steps"]) for arm, a in arms.items() if a["steps"]},
           "arms": arms, "commit": commit, "commit_start": commit0, "dirty_start": dirty, "nproc": os.cpu_count(), "loadavg_start": load0,
           "loadavg_end": os.getloadavg(), "wall_s": round(time.time() - t0, 1)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    plot(res, Path(args.png))
    line = {k: res[k] for k in ("benchmark", "steps", "summary", "wall_s", "loadavg_start", "loadavg_end", "commit")}
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
