"""Counter-based random numbers: the same draws on CPU and CUDA, per env, with no generator state.

Every per-episode draw (scene index, reward-conditioning weights, hidden true goal, partner style) is
a pure function of (seed, env id, episode counter, stream id, agent slot), so an env's sequence of
scenes does not depend on what the other envs did, and CPU and CUDA give bit-identical draws.
The hash keeps every intermediate below 2**63 (32-bit words times 31-bit constants) so int64 tensor
arithmetic never overflows on either device.
"""

from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF
_C1 = 0x7FEB352D
_C2 = 0x2C1B3C6D
_GOLDEN = 0x1E3779B9


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit avalanche hash of int64 tensors holding values in [0, 2**32)."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = (x * _C1) & _MASK32
    x = x ^ (x >> 15)
    x = (x * _C2) & _MASK32
    x = x ^ (x >> 16)
    return x


def hash_keys(*keys: torch.Tensor | int) -> torch.Tensor:
    """Hash a sequence of broadcastable int64 tensors / ints into uint32 values held in int64."""
    if not keys or not isinstance(keys[0], torch.Tensor):
        raise TypeError("hash_keys: the first key must be a tensor (it fixes the device)")
    h = mix32(keys[0].long() + _GOLDEN)
    for k in keys[1:]:
        k = k.long() & _MASK32 if isinstance(k, torch.Tensor) else (int(k) & _MASK32)
        h = mix32((h ^ k) + _GOLDEN + ((h << 6) & _MASK32) + (h >> 2))
    return h


def uniform(*keys: torch.Tensor | int) -> torch.Tensor:
    """Uniform float32 in [0, 1) from the hashed keys (24 bits of mantissa)."""
    return (hash_keys(*keys) >> 8).float() * (1.0 / (1 << 24))


def randint(high: torch.Tensor | int, *keys: torch.Tensor | int) -> torch.Tensor:
    """Integers in [0, high) (high >= 1, tensor or int) from the hashed keys."""
    return hash_keys(*keys) % high
