"""NanoWM training and sampling throughput. Prints ONE JSON line last.

Training: the same forward/backward/AdamW step the Lightning module runs (objective.loss, grad clip,
AdamW), without Lightning's loop: samples/s, tokens/s, and model FLOPs utilisation
MFU = 3 x forward matmul FLOPs x samples/s / peak dense FLOP/s.
On CUDA: S/2 and B/2 on random 4x32x32 latents in bf16 autocast (optionally torch.compile), against the
datasheet bf16 peak (H100/H200 SXM: 989 TFLOP/s).
On CPU: the `pusht_cpu` evidence configuration (64x64 pixels, 5 frames) in fp32 and in bf16 autocast (what
the preset trains with), and the tiny preset in fp32, against this CPU's fp32 (and bf16) matmul peak measured
in the same run (the best of square matmuls at --threads threads). `mfu` is against the peak of the step's
own dtype; `mfu_vs_fp32_peak` against the fp32 peak.
Sampling: frames/s of a 1-context / 3-generated window.

    python benchmarks/wm_train.py [--steps 20] [--batch 32] [--threads 2] [--compile]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from ttlab.worldmodel.diffusion import DiffusionConfig, Objective, sample_window
from ttlab.worldmodel.model import NanoWM, count_parameters, forward_flops, size_config
from ttlab.worldmodel.presets import pusht_cpu
from ttlab.worldmodel.throughput import matmul_peak
from ttlab.worldmodel.train import build_model_config

PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def peak_flops() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def bench_train(cfg, dev, batch, steps, frames=4, compile_=False, dtype=torch.bfloat16, diffusion=None, peak=None):
    torch.manual_seed(0)
    model = NanoWM(cfg).to(dev)
    obj = Objective(diffusion or DiffusionConfig(), dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=dev.type == "cuda")
    fwd = torch.compile(model) if compile_ else model
    x = torch.randn(batch, frames, cfg.in_channels, cfg.input_size, cfg.input_size, device=dev)
    a = torch.randn(batch, frames, cfg.action_dim, device=dev)

    def step():
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype != torch.float32):
            loss, _ = obj.loss(fwd, x, a)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3 if not compile_ else 5):
        step()
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(dev)
    secs = time.perf_counter() - t0
    sps = batch * steps / secs
    flops = 3 * forward_flops(cfg, frames)
    peak = peak or peak_flops()
    out = {"params_M": round(count_parameters(model) / 1e6, 2), "batch": batch, "samples_per_s": round(sps, 2),
           "tokens_per_s": round(sps * frames * cfg.tokens_per_frame, 1),
           "step_s": round(secs / steps, 4), "train_tflops_per_s": round(flops * sps / 1e12, 4)}
    if peak:
        out["mfu"] = round(flops * sps / peak, 4)
    return out, model


@torch.no_grad()
def bench_sampling(model, dev, batch=8, frames=4, steps=20, reps=2, diffusion=None):
    cfg = model.cfg
    obj = Objective(diffusion or DiffusionConfig(), dev)
    n_ctx = max(1, (diffusion or DiffusionConfig()).context_frames)
    ctx = torch.randn(batch, n_ctx, cfg.in_channels, cfg.input_size, cfg.input_size, device=dev)
    a = torch.randn(batch, frames, cfg.action_dim, device=dev)
    dt = torch.bfloat16 if dev.type == "cuda" else None
    sample_window(model, obj, ctx, a, frames - n_ctx, 2, autocast_dtype=dt)
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(reps):
        sample_window(model, obj, ctx, a, frames - n_ctx, steps, autocast_dtype=dt)
    sync(dev)
    return round(batch * (frames - n_ctx) * reps / (time.perf_counter() - t0), 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on CPU (peak and training alike)")
    ap.add_argument("--cpu-steps", type=int, default=10, help="timed steps of the CPU evidence configuration")
    ap.add_argument("--out", default="", help="also write the JSON here (e.g. benchmarks/results/wm_train.json)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    import subprocess

    res: dict = {"torch": torch.__version__, "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                                                     text=True).stdout.strip()}
    if torch.cuda.is_available():
        dev = torch.device("cuda")
        torch.backends.cuda.matmul.allow_tf32 = True
        res["device"] = torch.cuda.get_device_name()
        for name in ("S/2", "B/2"):
            cfg = size_config(name, input_size=32, in_channels=4, action_dim=10)
            r, model = bench_train(cfg, dev, args.batch, args.steps, compile_=args.compile)
            r["sampling_frames_per_s"] = bench_sampling(model, dev)
            res[name] = r
            del model
            torch.cuda.empty_cache()
    dev = torch.device("cpu")
    torch.set_num_threads(args.threads)
    res["cpu_threads"] = torch.get_num_threads()
    res["cpu_fp32_matmul"] = matmul_peak()
    res["cpu_bf16_matmul"] = matmul_peak(dtype=torch.bfloat16)
    peak = res["cpu_fp32_matmul"]["peak_gflops"] * 1e9
    tc = pusht_cpu()
    ecfg = build_model_config(tc, (3, 64, 64), 2 * tc.frame_interval)
    for name, dt, pk in (("pusht_cpu_fp32", torch.float32, peak),
                         ("pusht_cpu_bf16", torch.bfloat16, res["cpu_bf16_matmul"]["peak_gflops"] * 1e9)):
        r, model = bench_train(ecfg, dev, tc.batch_size, args.cpu_steps, frames=tc.num_frames, dtype=dt,
                               diffusion=tc.diffusion, peak=pk)
        r["mfu_vs_fp32_peak"] = round(r["train_tflops_per_s"] * 1e12 / peak, 4)
        r["sampling_frames_per_s"] = bench_sampling(model, dev, batch=8, frames=tc.num_frames, steps=tc.sample_steps,
                                                    reps=2, diffusion=tc.diffusion)
        r["model"] = {"hidden": ecfg.hidden, "depth": ecfg.depth, "patch": ecfg.patch_size, "tokens_per_frame":
                      ecfg.tokens_per_frame, "frames": tc.num_frames, "precision": str(dt)}
        res[name] = r
    cfg = size_config("tiny")
    r, model = bench_train(cfg, dev, 8, max(3, args.steps // 4), dtype=torch.float32, peak=peak)
    r["sampling_frames_per_s"] = bench_sampling(model, dev, batch=2, steps=10, reps=1)
    res["tiny_cpu"] = r
    import os

    res["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    res["nproc"] = os.cpu_count()
    res["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    res["config"] = {"frames": 4, "tokens_per_frame_s2_b2": 256, "latent": "4x32x32", "compile": args.compile,
                     "sampling": "CUDA 1 ctx + 3 gen, 20 DDIM steps; pusht_cpu its own context and sampler; tiny 10 steps",
                     "cpu_note": "pusht_cpu: its batch of 5 x 64x64 frames (8x8 patches); mfu is against the peak of the "
                                 "step's own dtype, measured in this run at cpu_threads threads"}
    if args.out:
        from pathlib import Path

        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
