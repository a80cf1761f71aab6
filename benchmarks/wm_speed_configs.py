"""How much of the bf16 matmul peak the world model's training step reaches, by width, and under torch.compile.
Prints ONE JSON line last.

The `pusht_cpu` step (batch 16 of 5 frames of 64x64, 8x8 patches, bf16 autocast, objective.loss + backward + grad
clip + AdamW, one thread) at several widths (`--widths`; the evidence configuration is 128 wide, 6 blocks): a wider
model does more matmul work per elementwise op, so it should reach a larger share of the peak. The widths are timed
in alternation so that they see the same machine load, on the process CPU clock (one thread: what a step costs
whatever share of a busy machine it gets), and the bf16 matmul peak is measured on the same clock in the same run;
share = 3 x forward matmul FLOPs per step / step CPU seconds / peak.

With `--compile`, the evidence configuration's model is also run under `torch.compile` in a child process (inductor,
one compile thread): its compile time (the first step, CPU and wall) and its step time, against the eager step
measured here. The child is killed after `--compile-timeout-min` minutes of wall time, and the JSON says so.

    python benchmarks/wm_speed_configs.py [--widths 128 256 384] [--steps 4] [--compile] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from ttlab.common.result_file import emit_result
from ttlab.worldmodel.diffusion import Objective
from ttlab.worldmodel.model import NanoWM, count_parameters, forward_flops
from ttlab.worldmodel.presets import pusht_cpu
from ttlab.worldmodel.throughput import matmul_peak
from ttlab.worldmodel.train import build_model_config

ROOT = Path(__file__).resolve().parent.parent


def git_rev() -> str:
    run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    return run("rev-parse", "HEAD") + ("-dirty" if run("status", "--porcelain", "--untracked-files=no") else "")


def model_config(width: int, depth: int):
    tc = pusht_cpu()
    heads = max(tc.heads, width // 32)  # head width 32, as the evidence configuration
    return build_model_config(replace(tc, hidden=width, depth=depth, heads=heads), (3, 64, 64), 2 * tc.frame_interval)


def make_step(width: int, depth: int, compile_model: bool = False):
    """The trainer's step on fixed random clips; returns (step, model config, parameter count)."""
    tc = pusht_cpu()
    cfg = model_config(width, depth)
    torch.manual_seed(0)
    model = NanoWM(cfg)
    n_params = count_parameters(model)
    net = torch.compile(model) if compile_model else model
    obj = Objective(tc.diffusion)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.rand(tc.batch_size, tc.num_frames, 3, 64, 64) * 2 - 1  # (B, F, C, H, W)
    a = torch.randn(tc.batch_size, tc.num_frames, cfg.action_dim)  # (B, F, A)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, _ = obj.loss(net, x, a)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, cfg, n_params


def timed(step) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    step()
    return time.process_time() - c0, time.perf_counter() - w0


def compile_child(width: int, depth: int, steps: int) -> None:
    """In a child process: compile time (first step) and compiled step times, one JSON line."""
    import torch._inductor.config as inductor_config  # deferred on purpose: only the compile child needs it

    inductor_config.compile_threads = 1
    torch.set_num_threads(1)
    step, _, _ = make_step(width, depth, compile_model=True)
    first_cpu, first_wall = timed(step)
    step()
    cpu = sorted(timed(step)[0] for _ in range(steps))
    print(json.dumps({"compile_cpu_s": round(first_cpu, 1), "compile_wall_s": round(first_wall, 1),
                      "step_cpu_s_all": [round(v, 4) for v in cpu]}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", type=int, nargs="+", default=[128, 256, 384])
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per width (alternating)")
    ap.add_argument("--compile", action="store_true", help="also time the evidence width under torch.compile")
    ap.add_argument("--compile-timeout-min", type=float, default=8.0)
    ap.add_argument("--out", default="", help="also write the JSON here")
    ap.add_argument("--compile-child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps < 1 or args.depth < 1 or min(args.widths) < 32:
        raise SystemExit(f"wm_speed_configs: need --steps >= 1, --depth >= 1, widths >= 32; got {args.steps}, "
                         f"{args.depth}, {args.widths}")
    if args.compile_child:
        compile_child(args.compile_child, args.depth, args.steps)
        return
    torch.set_num_threads(1)
    t_start, load_before = time.perf_counter(), os.getloadavg()
    tc = pusht_cpu()
    arms = {w: make_step(w, args.depth) for w in args.widths}
    for step, _, _ in arms.values():  # warm up
        step()
        step()
    cpu: dict[int, list[float]] = {w: [] for w in arms}
    for _ in range(args.steps):
        for w, (step, _, _) in arms.items():
            cpu[w].append(timed(step)[0])
    peak = matmul_peak(dtype=torch.bfloat16, clock=time.process_time)["peak_gflops"]
    res: dict = {"benchmark": "wm_speed_configs", "commit": git_rev(), "torch": torch.__version__, "threads": 1,
                 "nproc": os.cpu_count(), "batch": tc.batch_size, "frames": tc.num_frames, "patch": 8,
                 "depth": args.depth, "bf16_matmul_peak_gflops_cpu_clock": peak, "widths": {}}
    for w, (_, cfg, n) in arms.items():
        flop = 3 * forward_flops(cfg, tc.num_frames) * tc.batch_size
        c = sorted(cpu[w])[len(cpu[w]) // 2]
        res["widths"][str(w)] = {"heads": cfg.heads, "params_M": round(n / 1e6, 2), "gflop_per_step": round(flop / 1e9, 1),
                                 "step_cpu_s_median": round(c, 3), "step_cpu_s_all": [round(v, 3) for v in cpu[w]],
                                 "gflops": round(flop / c / 1e9, 1),
                                 "share_of_bf16_peak": round(flop / c / 1e9 / peak, 4)}
    base = res["widths"][str(args.widths[0])]
    for v in res["widths"].values():
        v["step_time_vs_first"] = round(v["step_cpu_s_median"] / base["step_cpu_s_median"], 2)
        v["flop_vs_first"] = round(v["gflop_per_step"] / base["gflop_per_step"], 2)
    if args.compile:
        w0 = args.widths[0]
        cmd = [sys.executable, __file__, "--compile-child", str(w0), "--depth", str(args.depth), "--steps",
               str(args.steps)]
        t0 = time.perf_counter()
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.compile_timeout_min * 60)
            if out.returncode:
                comp = {"status": "failed", "stderr_tail": out.stderr.strip().splitlines()[-3:]}
            else:
                comp = {"status": "ok"} | json.loads(out.stdout.strip().splitlines()[-1])
                c = sorted(comp["step_cpu_s_all"])[len(comp["step_cpu_s_all"]) // 2]
                flop = base["gflop_per_step"]
                comp |= {"width": w0, "step_cpu_s_median": round(c, 3), "gflops": round(flop / c, 1),
                         "share_of_bf16_peak": round(flop / c / peak, 4),
                         "speedup_vs_eager": round(base["step_cpu_s_median"] / c, 2)}
        except subprocess.TimeoutExpired:
            comp = {"status": f"killed after {args.compile_timeout_min:g} min of wall time (still compiling)"}
        comp["wall_s"] = round(time.perf_counter() - t0, 1)
        res["compile"] = comp
    res |= {"loadavg_before": [round(v, 2) for v in load_before], "loadavg_end": [round(v, 2) for v in os.getloadavg()],
            "wall_seconds": round(time.perf_counter() - t_start, 1),
            "command": "python benchmarks/wm_speed_configs.py " + " ".join(sys.argv[1:])}
    emit_result(res, args.out)


if __name__ == "__main__":
    main()
