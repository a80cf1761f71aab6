"""NanoWM training and sampling throughput. Prints ONE JSON line last.

Training: the same forward/backward/AdamW step the Lightning module runs (objective.loss, grad clip,
fused AdamW), without Lightning's loop, on random 4x32x32 latents (4 frames, 256 tokens per frame with
2x2 patches) in bf16 autocast: samples/s, tokens/s, and model FLOPs utilisation
MFU = 3 x forward matmul FLOPs x samples/s / peak bf16 dense FLOP/s (H100/H200 SXM: 989 TFLOP/s).
On CUDA: S/2 and B/2 (optionally torch.compile); on CPU: the tiny preset on 16x16 pixels, fp32.
Sampling: frames/s of a 1-context / 3-generated window with 20 DDIM steps (full-sequence).

    python benchmarks/wm_train.py [--steps 20] [--batch 32] [--compile]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from ttlab.worldmodel.diffusion import DiffusionConfig, Objective, sample_window
from ttlab.worldmodel.model import NanoWM, count_parameters, forward_flops, size_config

PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def peak_flops() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def bench_train(cfg, dev, batch, steps, frames=4, compile_=False, dtype=torch.bfloat16):
    torch.manual_seed(0)
    model = NanoWM(cfg).to(dev)
    obj = Objective(DiffusionConfig(), dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=dev.type == "cuda")
    fwd = torch.compile(model) if compile_ else model
    x = torch.randn(batch, frames, cfg.in_channels, cfg.input_size, cfg.input_size, device=dev)
    a = torch.randn(batch, frames, cfg.action_dim, device=dev)

    def step():
        with torch.autocast(dev.type, dtype=dtype, enabled=dev.type == "cuda"):
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
    peak = peak_flops()
    out = {"params_M": round(count_parameters(model) / 1e6, 2), "batch": batch, "samples_per_s": round(sps, 2),
           "tokens_per_s": round(sps * frames * cfg.tokens_per_frame, 1),
           "train_tflops_per_s": round(flops * sps / 1e12, 3)}
    if peak:
        out["mfu"] = round(flops * sps / peak, 4)
    return out, model


@torch.no_grad()
def bench_sampling(model, dev, batch=8, frames=4, steps=20, reps=2):
    cfg = model.cfg
    obj = Objective(DiffusionConfig(), dev)
    ctx = torch.randn(batch, 1, cfg.in_channels, cfg.input_size, cfg.input_size, device=dev)
    a = torch.randn(batch, frames, cfg.action_dim, device=dev)
    dt = torch.bfloat16 if dev.type == "cuda" else None
    sample_window(model, obj, ctx, a, frames - 1, 2, autocast_dtype=dt)
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(reps):
        sample_window(model, obj, ctx, a, frames - 1, steps, autocast_dtype=dt)
    sync(dev)
    return round(batch * (frames - 1) * reps / (time.perf_counter() - t0), 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    res: dict = {"torch": torch.__version__}
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
    cfg = size_config("tiny")
    r, model = bench_train(cfg, dev, 8, max(3, args.steps // 4), dtype=torch.float32)
    r["sampling_frames_per_s"] = bench_sampling(model, dev, batch=2, steps=10, reps=1)
    res["tiny_cpu"] = r
    res["config"] = {"frames": 4, "tokens_per_frame_s2_b2": 256, "latent": "4x32x32", "compile": args.compile,
                     "sampling": "1 ctx + 3 gen, 20 DDIM steps (CPU: 10)"}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
