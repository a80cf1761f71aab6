"""Device choice, whether this CPU has fast bf16 matmuls, torch threads for one phase, and seeding."""

from __future__ import annotations

import contextlib
import functools
import os
import random
import time
import warnings

import numpy as np
import torch


def resolve_device(name: str = "auto") -> torch.device:
    """`auto` -> cuda if available else cpu; `cpu`; `cuda` / `cuda:N` (error if CUDA is absent)."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: CUDA is not available on this machine (use --device cpu or auto)")
        return torch.device(name)
    raise ValueError(f"--device {name!r}: expected auto, cpu, cuda or cuda:N")


@functools.lru_cache(maxsize=1)
def cpu_bf16_speedup(n: int = 256, reps: int = 3) -> float:
    """bf16 / fp32 matmul rate on this CPU at torch's thread count (>1: bf16 is faster), measured once per process
    in well under a second. CPUs with bf16 units (AVX512-BF16, AMX) run bf16 several times faster than fp32;
    AVX2-only CPUs emulate it at around 1/100 of the fp32 rate. Timed on the process CPU clock: on a machine
    busy with other work, wall-clock times of a few milliseconds are mostly time spent descheduled, and once
    made an AVX2 CPU look as if it had bf16 units."""
    def best(dtype: torch.dtype, k: int) -> float:
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        torch.mm(a, b)
        t = float("inf")
        for _ in range(reps):
            t0 = time.process_time()
            for _ in range(k):
                torch.mm(a, b)
            t = min(t, (time.process_time() - t0) / k)
        return t

    t32 = best(torch.float32, 8)
    t16 = best(torch.bfloat16, 1)
    return t32 / max(t16, 1e-12)


def cpu_bf16_ok(what: str) -> bool:
    """Whether bf16 autocast on CPU is worth it here: True where bf16 matmuls are at least as fast as fp32. Where
    they are not, warns once naming `what` falls back to float32, and returns False. `TTLAB_CPU_BF16=1|0`
    overrides the measurement (1: keep bf16 wherever it is asked for; 0: never)."""
    forced = os.environ.get("TTLAB_CPU_BF16", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    speedup = cpu_bf16_speedup()
    if speedup >= 1.0:
        return True
    warnings.warn(f"{what}: this CPU runs bf16 matmuls at {speedup:.2g}x its float32 rate (no bf16 units), so it "
                  "runs in float32 instead (set TTLAB_CPU_BF16=1 to keep bf16)", stacklevel=2)
    return False


@contextlib.contextmanager
def torch_threads(n: int):
    """torch's CPU threads set to `n` inside the block and restored after it (0 or the current count: unchanged)."""
    before = torch.get_num_threads()
    if n <= 0 or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
