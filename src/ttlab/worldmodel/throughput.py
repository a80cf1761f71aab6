"""How fast this machine multiplies matrices, and what fraction of that a training step reaches.

`matmul_peak` times square matmuls at torch's current thread count (the best over sizes is the peak);
`train_step_rate` times the exact step the Lightning module runs (objective.loss under autocast, backward,
grad clip, AdamW) on random clips of the configured shape. The fraction of peak is
3 x forward matmul FLOPs (`forward_flops`) x clips/s / peak of the step's own dtype.
"""

from __future__ import annotations

import time

import torch

from ttlab.worldmodel.diffusion import Objective
from ttlab.worldmodel.model import NanoWM, NanoWMConfig, forward_flops


def matmul_peak(sizes=(512, 1024, 2048), reps: int = 3, dtype: torch.dtype = torch.float32,
                clock=time.perf_counter) -> dict:
    """Measured dense matmul GFLOP/s at torch's current thread count: the best over `sizes`, and each. `clock`:
    wall time by default; `time.process_time` (one thread) measures what the CPU does when it runs us, on a busy
    machine too."""
    best, per = 0.0, {}
    for n in sizes:
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        torch.mm(a, b)
        k = max(1, int(2e9 / (2 * n**3)))  # ~2 GFLOP per timing
        t = float("inf")
        for _ in range(reps):
            t0 = clock()
            for _ in range(k):
                torch.mm(a, b)
            t = min(t, (clock() - t0) / k)
        per[n] = 2 * n**3 / t
        best = max(best, per[n])
    return {"peak_gflops": round(best / 1e9, 1), "by_size_gflops": {str(n): round(v / 1e9, 1) for n, v in per.items()}}


def train_step_rate(model_cfg: NanoWMConfig, objective: Objective, batch: int, frames: int, steps: int = 5,
                    dtype: torch.dtype = torch.bfloat16, warmup: int = 2, seed: int = 0) -> dict:
    """Seconds per training step (best and median of `steps`) and the matmul GFLOP/s it reaches."""
    torch.manual_seed(seed)
    model = NanoWM(model_cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.rand(batch, frames, model_cfg.in_channels, model_cfg.input_size, model_cfg.input_size) * 2 - 1
    a = torch.randn(batch, frames, model_cfg.action_dim)

    def step() -> None:
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss, _ = objective.loss(model, x, a)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    flops = 3 * forward_flops(model_cfg, frames) * batch
    return {"step_s_best": round(times[0], 4), "step_s_median": round(times[len(times) // 2], 4),
            "gflop_per_step": round(flops / 1e9, 2), "gflops_best": round(flops / times[0] / 1e9, 1),
            "gflops_median": round(flops / times[len(times) // 2] / 1e9, 1)}
