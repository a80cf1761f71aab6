"""Evidence: TTT-Discover with SmolLM2-135M on Erdős against the same model frozen and a proposer with no model.

Three arms per evaluation seed, at equal sandbox evaluations (every arm proposes `rollouts_per_state` programs
for each of `states_per_step` PUCT-chosen states per step, for `--steps` steps) and an equal wall budget per
arm (`--wall-budget`: an arm that reaches it stops after its current step; the JSON says how many
evaluations each arm got):

* `trained` (TTT): the preset's warm-started LoRA, updated after every step (entropic advantages, the
  importance-sampled policy gradient; `ttlab.discover.llm.trainer`);
* `frozen`: the same warm start, sampled, run and verified exactly like TTT (same sampler, temperature and
  prompts) but never updated: best-of-N of the frozen model;
* `random_blocks`: no model: random compositions of the Erdős building blocks (`random_blocks.py`, the grammar
  the blocks warm start was trained on), through the same PUCT search loop, sandbox and verifier
  (`ttlab discover search --proposer random_blocks`).

All arms of a seed start from the same roots (the task's initial states for that seed) and give programs the
same budget. Hyperparameters (lr, temperature) are chosen on `--tuning-seed` only; the evaluation seeds must
differ from it. Per step and arm: evaluations so far, best C5 so far, valid rate, mean reward, solved beta and
whether it sits at its cap, the step's time split (generate / evaluate / learn). Writes the JSON and a
best-C5-vs-evaluations PNG (one panel per seed) and prints ONE JSON line last.

    python benchmarks/discover_ttt.py --preset cpu_smollm2_blocks --seeds 1,2,3 --tuning-seed 0 --steps 10 \\
        --wall-budget 40m --out benchmarks/results/discover_ttt/blocks.json --png benchmarks/results/discover_ttt/blocks.png

`--jobs N` runs N arms side by side (separate processes, 1 torch thread each); `--jobs 0` runs them in this
process one after another (tests). The earlier two-arm runs (compact format, `--arms trained,frozen`,
`--bootstrap-steps`, `--probe-update`) still run with the same flags.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from ttlab.common.data import repo_relative
from ttlab.common.duration import parse_duration
from ttlab.common.errors import UserError
from ttlab.discover.llm.ttt_compare import ARMS, arm_summary, comparison_targets, random_arm, trainer_steps

ROOT = Path(__file__).resolve().parents[1]


def preset_config(args, seed: int):
    """The preset's TrainConfig with this run's overrides (shared by every arm)."""
    from ttlab.discover.llm.presets import TRAIN_PRESETS

    if args.preset not in TRAIN_PRESETS:
        raise SystemExit(f"--preset {args.preset}: unknown (one of {', '.join(sorted(TRAIN_PRESETS))})")
    cfg = TRAIN_PRESETS[args.preset]()
    cfg.steps, cfg.seed, cfg.threads, cfg.learn_threads = args.steps, seed, args.threads, args.learn_threads
    if args.model:
        cfg.policy.model = args.model
    if args.backend:
        cfg.policy.backend = args.backend
    if args.lr:
        cfg.lr = args.lr
    if args.states_per_step:
        cfg.states_per_step = args.states_per_step
    if args.rollouts_per_state:
        cfg.rollouts_per_state = args.rollouts_per_state
    if args.fail_mode:
        cfg.fail_mode = args.fail_mode
    if args.adv_group:
        cfg.adv_group = args.adv_group
    if args.kl_coef is not None:
        cfg.kl_coef = args.kl_coef
    if args.kl_ref:
        cfg.kl_ref = args.kl_ref
    if args.temperature:
        cfg.policy.temperature = args.temperature
    if args.max_new_tokens:
        cfg.policy.max_new_tokens = args.max_new_tokens
    if args.gen_batch_size:
        cfg.policy.gen_batch_size = args.gen_batch_size
    if args.micro_batch:
        cfg.micro_batch = args.micro_batch
    if args.llama_weights:
        cfg.policy.llama_weights = args.llama_weights
    if args.start_steps:
        cfg.init_tree = str(start_tree(args, seed))
    return cfg


def config(args, arm: str, seed: int):
    cfg = preset_config(args, seed)
    cfg.frozen = arm == "frozen"
    cfg.root, cfg.run_name = str(Path(args.runs)), f"ttt_{arm}_{args.tag}_s{seed}"
    cfg.probe_update = args.probe_update and arm == "trained"
    if args.bootstrap_steps:
        cfg.init_tree = str(bootstrap_tree(args, seed))
    return cfg


def bootstrap_tree(args, seed: int) -> Path:
    """Where the shared bootstrap run (`--bootstrap-steps`) leaves its tree (the LLM arms start from it)."""
    return Path(args.runs) / "discover" / f"ttt_boot_{args.tag}_s{seed}" / "tree.json"


def bootstrap(args, policy, seed: int) -> list[dict]:
    """`--bootstrap-steps` frozen steps at `--bootstrap-temperature` from fresh roots, run ONCE before the arms."""
    from ttlab.discover.llm.trainer import Trainer

    cfg = preset_config(args, seed)
    cfg.steps, cfg.frozen, cfg.warm_start = args.bootstrap_steps, True, False
    cfg.policy.temperature = args.bootstrap_temperature
    cfg.root, cfg.run_name = str(Path(args.runs)), f"ttt_boot_{args.tag}_s{seed}"
    policy.cfg.temperature = cfg.policy.temperature
    tr = Trainer(cfg, policy=policy, log=lambda s: print(f"[bootstrap] {s}", flush=True))
    rows = trainer_steps(tr, cfg, "bootstrap", math.inf)
    policy.cfg.temperature = preset_config(args, seed).policy.temperature
    if not bootstrap_tree(args, seed).is_file():
        raise SystemExit(f"bootstrap: no tree at {bootstrap_tree(args, seed)}")
    return rows


START_SEED_OFFSET = 100_003
"""The shared start's programs and roots are drawn with seed + this, so the random arm does not redraw them."""


