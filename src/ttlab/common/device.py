"""Device choice and seeding."""

from __future__ import annotations

import os
import random

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


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
