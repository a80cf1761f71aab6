"""World-model evidence on CPU: a generative NanoWM on held-out PushT against every cheap predictor. Prints ONE JSON
line last.

One resumable command, on one thread per process (`--devices 2 --batch 32`: DDP over both cores):
  1. data: PushT 64x64 from the smooth pusher (gym-pusht) into data/ if missing; its measured motion per model
     frame beside the earlier scripted pusher's (24 episodes simulated, not written);
  2. speed: fp32 and bf16 matmul peaks and the training step's rate, measured here, and the rate the training
     loop reached (not in an --eval-only rescoring); the budget is wall-clock minutes (the LR schedule follows the elapsed fraction; a resumed
     run continues its clock), or a fixed --max-steps;
  3. training: the `pusht_cpu` preset (delta x-target diffusion over all levels, 2 context frames + 3 predicted);
  4. scoring (`ttlab.worldmodel.scorecard`) on held-out episodes: windows (lags 1-3) and 24-frame rollouts,
     model vs copy-last / mean frame / fitted blend, T and agent poses read by matching the simulator's
     geometry, ink kept, true vs another episode's actions, two noise seeds;
  5. figures: a strip PNG and a rollout GIF.
Writes benchmarks/results/wm_evidence/{wm_evidence.json, strip.png, rollouts.gif}.

    python benchmarks/wm_evidence.py [--train-minutes 45] [--run-name evidence] [--resume] [--eval-only]
    python benchmarks/wm_evidence.py --abs-actions --action-map gaussian --compile  # pixel-aligned actions
    python benchmarks/wm_evidence.py --abs-actions --action-map gaussian --compile --devices 2 --batch 32  # both cores
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from ttlab.common.checkpoint import CheckpointError
from ttlab.worldmodel.config import TrainConfig
from ttlab.worldmodel.data.pusht import generate_pusht, motion_stats, rollout_episode
from ttlab.worldmodel.diffusion import Objective
from ttlab.worldmodel.diffusion.samplers import MODES
from ttlab.worldmodel.distributed import launched_rank
from ttlab.worldmodel.model import count_parameters
from ttlab.worldmodel.presets import pusht_cpu
from ttlab.worldmodel.scorecard import fit_baselines, score_rollouts, score_windows, scorecard_targets
from ttlab.worldmodel.throughput import matmul_peak, train_step_rate
from ttlab.worldmodel.train import (
    build_datasets,
    build_model_config,
    dataset_action_pixels,
    resolve_precision,
    train,
)
from ttlab.worldmodel.visuals import rollout_gif, strip_png
from ttlab.worldmodel.weights import load_world_model, sampling_model

ROOT = Path(__file__).resolve().parent.parent


def git_rev() -> str:
    """HEAD, with -dirty when tracked files differ from it."""
    run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    return run("rev-parse", "HEAD") + ("-dirty" if run("status", "--porcelain", "--untracked-files=no") else "")


def r(x, n=4):
    return [round(v, n) for v in x] if isinstance(x, list) else round(float(x), n)


def table(res: dict, names: tuple[str, ...], keys: tuple[str, ...]) -> dict:
    return {n: {k: r(res[f"{n}/{k}"]) for k in keys if f"{n}/{k}" in res} |
            {f"{k}/by_lag": r(res[f"{n}/{k}/by_lag"]) for k in keys if f"{n}/{k}/by_lag" in res} for n in names}


def train_config(args: argparse.Namespace, data: Path, batch: int) -> TrainConfig:
    """The training configuration the flags name: `pusht_cpu` with each flag applied (with `--abs-actions
    --action-map gaussian --compile --refiner 32 --devices 2 --batch 32` it is the `pusht_map` preset)."""
    cfg = replace(pusht_cpu(), data=str(data), threads=args.threads, run_name=args.run_name, root=args.root,
                  resume=args.resume, branch=replace(pusht_cpu().branch, frac=args.branch_frac),
                  relative_actions=not args.abs_actions, action_map=args.action_map,
                  action_map_sigma=args.action_map_sigma, compile=args.compile,
                  diffusion=replace(pusht_cpu().diffusion, change_weight=args.change_weight,
                                    context_noise=args.context_noise),
                  self_forcing=args.self_forcing, self_forcing_steps=args.self_forcing_steps,
                  self_forcing_start=args.self_forcing_start,
                  seed=args.seed, split_seed=0, heldout_of=args.heldout_of, devices=args.devices,
                  batch_size=batch // args.devices)
    if args.hidden or args.depth:
        cfg = replace(cfg, hidden=args.hidden or cfg.hidden, depth=args.depth or cfg.depth)
    if args.refiner:
        cfg = replace(cfg, refiner=args.refiner)
    if args.max_steps:  # a fixed step budget (the cosine anneals inside it)
        cfg = replace(cfg, max_steps=args.max_steps, checkpoint_every=min(cfg.checkpoint_every, max(10, args.max_steps // 10)))
    else:  # a wall-clock budget: the schedule follows elapsed time, so a busy machine trains fewer steps, annealed
        cfg = replace(cfg, budget_minutes=args.train_minutes, max_steps=10**7, checkpoint_every=200)
    return cfg


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data/pusht64_smooth")
    ap.add_argument("--episodes", type=int, default=400, help="episodes to generate when --data is missing")
    ap.add_argument("--episode-steps", type=int, default=150, help="raw steps per generated episode")
    ap.add_argument("--heldout-of", type=int, default=0, help="score on the held-out split of the first N "
                    "episodes and train on all others (a larger dataset made with the same seed, scored on the "
                    "smaller one's held-out episodes; 0 = split the whole dataset)")
    ap.add_argument("--train-minutes", type=float, default=45.0, help="training wall-clock budget (the LR schedule "
                    "follows the elapsed fraction of it)")
    ap.add_argument("--max-steps", type=int, default=0, help="fix the step budget instead (0 = from --train-minutes)")
    ap.add_argument("--hidden", type=int, default=0, help="override the preset's width (0 keeps it)")
    ap.add_argument("--depth", type=int, default=0, help="override the preset's depth (0 keeps it)")
    ap.add_argument("--refiner", type=int, default=0, help="channels of a full-resolution conv refiner after the "
                    "patch output (0 = none)")
    ap.add_argument("--branch-frac", type=float, default=0.0, help="share of each batch from the branched-clip pool "
                    "(one context, action-determined futures; 0 = off)")
    ap.add_argument("--abs-actions", action="store_true", help="condition on the PD target itself (abs_actions.pth, "
                    "a point in the image) instead of the target minus the agent")
    ap.add_argument("--action-map", choices=("none", "gaussian"), default="none", help="also draw the targets into "
                    "the frames they lead to (needs --abs-actions)")
    ap.add_argument("--action-map-sigma", type=float, default=1.5, help="blob width in pixels")
    ap.add_argument("--change-weight", type=float, default=0.0, help="extra loss weight on the pixels that change "
                    "from the last context frame (DiffusionConfig.change_weight; 0 = off)")
    ap.add_argument("--context-noise", type=float, default=0.0,
                    help="train on context frames with sigma ~ U(0, this) Gaussian noise added, the anchor included "
                    "(DiffusionConfig.context_noise, frames in [-1, 1]; 0 = off)")
    ap.add_argument("--self-forcing", type=float, default=0.0,
                    help="share of each batch trained on the model's own context: a rollout's second round, sampled "
                    "without gradient (TrainConfig.self_forcing; 0 = off)")
    ap.add_argument("--self-forcing-steps", type=int, default=0, help="sampling steps of that pass (0 = the "
                    "model's own sample_steps)")
    ap.add_argument("--self-forcing-start", type=float, default=0.0, help="self-force only after this fraction of "
                    "the training budget (0 = throughout; e.g. 0.78: the last 20 of 90 minutes)")
    ap.add_argument("--seed", type=int, default=0, help="training seed (init, batches, noise); the held-out "
                    "episodes stay those of seed 0, so seeds are scored on the same set")
    ap.add_argument("--compile", action="store_true", help="train through torch.compile of the denoiser")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--devices", type=int, default=1, help="training processes (DDP over gloo), the global batch "
                    "split between them; scoring, in one process after training, uses threads x devices")
    ap.add_argument("--batch", type=int, default=0, help=f"global batch (0 = the preset's, {pusht_cpu().batch_size})")
    ap.add_argument("--run-name", default="evidence")
    ap.add_argument("--root", default="runs", help="runs root: the run is ROOT/wm/RUN_NAME")
    ap.add_argument("--resume", action="store_true", help="continue the run from its last checkpoint, same budget")
    ap.add_argument("--eval-only", action="store_true", help="score the existing run without training")
    ap.add_argument("--sample-mode", choices=MODES, default="full_sequence", help="the sampler's noise schedule over "
                    "a window's frames (choose it on tuning episodes: benchmarks/wm_sampler_sweep.py)")
    ap.add_argument("--rollout-keep", type=int, default=0, help="generated frames a rollout keeps per round (0 = all)")
    ap.add_argument("--sample-steps", type=int, default=0, help="sampling steps (0 = the run's)")
    ap.add_argument("--history-noise", type=float, default=0.0, help="the noise level the context is shown at, a "
                    "fraction of the way to pure noise (diffusion forcing's stabilisation; 0 = clean)")
    ap.add_argument("--eta", type=float, default=0.0, help="stochastic DDIM's eta (0 = deterministic)")
    ap.add_argument("--guide", default="", help="autoguidance: a weaker checkpoint of the same model to steer away "
                    "from, e.g. RUN/checkpoints/step=1000.ckpt (diffusion/guidance.py; empty = none)")
    ap.add_argument("--guidance", type=float, default=1.0, help="autoguidance weight w >= 1: bad + w (good - bad)")
    ap.add_argument("--noise-seed", type=int, default=0, help="seed of the sampling noise in scoring (the same "
                    "windows and episodes; another value shows how much a score rests on the draws)")
    ap.add_argument("--eval-windows", type=int, default=256)
    ap.add_argument("--rollout-episodes", type=int, default=32)
    ap.add_argument("--out-dir", default="runs/bench/wm_evidence")
    return ap


def measure_speed(mcfg, obj, cfg, trained: str) -> dict:
    """fp32 and bf16 matmul peaks and the training step's rate on this CPU, now."""
    print(f"measuring matmul peaks and the training step ({trained})", flush=True)
    speed = {"fp32_matmul": matmul_peak(dtype=torch.float32),
             # without bf16 units a bf16 matmul runs ~100x below float32: one size shows it
             "bf16_matmul": matmul_peak(sizes=(512, 1024, 2048) if trained == "bf16" else (512,),
                                        dtype=torch.bfloat16)}
    if trained == "bf16":
        speed["step_bf16"] = train_step_rate(mcfg, obj, cfg.batch_size, cfg.num_frames, dtype=torch.bfloat16)
    speed["step_fp32"] = train_step_rate(mcfg, obj, cfg.batch_size, cfg.num_frames, steps=3, dtype=torch.float32)
    for k, peak in (("step_bf16", "bf16_matmul"), ("step_fp32", "fp32_matmul")):
        if k in speed:
            speed[k]["fraction_of_peak"] = r(speed[k]["gflops_median"] / speed[peak]["peak_gflops"])
    return speed