def start_tree(args, seed: int) -> Path:
    """Where the shared start (`--start-steps`) leaves its tree (every arm starts from it)."""
    return Path(args.runs) / "discover" / f"ttt_start_{args.tag}_s{seed}" / "tree.json"


def shared_start(args, seed: int) -> dict:
    """`--start-steps` random-blocks steps from fresh roots, run ONCE per seed before the arms (kept when its tree
    exists): no arm's proposer makes the first states, so the arms differ only in how they improve a tree."""
    path = start_tree(args, seed)
    if not path.is_file():
        c = preset_config(args, seed)
        c.init_tree, c.steps = None, args.start_steps
        print(f"[start s{seed}] {args.start_steps} random-blocks step(s) from fresh roots", flush=True)
        random_arm(c, seed + START_SEED_OFFSET, path.parent.name, str(Path(args.runs)), math.inf)
    if not path.is_file():
        raise SystemExit(f"--start-steps: no tree at {path}")
    best = min(n["score"] for n in json.loads(path.read_text())["nodes"])
    return {"tree": repo_relative(path), "best_c5": best}


def run_arm(args, arm: str, seed: int, out: Path | None = None) -> dict:
    """One arm of one seed (in this process); its rows are saved to `out` after every step when given."""
    from ttlab.discover.llm.trainer import Trainer

    wall = parse_duration(args.wall_budget, "--wall-budget") or math.inf

    def save(res: dict) -> None:
        if out is not None:
            out.write_text(json.dumps(res))

    if arm == "random_blocks":
        res = random_arm(preset_config(args, seed), seed, f"ttt_random_blocks_{args.tag}_s{seed}", str(Path(args.runs)),
                         wall, lambda rows: save({"arm": arm, "seed": seed, "steps": rows}))
        res["complete"] = True
        save(res)
        return res
    cfg = config(args, arm, seed)
    tr = Trainer(cfg, log=lambda s: print(f"[{arm} s{seed}] {s}", flush=True))
    res = {"arm": arm, "seed": seed, "steps": [], "warm": tr.warm_info}
    res["steps"] = trainer_steps(tr, cfg, f"{arm} s{seed}", wall, lambda rows: save({**res, "steps": rows}))
    res["complete"] = True  # ran to --steps or to the wall budget (a killed arm's file lacks this)
    save(res)
    return res


