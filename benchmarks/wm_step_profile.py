"""Where the world model's evidence training step spends its time, and what the trainer's speed options buy.
Prints ONE JSON line last.

The evidence configuration with the action map (`pusht_cpu`, absolute PD targets, `--action-map gaussian`: batch 16
of 5 frames of 64x64, 128 wide, 6 blocks, bf16 autocast, one thread), on real batches of `--data`:

1. data: the loader's CPU cost per batch of 16 windows, on first reading (episodes decoded from video) and again
   (decoded episodes cached), and the one-time decode cost per episode;
2. the step in arms timed in alternation on the process CPU clock (one thread: what a step costs whatever share of
   a busy machine it gets), each arm its own copy of the same initial weights, each step split into forward+loss,
   backward, grad clip, optimizer and EMA: `eager` (AdamW as a loop of small ops per tensor, the trainer's
   optimizer before `fused_optimizer`), `eager+fused` (AdamW's fused CPU kernel, the trainer's default),
   `compile` (the trainer's `--compile`: the denoiser's forward through torch.compile) and `compile+fused`;
   with `--autotune` also `autotune+fused` (torch.compile mode max-autotune-no-cudagraphs); the bf16 matmul peak
   on the same clock in the same run; share of peak = 3 x forward matmul FLOPs per step / step CPU s / peak;
3. one profiled step of the eager and the compiled arms: share of self time per kind of operation;
4. the Lightning loop: the trainer's own module and `fit` (bf16-mixed, grad clip, EMA, TensorBoard logging) on
   the same batches, CPU seconds per step against the bare step of the same options: what Lightning adds;
5. bf16 matmuls alone at the step's shapes and at wider ones (tokens x D @ D x 4D and back).

    python benchmarks/wm_step_profile.py [--steps 6] [--loop-steps 30] [--no-compile] [--width 128] [--out FILE]

Profiler shares are of the profiler's own (wall) clock: on a busy machine they carry its preemption; the step
times and the split are process CPU seconds.
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.loggers import TensorBoardLogger
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader

from ttlab.common.data import repo_relative
from ttlab.common.result_file import emit_result
from ttlab.worldmodel.data.pusht import generate_pusht
from ttlab.worldmodel.diffusion import Objective
from ttlab.worldmodel.distributed import GlobalBatchSampler, global_draws
from ttlab.worldmodel.model import NanoWM, forward_flops
from ttlab.worldmodel.presets import pusht_cpu
from ttlab.worldmodel.throughput import matmul_peak
from ttlab.worldmodel.train import (
    WorldModelModule,
    build_datasets,
    build_model_config,
    compile_forward,
    dataset_action_pixels,
    make_optimizer,
)

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("forward+loss", "backward", "clip", "optimizer", "ema")
KINDS = {"matmul (mm, linear, conv)": ("aten::mm", "aten::addmm", "aten::mkldnn_convolution",
                                       "aten::convolution_backward", "aten::_mkldnn_convolution"),
         "attention (bmm, softmax)": ("aten::bmm", "aten::_softmax", "aten::_softmax_backward_data",
                                      "aten::masked_fill"),
         "copies and casts": ("aten::copy_", "aten::clone", "aten::cat", "aten::empty_strided", "aten::fill_",
                              "aten::zero_", "aten::_to_copy", "aten::contiguous", "aten::empty"),
         "norms": ("aten::native_layer_norm", "aten::native_layer_norm_backward", "aten::_fused_rms_norm",
                   "aten::_fused_rms_norm_backward", "aten::rsqrt", "aten::mean", "aten::pow"),
         "optimizer and grad clip": ("aten::_fused_adamw_", "aten::addcdiv_", "aten::lerp_", "aten::sqrt",
                                     "aten::linalg_vector_norm", "aten::_foreach_norm", "aten::_foreach_mul_",
                                     "aten::mul_", "aten::div_", "aten::addcmul_", "aten::_foreach_lerp_",
                                     "aten::clamp", "aten::stack")}


def git_rev() -> str:
    run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    return run("rev-parse", "HEAD") + ("-dirty" if run("status", "--porcelain", "--untracked-files=no") else "")


def evidence_config(data: str, width: int):
    """The evidence run's config with the action map (`wm_evidence.py --abs-actions --action-map gaussian`), at
    `width` (0 keeps the preset's 128; other widths keep head width 32)."""
    cfg = replace(pusht_cpu(), data=data, relative_actions=False, action_map="gaussian")
    return replace(cfg, hidden=width, heads=width // 32) if width else cfg


def data_cost(ds, batch: int, seed: int, batches: int) -> dict:
    """CPU seconds per batch: first reading (decoding), and the same batches again (decoded episodes cached)."""
    idx = list(GlobalBatchSampler(len(ds), batch, seed))[:batches * batch]
    per = {}
    for name in ("first_read", "cached"):
        t = []
        for b in range(batches):
            c0 = time.process_time()
            [ds[i] for i in idx[b * batch:(b + 1) * batch]]
            t.append(time.process_time() - c0)
        per[name] = round(sorted(t)[len(t) // 2], 4)
    return {"batch_cpu_s_median": per, "batches": batches}


class Arm:
    """One way of running the trainer's step: its own model (same initial weights), optimizer and EMA copy."""

    def __init__(self, init: NanoWM, cfg, obj: Objective, fused: bool, compiled: bool, mode: str = "default"):
        self.model = copy.deepcopy(init)
        self.ema = copy.deepcopy(init).requires_grad_(False)
        self.net = compile_forward(self.model, 1, mode) if compiled else self.model
        self.opt = make_optimizer(self.model, replace(cfg, fused_optimizer=fused))
        self.cfg, self.obj, self.step_n = cfg, obj, 0
        self.split = {k: [] for k in SECTIONS}
        self.total: list[float] = []

    def step(self, x: torch.Tensor, a: torch.Tensor, record: bool = True) -> None:
        c, n = self.cfg, self.step_n
        t = [time.process_time()]
        draws = global_draws(self.obj, x.shape[0], x.shape[1], tuple(x.shape[2:]), c.seed, n, x.device)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, _ = self.obj.loss(self.net, x, a, draws=draws)
        t.append(time.process_time())
        loss.backward()
        t.append(time.process_time())
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.grad_clip)
        t.append(time.process_time())
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        t.append(time.process_time())
        decay = min(c.ema_decay, (1 + n) / (10 + n))
        torch._foreach_lerp_(list(self.ema.parameters()), [p.detach() for p in self.model.parameters()], 1 - decay)
        t.append(time.process_time())
        self.step_n += 1
        if record:
            for k, t0, t1 in zip(SECTIONS, t, t[1:], strict=False):
                self.split[k].append(t1 - t0)
            self.total.append(t[-1] - t[0])


def median(v: list[float]) -> float:
    return sorted(v)[len(v) // 2]


def op_shares(fn) -> dict:
    """Share of one profiled call's self CPU time per kind of operation, and the top operations."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    ops = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    total = sum(ops.values())
    kinds = {k: sum(ops.get(n, 0.0) for n in names) / total for k, names in KINDS.items()}
    compiled = sum(v for n, v in ops.items() if n.startswith(("Torch-Compiled", "CompiledFunction", "## Call")))
    kinds["compiled kernels (fused elementwise)"] = compiled / total
    kinds["elementwise and the rest"] = 1 - sum(kinds.values())
    top = sorted(ops.items(), key=lambda kv: -kv[1])[:10]
    return {"kinds": {k: round(v, 3) for k, v in kinds.items()}, "top_ops": {n: round(v / total, 3) for n, v in top},
            "profiled_cpu_ms": round(total / 1e3, 1)}


class StepClock(L.Callback):
    """Process CPU seconds from one training batch's start to the next one's (everything Lightning does per step)."""

    def __init__(self):
        self.t: list[float] = []

    def on_train_batch_start(self, trainer, module, batch, idx) -> None:
        self.t.append(time.process_time())


def lightning_loop(cfg, model_cfg, init: NanoWM, batches: list[dict], steps: int, fused: bool, logdir: str) -> dict:
    """The trainer's module under `L.Trainer.fit` (bf16-mixed, grad clip, EMA, TensorBoard) on in-memory batches."""
    module = WorldModelModule(replace(cfg, fused_optimizer=fused), model_cfg)
    module.model.load_state_dict(init.state_dict())
    module.ema.load_state_dict(init.state_dict())
    clock = StepClock()
    loader = DataLoader([batches[i % len(batches)] for i in range(steps + 1)], batch_size=None, shuffle=False)
    trainer = L.Trainer(accelerator="cpu", devices=1, precision="bf16-mixed", max_steps=steps + 1, max_epochs=-1,
                        gradient_clip_val=cfg.grad_clip, logger=TensorBoardLogger(logdir, name="tb", version=""),
                        log_every_n_steps=cfg.log_every, enable_progress_bar=False, enable_checkpointing=False,
                        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0, callbacks=[clock])
    trainer.fit(module, loader)
    per = [b - a for a, b in zip(clock.t[3:], clock.t[4:], strict=False)]  # skip the first steps (warm-up)
    return {"step_cpu_s_median": round(median(per), 4), "steps_timed": len(per)}


def matmul_shapes(peak: float, widths: tuple[int, ...], tokens: int) -> dict:
    """bf16 GFLOP/s of (tokens x D) @ (D x 4D) and (tokens x 4D) @ (4D x D) at each width, as a share of `peak`."""
    out = {}
    for d in widths:
        for m, k, n in ((tokens, d, 4 * d), (tokens, 4 * d, d)):
            a, b = torch.randn(m, k, dtype=torch.bfloat16), torch.randn(k, n, dtype=torch.bfloat16)
            a @ b
            reps = max(2, int(4e9 / (2 * m * k * n)))
            c0 = time.process_time()
            for _ in range(reps):
                a @ b
            g = 2 * m * k * n * reps / (time.process_time() - c0) / 1e9
            out[f"{m}x{k}@{k}x{n}"] = {"gflops": round(g, 1), "share_of_peak": round(g / peak, 3)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data/pusht64_smooth")
    ap.add_argument("--episodes", type=int, default=0, help="generate this many PushT episodes into --data when it "
                    "is missing (0: refuse)")
    ap.add_argument("--steps", type=int, default=6, help="timed steps of each arm (alternating)")
    ap.add_argument("--loop-steps", type=int, default=30, help="steps of each Lightning loop (0 skips it)")
    ap.add_argument("--data-batches", type=int, default=8, help="batches timed for the loader's cost")
    ap.add_argument("--no-compile", action="store_true", help="leave out the compiled arms")
    ap.add_argument("--autotune", action="store_true", help="add an arm compiled with mode "
                    "max-autotune-no-cudagraphs (inductor's own C++ GEMM templates; compiling takes much longer)")
    ap.add_argument("--width", type=int, default=0, help="model width (0 = the evidence configuration's 128)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args()
    if args.width and (args.width < 32 or args.width % 32):
        raise SystemExit(f"wm_step_profile: --width {args.width} must be a positive multiple of 32 (head width 32)")
    if args.steps < 1 or args.loop_steps < 0 or args.data_batches < 1:
        raise SystemExit(f"wm_step_profile: --steps {args.steps} and --data-batches {args.data_batches} must be >= 1, "
                         f"--loop-steps {args.loop_steps} >= 0")
    torch.set_num_threads(1)
    t_start, load_before = time.perf_counter(), os.getloadavg()
    if not (Path(args.data) / "states.pth").exists():
        if args.episodes <= 0:
            raise SystemExit(f"wm_step_profile: --data {args.data} is not a PushT dataset (no states.pth); "
                             "make one with `ttlab wm data pusht` or pass --episodes N")
        generate_pusht(Path(args.data), args.episodes, 64, 150, workers=1, seed=0, show_progress=False)
    cfg = evidence_config(args.data, args.width)
    train_ds, _ = build_datasets(cfg, None)
    model_cfg = build_model_config(cfg, tuple(train_ds[0]["frames"].shape[1:]), train_ds.action_dim,
                                   dataset_action_pixels(cfg, train_ds))
    data = data_cost(train_ds, cfg.batch_size, cfg.seed, args.data_batches)
    loader = DataLoader(train_ds, batch_size=cfg.batch_size, sampler=GlobalBatchSampler(len(train_ds), cfg.batch_size,
                        cfg.seed), drop_last=True)
    batches = [b for b, _ in zip(loader, range(4), strict=False)]
    obj = Objective(cfg.diffusion)
    torch.manual_seed(cfg.seed)
    init = NanoWM(model_cfg)
    arms = {"eager": Arm(init, cfg, obj, False, False), "eager+fused": Arm(init, cfg, obj, True, False)}
    compile_s = {}
    if not args.no_compile:
        arms |= {"compile": Arm(init, cfg, obj, False, True), "compile+fused": Arm(init, cfg, obj, True, True)}
        if args.autotune:
            arms["autotune+fused"] = Arm(init, cfg, obj, True, True, "max-autotune-no-cudagraphs")
    for name, arm in arms.items():  # warm-up (the compiled arms compile here)
        c0, w0 = time.process_time(), time.perf_counter()
        for b in batches[:2]:
            arm.step(b["frames"], b["actions"], record=False)
        compile_s[name] = {"cpu_s": round(time.process_time() - c0, 1), "wall_s": round(time.perf_counter() - w0, 1)}
    for i in range(args.steps):
        for arm in arms.values():
            b = batches[i % len(batches)]
            arm.step(b["frames"], b["actions"])
    peak = matmul_peak(dtype=torch.bfloat16, clock=time.process_time)["peak_gflops"]
    flop = 3 * forward_flops(model_cfg, cfg.num_frames) * cfg.batch_size
    steps = {}
    for name, arm in arms.items():
        s = median(arm.total)
        steps[name] = {"step_cpu_s_median": round(s, 4), "step_cpu_s_all": [round(v, 4) for v in arm.total],
                       "split_cpu_s_median": {k: round(median(v), 4) for k, v in arm.split.items()},
                       "gflops_cpu_clock": round(flop / s / 1e9, 1), "share_of_bf16_peak": round(flop / s / 1e9 / peak, 4),
                       "first_two_steps": compile_s[name]}
    b = batches[0]
    profiles = {name: op_shares(lambda arm=arm: arm.step(b["frames"], b["actions"], record=False))
                for name, arm in arms.items() if name in ("eager", "compile", "autotune+fused")}
    loop = {}
    if args.loop_steps:
        with tempfile.TemporaryDirectory() as tmp:
            for fused in (False, True):
                name = "eager+fused" if fused else "eager"
                loop[name] = lightning_loop(cfg, model_cfg, init, batches, args.loop_steps, fused, tmp)
                loop[name]["bare_step_cpu_s_median"] = steps[name]["step_cpu_s_median"]
                loop[name]["lightning_adds"] = round(loop[name]["step_cpu_s_median"] / steps[name]["step_cpu_s_median"]
                                                     - 1, 3)
    tokens = cfg.batch_size * cfg.num_frames * model_cfg.tokens_per_frame
    res = {"benchmark": "wm_step_profile", "commit": git_rev(), "torch": torch.__version__, "threads": 1,
           "nproc": os.cpu_count(), "data": repo_relative(Path(args.data)),
           "config": {"preset": "pusht_cpu", "actions": "abs", "action_map": "gaussian", "batch": cfg.batch_size,
                      "frames": cfg.num_frames, "hidden": model_cfg.hidden, "depth": model_cfg.depth,
                      "patch": model_cfg.patch_size, "tokens_per_step": tokens, "precision": "bf16 autocast"},
           "gflop_per_step": round(flop / 1e9, 2), "bf16_matmul_peak_gflops_cpu_clock": peak,
           "data_loader": data, "steps": steps, "profile": profiles, "lightning_loop": loop,
           "matmul_alone": matmul_shapes(peak, (128, 256, 512), tokens)}
    res["loadavg_before"] = [round(v, 2) for v in load_before]
    res["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    res["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    res["command"] = "python benchmarks/wm_step_profile.py " + " ".join(sys.argv[1:])
    emit_result(res, args.out)


if __name__ == "__main__":
    main()