def main() -> None:
    ap = build_parser()
    args = ap.parse_args()
    if args.rollout_keep < 0:
        ap.error(f"--rollout-keep {args.rollout_keep}: must be >= 0 (0 = every generated frame)")
    if args.refiner < 0:
        ap.error(f"--refiner {args.refiner}: must be >= 0 (0 = none)")
    if args.heldout_of < 0:
        ap.error(f"--heldout-of {args.heldout_of}: must be >= 0 (0 = split the whole dataset)")
    if args.sample_steps < 0:
        ap.error(f"--sample-steps {args.sample_steps}: must be >= 1 (or 0 for the run's)")
    if not 0 <= args.history_noise < 1:
        ap.error(f"--history-noise {args.history_noise}: must be in [0, 1)")
    if args.eta < 0:
        ap.error(f"--eta {args.eta}: must be >= 0")
    if not args.guidance >= 1 or (args.guidance != 1 and not args.guide):
        ap.error(f"--guidance {args.guidance}: must be >= 1, and above 1 only with --guide")
    if args.guide and args.eval_only and not Path(args.guide).is_file():
        ap.error(f"--guide {args.guide}: no such checkpoint")
    batch = args.batch or pusht_cpu().batch_size
    if args.batch < 0:
        ap.error(f"--batch {args.batch}: must be >= 1 (or 0 for the preset's)")
    if args.devices < 1 or batch % args.devices:
        ap.error(f"--devices {args.devices}: must be >= 1 and divide the global batch {batch}")
    rank = launched_rank()  # > 0: a process Lightning launched to train beside rank 0, which does everything else
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    commit = git_rev()
    load_before = os.getloadavg()
    out_dir = Path(args.out_dir) if Path(args.out_dir).is_absolute() else ROOT / args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)

    data = Path(args.data)
    gen = None
    if not (data / "states.pth").exists():
        print(f"generating {args.episodes} PushT episodes into {data}", flush=True)
        gen = generate_pusht(data, args.episodes, 64, args.episode_steps, workers=min(2, os.cpu_count() or 1),
                             seed=0, show_progress=False)
    made = json.loads((data / "ttlab_pusht.json").read_text())
    if args.heldout_of and not 2 <= args.heldout_of <= made["episodes"]:
        ap.error(f"--heldout-of {args.heldout_of}: needs 2 <= N <= the {made['episodes']} episodes of {data}")
    motion = {}
    if rank == 0:
        old = [rollout_episode(1000 + i, 64, args.episode_steps, "scripted")["states"] for i in range(24)]
        motion = {"ours_smooth": made.get("motion_interval5"),
                  "earlier_scripted": motion_stats(old, [len(s) for s in old], 5, 64)}

    if args.action_map != "none" and not args.abs_actions:
        ap.error(f"--action-map {args.action_map}: needs --abs-actions (relative actions are not image positions)")
    cfg = train_config(args, data, batch)
    if rank > 0:
        train(cfg)
        # leave at once: Lightning's launcher watches this process, and a failure in a later teardown would
        # kill rank 0 while it scores
        os._exit(0)
    run_dir = Path(cfg.root) / "wm" / cfg.run_name
    train_ds, val_ds = build_datasets(cfg, None)
    mcfg = build_model_config(cfg, tuple(train_ds[0]["frames"].shape[1:]), train_ds.action_dim,
                              dataset_action_pixels(cfg, train_ds))
    obj = Objective(cfg.diffusion)
    # the precision this CPU trains in: the preset's bf16-mixed, or float32 where bf16 has no units (the trainer
    # decides the same way, and warns)
    precision = resolve_precision(cfg, "cpu")
    trained = "bf16" if precision.startswith("bf16") else "fp32"
    step_key, peak_key = f"step_{trained}", f"{trained}_matmul"
    max_steps = cfg.max_steps
    # speed belongs to a training: a rescoring measures none (its peaks, taken under whatever else runs then,
    # would be divided into the training's rate)
    speed = None if args.eval_only else measure_speed(mcfg, obj, cfg, trained)
    if speed is not None:
        print(f"training for {args.max_steps or args.train_minutes} {'steps' if args.max_steps else 'minutes'} "
              f"(measured {speed[step_key]['step_s_median']} s/step)", flush=True)
    exported = run_dir / "checkpoints" / "weights_latest.json"
    steps_before = load_world_model(run_dir).step if (args.resume or args.eval_only) and exported.exists() else 0
    summary = run_dir / "evidence_train.json"  # this script's record of training, read back by --eval-only
    if args.eval_only:
        tr = json.loads(summary.read_text()) if summary.exists() else \
            {"steps": steps_before, "seconds": float("nan"), "stopped_by_wall_clock": None}
        steps_before = tr.get("steps_before", steps_before)
    else:
        tr = train(cfg)
        tr = {k: tr[k] for k in ("steps", "seconds", "stopped_by_wall_clock")} | {
            "steps_before": steps_before, "devices": args.devices, "batch_per_process": cfg.batch_size}
        summary.write_text(json.dumps(tr) + "\n")
    # how the run trained (an --eval-only rescoring takes it from the record, not from its own flags)
    devices, per_process = tr.get("devices", args.devices), tr.get("batch_per_process", cfg.batch_size)
    wm = load_world_model(run_dir)
    try:  # the model itself, or autoguided away from --guide
        model = sampling_model(wm, args.guide, args.guidance)
    except CheckpointError as e:
        raise SystemExit(f"wm_evidence: --guide: {e}") from None
    # the configuration the run last trained with: a resumed run's flags are in config.resume.json
    cfg_file = next((p for p in (run_dir / "config.resume.json", run_dir / "config.json") if p.exists()), None)
    saved = json.loads(cfg_file.read_text()) if cfg_file is not None else {}
    if speed is not None:  # the whole training loop's rate (data, Lightning, EMA included), all processes
        trained_gflop = speed[step_key]["gflop_per_step"] * (tr["steps"] - steps_before) * devices
        achieved = trained_gflop / tr["seconds"] if tr["seconds"] > 0 else float("nan")
        speed |= {"training_precision": precision, "training_achieved_gflops": r(achieved, 3),
                  f"training_fraction_of_{trained}_peak": r(achieved / (speed[peak_key]["peak_gflops"] * devices)),
                  "peak_note": f"the {trained} peak is one process's; the fraction divides by it x devices",
                  **({"note": "the achieved rate counts the training step's FLOPs, not the self-forcing "
                      "sampling pass"} if cfg.self_forcing > 0 else {})}
    else:
        speed = {"training_precision": precision, "note": "not measured: an --eval-only rescoring (the training "
                 "run's own scoring has its speed)"}

    # scoring runs in this process alone once the others have left: it gets every core the command was given
    score_threads = args.threads * args.devices
    torch.set_num_threads(score_threads)
    print(f"fitting the baselines (scoring on {score_threads} threads)", flush=True)
    t_eval = time.perf_counter()
    _, val_ds = build_datasets(replace(cfg, data=str(data)), run_dir / "action_stats.json")
    train_eps = np.setdiff1d(np.arange(len(val_ds.source)), val_ds.episodes)
    base = fit_baselines(val_ds.source, train_eps, cfg.frame_interval, max_lag=24)
    print("scoring windows", flush=True)
    n_steps = args.sample_steps or cfg.sample_steps
    smp = {"mode": args.sample_mode, "history_noise": args.history_noise, "eta": args.eta}
    w = score_windows(model, wm.obj, val_ds, base, cfg.n_ctx, n_steps, count=args.eval_windows,
                      noise_seed=args.noise_seed, **smp)
    print("scoring rollouts", flush=True)
    ro = score_rollouts(model, wm.obj, val_ds, base, cfg.n_ctx, n_steps, horizon=24,
                        max_episodes=args.rollout_episodes, keep=args.rollout_keep, seed=args.noise_seed, **smp)
    eval_secs = time.perf_counter() - t_eval

    x, p1, p2, po = w.pop("_first")
    gt, rp, rpo = ro.pop("_first")
    mean_row = base.mean_frame.expand_as(gt[0])
    al = torch.tensor([1.0] * cfg.n_ctx + base.blend_alpha[:gt.shape[1] - cfg.n_ctx]).view(-1, 1, 1, 1)
    blend_row = al * gt[0, :cfg.n_ctx][-1:] + (1 - al) * base.mean_frame
    rows = []
    for i in range(2):
        rows += [(f"win{i} truth", x[i]), (f"win{i} model", p1[i]), (f"win{i} seed 2", p2[i]),
                 (f"win{i} other act", po[i])]
    rows += [("roll truth", gt[0]), ("roll model", rp[0]), ("roll other act", rpo[0]),
             ("copy-last", gt[0, cfg.n_ctx - 1:cfg.n_ctx].expand_as(gt[0])), ("blend", blend_row),
             ("mean frame", mean_row)]
    strip_png(out_dir / "strip.png", rows)
    n_gif = min(3, gt.shape[0])
    gif_bytes = rollout_gif(out_dir / "rollouts.gif", [("truth", gt[:n_gif]), ("model", rp[:n_gif]),
                                                       ("other actions", rpo[:n_gif])]).stat().st_size

    names = ("model", "model_other_actions", "copy_last", "mean_frame", "blend")
    keys = ("psnr", "ssim", "stlpips", "tee_px", "tee_deg", "agent_px", "tee_ink_ratio", "tee_kept", "tee_placed",
            "agent_ink_ratio")
    res = {
        "benchmark": "wm_evidence", "commit": commit, "commit_at_end": git_rev(), "nproc": os.cpu_count(),
        "torch_threads": args.threads, "score_threads": score_threads, "devices": devices, "loadavg_before": r(list(load_before), 2), "loadavg_end": r(list(os.getloadavg()), 2),
        "data": {"dir": str(data), "generated_now": gen is not None, "episodes": len(val_ds.source),
                 "heldout_episodes": len(val_ds.episodes), "heldout_of": args.heldout_of or None, "resolution": 64, "frame_interval": cfg.frame_interval,
                 "pusher": made.get("pusher"), "motion_per_model_frame": motion},
        "model": {"params_M": round(count_parameters(wm.model) / 1e6, 3), "hidden": mcfg.hidden, "depth": mcfg.depth,
                  "patch": mcfg.patch_size, "refiner": mcfg.refiner, "frames": cfg.num_frames, "n_ctx": cfg.n_ctx,
                  "diffusion": asdict(cfg.diffusion), "sample_steps": n_steps, "precision": precision,
                  "sampler": {"mode": args.sample_mode, "rollout_keep": args.rollout_keep,
                              "history_noise": args.history_noise, "eta": args.eta,
                              "noise_seed": args.noise_seed, "guide": args.guide or None,
                              "guidance": args.guidance}},
        "speed": speed,
        "train": {"steps": tr["steps"], "max_steps": max_steps if args.max_steps else None,
                  "budget_minutes": cfg.budget_minutes or None,
                  "batch": per_process * devices, "batch_per_process": per_process, "lr": cfg.lr,
                  "minutes": r(tr["seconds"] / 60, 2), "stopped_by_wall_clock": tr["stopped_by_wall_clock"],
                  "resumed": args.resume, "eval_only": args.eval_only,
                  "compile": cfg.compile, "run_config": {k: saved.get(k) for k in (
                      "diffusion", "branch", "injection", "relative_actions", "action_map", "action_map_sigma", "seed",
                      "split_seed", "self_forcing", "self_forcing_steps",
                      "self_forcing_start")}},
        "blend_alpha_by_lag": r(base.blend_alpha, 3),
        "windows": {"count": w["count"], "n_ctx": w["n_ctx"], "predicted": w["predicted"],
                    "seed_pair_psnr": r(w["seed_pair/psnr"]), "seed_pair_psnr/by_lag": r(w["seed_pair/psnr/by_lag"]),
                    "pose_reader_floor_on_truth": {k: r(w[f"truth/{k}"]) for k in ("agent_px", "tee_px", "tee_deg")},
                    **table(w, names, keys)},
        "rollouts": {"episodes": ro["episodes"], "horizon": ro["horizon"], "n_ctx": ro["n_ctx"], **table(ro, names, keys)},
        "eval_minutes": r(eval_secs / 60, 2), "wall_minutes": r((time.perf_counter() - t_start) / 60, 2),
        "figures": {"strip": "strip.png", "gif": "rollouts.gif", "gif_bytes": gif_bytes},
        "lpips_fvd": {"stlpips": w.get("stlpips_skipped") or "ST-LPIPS (shift-tolerant LPIPS, AlexNet) from the "
                                 "weights the stlpips-pytorch wheel ships: `stlpips` under every predictor, lower is closer",
                      "fvd": "not computed: no I3D weights can be had offline (hubs are unreachable); pass a local "
                             "TorchScript I3D to `ttlab wm eval --metrics.i3d` where one exists"},
    }
    res["targets"] = scorecard_targets(w, ro)
    (out_dir / "wm_evidence.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