def complete(run: dict | None, steps: int) -> bool:
    """An arm/seed result that needs no rerun: it ended on its own (to --steps or the wall budget), or (a file
    written before completion was recorded) it holds --steps rows."""
    return bool(run) and (bool(run.get("complete")) or len(run.get("steps", [])) >= steps)


def arm_file(args, seed: int, arm: str) -> Path:
    """Where an arm process writes its rows (after every step) when the arms run as processes."""
    return Path(args.runs) / f"ttt_{arm}_{args.tag}_s{seed}.json"


def earlier_runs(args, seeds: list[int], arms: list[str]) -> dict[tuple[int, str], dict]:
    """`--resume`: the arm/seed results already there, from the --out JSON of an earlier run (same tag) and from
    this tag's arm files (the newer wins); each marked complete or not."""
    found: dict[tuple[int, str], dict] = {}
    if Path(args.out).is_file():
        prev = json.loads(Path(args.out).read_text())
        for s in seeds:
            for a in arms:
                r = prev.get("runs", {}).get(str(s), {}).get(a)
                if r and r.get("steps"):
                    found[(s, a)] = r
    for s in seeds:
        for a in arms:
            f = arm_file(args, s, a)
            if f.is_file():
                r = json.loads(f.read_text())
                if len(r.get("steps", [])) >= len(found.get((s, a), {}).get("steps", [])):
                    found[(s, a)] = r
    return found


def set_aside(args, seed: int, arm: str) -> None:
    """`--resume` reruns an incomplete arm from step 0: its old run directory is renamed (kept, not mixed in)."""
    d = Path(args.runs) / "discover" / f"ttt_{arm}_{args.tag}_s{seed}"
    if d.exists():
        d.rename(d.with_name(f"{d.name}.cut-{time.strftime('%Y%m%d_%H%M%S')}"))


def equal_evaluations(runs: dict) -> dict:
    """Per seed, the arms cut to the steps every arm of that seed reached (the comparison is at equal sandbox
    evaluations even when a run was cut short)."""
    out = {}
    for seed, arms_ in runs.items():
        n = min((len(r.get("steps", [])) for r in arms_.values()), default=0)
        out[seed] = {a: r.get("steps", [])[:n] for a, r in arms_.items()}
    return out


def warm(args, seeds: list[int], llm_arms: bool) -> tuple[dict, dict]:
    """Train (or load) the shared warm start once, then run each seed's bootstrap (if any), before the arms."""
    if not llm_arms:
        return {}, {}
    import torch

    from ttlab.common.device import seed_everything
    from ttlab.discover.llm.policy import LLMPolicy
    from ttlab.discover.llm.warmstart import warm_start
    from ttlab.discover.prompts import ANSWER_PREFIXES
    from ttlab.discover.tasks import get_task

    cfg = config(args, "trained", seeds[0])
    torch.set_num_threads(max(1, args.threads))
    seed_everything(cfg.seed)
    pol = LLMPolicy(cfg.policy, torch.device("cpu"), seed=cfg.seed,
                    answer_prefix=ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task)))
    info = {}
    if cfg.warm_start:
        info = warm_start(pol, cfg.warm, log=lambda s: print(s, flush=True), prompt_format=cfg.prompt_format)
    boots = {s: bootstrap(args, pol, s) for s in seeds} if args.bootstrap_steps else {}
    return info, boots


COLORS = {"trained": "tab:blue", "frozen": "tab:orange", "random_blocks": "tab:green"}


