"""Action conditioning: the action MLP and the five ways its embedding enters a transformer block.

The action embedding of frame t comes from the action that *led to* frame t. Here that shift-by-one is
done by the data pipeline (`WindowDataset`: row 0 of a window is zeros, row t the actions between frames
t-1 and t), so the model embeds `actions[:, t]` for frame t as given and never shifts again. The published
code splits the same single shift the other way: its dataset returns unshifted actions and its model
shifts once (frame t gets emb(a_{t-1})) and gives frame 0 a zero embedding -- the *null action*.
`NanoWMConfig.null_first_action` (default on) does the same: frame 0's embedding is exactly zero, not the
embedding of the pipeline's zeros (which, after normalisation, is the mean action).

Modes (`NanoWMConfig.injection`), each applied in every block, spatial and temporal alike:

| mode            | where                                   | extra parameters per block |
|-----------------|-----------------------------------------|----------------------------|
| additive        | `x <- x + a` before the block           | 0                          |
| adaln           | own adaLN MLP, added to the 6 mod terms | 6 D^2                      |
| adaln_fuse      | `c <- c + a` (timestep + action) in the blocks; the final layer sees the timestep only | 0 |
| film            | `x <- (1 + g) x + b` after attention    | 2 D^2                      |
| cross_attention | gated cross-attention to action tokens  | 4 D^2                      |

Every added path starts at exactly zero, so at init the model is the action-free adaLN-Zero DiT, and
exactly ONE factor of each path is zeroed so that it still gets a gradient: for additive / adaln_fuse the
action MLP's last layer; for adaln / film / cross_attention the injection's own output layer, with the
action MLP left at its normal init.

The published code differs at init: its `ActionEmbedder` zeroes its last layer, but the model's
`initialize_weights` then re-initialises every linear layer (xavier) and does not zero it again, so the
action MLP starts non-zero in every mode. Its adaLN and FiLM arms (zeroed output layer, non-zero action
embedding) therefore learn from the action. Its cross-attention arm zeroes both the output projection and
a per-channel gate multiplying it: each gets a zero gradient while the other is zero, so that arm never
learns to use the action. Here cross-attention has no gate; only its output projection starts at zero.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

INJECTIONS = ("additive", "adaln", "adaln_fuse", "film", "cross_attention")


def check_injection(name: str) -> str:
    if name not in INJECTIONS:
        raise ValueError(f"injection {name!r}: expected one of {', '.join(INJECTIONS)}")
    return name


class ActionEmbedder(nn.Module):
    """(B, F, A) normalised actions -> (B, F, D); last layer zero-initialised."""

    def __init__(self, action_dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(action_dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)

    def init_weights(self, zero_output: bool) -> None:
        nn.init.xavier_uniform_(self.fc1.weight)
        nn.init.zeros_(self.fc1.bias)
        nn.init.zeros_(self.fc2.bias)
        if zero_output:
            nn.init.zeros_(self.fc2.weight)
        else:
            nn.init.xavier_uniform_(self.fc2.weight)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.silu(self.fc1(a)))  # (B, F, D)


class CrossAttention(nn.Module):
    """Queries from tokens x (B, G, L, D); keys/values from action tokens ctx (B, g, M, D), g in {1, G}."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor, causal: bool) -> torch.Tensor:
        B, G, L, D = x.shape
        M, h = ctx.shape[2], self.heads
        q = self.q(self.norm(x)).reshape(B * G, L, h, D // h).transpose(1, 2)  # (BG, h, L, hd)
        kv = self.kv(ctx).expand(B, G, M, 2 * D)  # (B, G, M, 2D): K/V computed once per group g
        k, v = kv.reshape(B * G, M, 2, h, D // h).permute(2, 0, 3, 1, 4).unbind(0)  # (BG, h, M, hd) each
        if causal and L != M:
            raise ValueError(f"causal cross-attention needs one action token per frame (L={L}, M={M})")
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # (BG, h, L, hd)
        return self.proj(o.transpose(1, 2).reshape(B, G, L, D))  # (B, G, L, D)


class BlockInjection(nn.Module):
    """The per-block part of one injection mode; a no-op module for additive / adaln_fuse."""

    def __init__(self, mode: str, dim: int, heads: int):
        super().__init__()
        self.mode = check_injection(mode)
        if mode == "adaln":
            self.mod = nn.Linear(dim, 6 * dim)
        elif mode == "film":
            self.mod = nn.Linear(dim, 2 * dim)
        elif mode == "cross_attention":
            self.cross = CrossAttention(dim, heads)

    def init_weights(self) -> None:
        if self.mode in ("adaln", "film"):
            nn.init.zeros_(self.mod.weight)
            nn.init.zeros_(self.mod.bias)
        elif self.mode == "cross_attention":
            nn.init.zeros_(self.cross.proj.weight)
            nn.init.zeros_(self.cross.proj.bias)

    def pre(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return x + a if self.mode == "additive" else x

    def modulation(self, mod: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """adaln: add the action's 6 modulation terms to the timestep's (B, g, l, 6D)."""
        return mod + self.mod(F.silu(a)) if self.mode == "adaln" else mod

    def after_attention(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        if self.mode != "film":
            return x
        gamma, beta = self.mod(F.silu(a)).chunk(2, dim=-1)  # (B, g, l, D) each
        return x * (1 + gamma) + beta

    def after_mlp(self, x: torch.Tensor, a: torch.Tensor, causal: bool) -> torch.Tensor:
        if self.mode != "cross_attention":
            return x
        return x + self.cross(x, a, causal)  # a: (B, g, M, D) action tokens