def plot(res: dict, path: Path) -> None:
    """Best C5 so far against sandbox evaluations, one panel per seed, a line per arm."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    seeds = list(res["runs"])
    fig, axes = charts.panels(max(1, len(seeds)), size=(4.6, 3.8), title=res["title"])
    for ax, seed in zip(axes, seeds, strict=False):
        for arm, a in res["runs"][seed].items():
            rows = [r for r in a.get("steps", []) if r.get("tree/best_score") is not None]
            ax.plot([r["evals"] for r in rows], [r["tree/best_score"] for r in rows], "-o", ms=3,
                    label={"trained": "TTT"}.get(arm, arm), color=COLORS.get(arm, "black"))
        ax.set_title(f"seed {seed}")
        ax.set_xlabel("sandbox evaluations")
        ax.set_ylabel("best C5 so far (lower is better)")
    charts.legend_below(fig, axes)
    charts.save(fig, path)


def parse_seeds(args) -> list[int]:
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()] if args.seeds else [args.seed]
    if args.tuning_seed in seeds:
        raise SystemExit(f"--seeds {args.seeds}: the tuning seed {args.tuning_seed} cannot be an evaluation seed")
    return seeds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="cpu_smollm2", help="train preset of the LLM arms (cpu_smollm2_blocks for 3 arms)")
    ap.add_argument("--model", default="", help="override the preset's model (a tiny HF directory in tests)")
    ap.add_argument("--backend", default="", help="override the preset's sampler (hf | llama)")
    ap.add_argument("--arms", default="trained,frozen", help=f"comma-separated subset of {','.join(ARMS)}")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1, help="the evaluation seed when --seeds is not given")
    ap.add_argument("--seeds", default="", help="comma-separated evaluation seeds, e.g. 1,2,3")
    ap.add_argument("--tuning-seed", type=int, default=0,
                    help="the seed hyperparameters were chosen on (recorded; never an evaluation seed)")
    ap.add_argument("--wall-budget", default="", help="wall-clock budget per arm and seed, e.g. 40m (empty: none)")
    ap.add_argument("--jobs", type=int, default=2, help="arms run side by side as processes (0: in this process)")
    ap.add_argument("--lr", type=float, default=0.0, help="override the preset's learning rate")
    ap.add_argument("--states-per-step", type=int, default=0, help="override the preset's states per step")
    ap.add_argument("--rollouts-per-state", type=int, default=0, help="override the preset's rollouts per state")
    ap.add_argument("--max-new-tokens", type=int, default=0, help="override the preset's completion cap")
    ap.add_argument("--gen-batch-size", type=int, default=0, help="override the preset's sampling batch")
    ap.add_argument("--micro-batch", type=int, default=0, help="override the preset's learner micro-batch")
    ap.add_argument("--llama-weights", default="", choices=("", "gguf", "f16"),
                    help="llama.cpp sampler's weights (f16: a float16 copy of the dequantised GGUF; default: the preset's)")
    ap.add_argument("--fail-mode", default="", choices=("", "floor", "zero"),
                    help="failed rollouts' place per group (default: the preset's)")
    ap.add_argument("--adv-group", default="", choices=("", "state", "state_start"),
                    help="override the preset's advantage groups (state_start: per state and program start)")
    ap.add_argument("--kl-coef", type=float, default=None, help="override the preset's KL penalty coefficient")
    ap.add_argument("--kl-ref", default="", choices=("", "base", "init"),
                    help="the KL penalty's reference (init: the warm-started adapter before any update)")
    ap.add_argument("--temperature", type=float, default=0.0, help="override the preset's sampling temperature")
    ap.add_argument("--probe-update", action="store_true",
                    help="TTT arm: log each update's log-prob change of positive / negative-advantage completions")
    ap.add_argument("--bootstrap-steps", type=int, default=0,
                    help="frozen steps run once per seed from fresh roots; the LLM arms start from its tree")
    ap.add_argument("--start-steps", type=int, default=0,
                    help="every arm starts from one shared tree: this many random-blocks steps from the seed's fresh "
                         "roots, run once per seed (0: each arm starts from the roots)")
    ap.add_argument("--bootstrap-temperature", type=float, default=0.5, help="sampling temperature of the bootstrap")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per arm")
    ap.add_argument("--learn-threads", type=int, default=0,
                    help="torch threads of an arm's learn phase only (0: --threads); with --jobs 0 on free cores, "
                         "the core count")
    ap.add_argument("--runs", default=str(ROOT / "runs"))
    ap.add_argument("--tag", default=time.strftime("%Y%m%d_%H%M%S"))
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "discover_ttt" / "discover_ttt.json"))
    ap.add_argument("--png", default=None, help="best C5 against evaluations (default: --out with .png)")
    ap.add_argument("--plot-only", default="", help="redraw the PNG of an existing result JSON and exit")
    ap.add_argument("--resume", action="store_true",
                    help="keep the arm/seed pairs already complete (in --out or this --tag's arm files); run the rest")
    ap.add_argument("--collect", action="store_true",
                    help="run nothing: write --out from this --tag's arm files as they are (a partial run, labelled)")
    ap.add_argument("--arm", default="", help=argparse.SUPPRESS)
    ap.add_argument("--arm-seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--arm-out", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plot_only:
        plot(json.loads(Path(args.plot_only).read_text()),
             Path(args.png) if args.png else Path(args.plot_only).with_suffix(".png"))
        return
    if args.arm:
        run_arm(args, args.arm, args.arm_seed, Path(args.arm_out))
        return
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad or not arms:
        raise SystemExit(f"--arms {args.arms}: unknown arm(s) {bad} (choose from {', '.join(ARMS)})")
    if args.start_steps and args.bootstrap_steps:
        raise SystemExit("--start-steps and --bootstrap-steps: both set the arms' first tree; use one")
    if args.start_steps < 0:
        raise SystemExit(f"--start-steps {args.start_steps}: must be >= 0")
    if args.bootstrap_steps and "random_blocks" in arms:
        raise SystemExit("--bootstrap-steps: the random_blocks arm starts from the seed's fresh roots; drop one of them")
    try:
        parse_duration(args.wall_budget, "--wall-budget")  # a bad budget fails before any work
    except UserError as e:
        raise SystemExit(str(e)) from None
    seeds = parse_seeds(args)
    t0, load0 = time.time(), os.getloadavg()
    git = ["git", "-C", str(ROOT)]
    commit0 = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                text=True).stdout.strip())
    llm = [a for a in arms if a != "random_blocks"]
    if (args.resume or args.collect) and args.tag == ap.get_default("tag"):
        raise SystemExit("--resume / --collect: name the run to continue with --tag")
    if args.collect and args.jobs <= 0:
        raise SystemExit("--collect: reads the arm files that --jobs >= 1 writes")
    done = earlier_runs(args, seeds, arms) if args.resume or args.collect else {}
    kept = {k: r for k, r in done.items() if complete(r, args.steps)}
    if kept:
        print(f"--resume: keeping {', '.join(f'{a} s{s}' for s, a in kept)}", flush=True)
    runs: dict[str, dict] = {str(s): {} for s in seeds}
    for (s, a), r in kept.items():
        runs[str(s)][a] = r
    jobs = [] if args.collect else [(s, a) for s in seeds for a in arms if (s, a) not in kept]
    if args.resume:
        for s, a in jobs:
            set_aside(args, s, a)
    prev = json.loads(Path(args.out).read_text()) if args.resume and Path(args.out).is_file() else {}
    starts = {str(sd): shared_start(args, sd) for sd in seeds} if args.start_steps else {}
    warm_info, boots = warm(args, seeds, bool(llm)) if jobs else (prev.get("warm_start", {}), {})
    if args.jobs <= 0:
        for s, a in jobs:
            runs[str(s)][a] = run_arm(args, a, s)
    else:
        outs = {(s, a): arm_file(args, s, a) for s, a in jobs}
        for o in outs.values():
            if o.exists():
                o.unlink()  # an incomplete earlier attempt: this arm starts again from step 0
        pending, live = list(jobs), {}
        while pending or live:
            while pending and len(live) < args.jobs:
                s, a = pending.pop(0)
                outs[(s, a)].parent.mkdir(parents=True, exist_ok=True)
                live[(s, a)] = subprocess.Popen(
                    [sys.executable, __file__, *sys.argv[1:], "--tag", args.tag, "--arm", a, "--arm-seed", str(s),
                     "--arm-out", str(outs[(s, a)])], env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
            time.sleep(1.0)
            for key, p in list(live.items()):
                if p.poll() is not None:
                    del live[key]
        for (s, a), o in outs.items():
            runs[str(s)][a] = json.loads(o.read_text()) if o.exists() else {"steps": []}
    if args.collect:
        for (s, a), r in done.items():
            runs[str(s)].setdefault(a, r)
    incomplete = [f"{a} s{s}" for s in seeds for a in arms if not complete(runs[str(s)].get(a), args.steps)]
    c = preset_config(args, seeds[0])
    cut = equal_evaluations(runs)
    summary = {seed: {a: arm_summary(rows) for a, rows in arms_.items()} for seed, arms_ in cut.items()}
    res = {"benchmark": "discover_ttt", "model": c.policy.model, "task": c.task, "preset": args.preset,
           "prompt_format": c.prompt_format, "sampler": c.policy.backend,
           "llama_weights": c.policy.llama_weights, "micro_batch": c.micro_batch, "arms": arms, "seeds": seeds,
           "tuning_seed": args.tuning_seed, "steps": args.steps, "lr": c.lr, "temperature": c.policy.temperature,
           "rollouts_per_step": c.states_per_step * c.rollouts_per_state, "states_per_step": c.states_per_step,
           "program_budget_s": c.program_budget_s, "wall_budget": args.wall_budget or "none",
           "fail_mode": c.fail_mode, "adv_group": c.adv_group, "kl_coef": c.kl_coef, "kl_ref": c.kl_ref,
           "threads_per_arm": args.threads, "learn_threads": args.learn_threads, "jobs": args.jobs,
           "title": f"TTT-Discover {args.preset}, Erdős, {c.states_per_step * c.rollouts_per_state} programs/step, "
                    f"T {c.policy.temperature}, lr {c.lr:g}",
           "bootstrap": {"steps": args.bootstrap_steps, "temperature": args.bootstrap_temperature,
                         "rows": {str(s): r for s, r in boots.items()},
                         "trees": {str(s): repo_relative(bootstrap_tree(args, s)) for s in boots}},
           "start": {"steps": args.start_steps, "seed_offset": START_SEED_OFFSET, "by_seed": starts},
           "warm_start": warm_info, "partial": bool(incomplete), "incomplete": incomplete,
           "summary_note": "each seed's arms compared over the steps all of them reached (equal evaluations)",
           "summary": summary, "targets": comparison_targets(summary), "runs": runs,
           "commit": subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "commit_start": commit0, "dirty_start": dirty, "nproc": os.cpu_count(), "loadavg_start": load0,
           "loadavg_end": os.getloadavg(), "wall_s": round(time.time() - t0, 1)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    png = Path(args.png) if args.png else Path(args.out).with_suffix(".png")
    png.parent.mkdir(parents=True, exist_ok=True)
    plot(res, png)
    line = {k: res[k] for k in ("benchmark", "preset", "seeds", "steps", "partial", "incomplete", "targets", "wall_s",
                                "loadavg_start", "loadavg_end", "commit")}
    line["best_c5"] = {seed: {a: s["best_c5"] for a, s in arms_.items()} for seed, arms_ in summary.items()}
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
