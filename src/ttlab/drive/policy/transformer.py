"""Causal transformer policy with a real, preallocated KV cache.

One token per agent per step: token = encoder(obs) + sinusoid(position within the episode).

Stepping (`forward_eval`): each agent owns a ring of `horizon` slots per layer (horizon = K x
trial_length: one whole episode). A step writes the agent's new key/value at slot `pos % horizon` and
attends (SDPA) over the slots that are valid, plus its own. On `terminals` (the observation starts a
new episode) the agent's slots are invalidated and its position reset to 0; truncations (trial ends)
change nothing here, so the cache is kept across trials: this is what lets the agent adapt. A slot
written while the agent is `removed` is marked invalid right after its own step, so no later query
reads limbo. Resets are per agent (`reset_agents`).

Training (`forward`): the same computation over a (B, T) sequence at once. Query i may read key j iff
j <= i, j is in the same episode (no `terminals` in (j, i]), i - j < horizon, and j is not removed or
j == i (a query always sees itself, so no row is all-masked). `forward(...)` equals step-by-step
`forward_eval` (tested to 1e-5 at fp32 on rows with several episodes and limbo slots).

Exact context in training: a buffer row is the agent's last `context_len = horizon - 1` steps of the
previous rollout (context only, no loss) followed by the T new steps. At the start of each rollout the
cache is rebuilt from that prefix with the current weights (`forward(..., return_state=True)` builds
the ring from the prefix's keys and values), so an episode that crosses a row boundary is seen by the
rollout and by training through the same tokens and the same weights.

Memory (`forward(..., memory=(k, v))`): training may take the prefix's per-layer keys/values as given
(from `prefill`, or as the rollout recorded them) and run only the T new tokens, with no gradient into
the prefix (Transformer-XL's memory); with the weights that made the memory it is the same function
(tested). See `PPOConfig.context`.

Skipping what no loss reads (CPU): training and the prefill pass `needed`, the tokens whose outputs are
used plus everything they attend to (`ppo.loss_context`); `forward` packs those to the front of each row
and runs on them only. Earlier episodes in the prefix and limbo steps are never attended, so this changes
no used output or gradient (tested); it only stops paying for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ttlab.drive.policy.dist import head_size
from ttlab.drive.policy.encoders import ObsEncoder, ObsLayout
from ttlab.drive.policy.task_head import TaskHead


def sinusoid(pos: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal encoding (..., dim) of integer positions `pos` (...)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=pos.device, dtype=torch.float32) / half)
    ang = pos.to(torch.float32).unsqueeze(-1) * freqs  # (..., half)
    out = torch.cat([ang.sin(), ang.cos()], dim=-1)  # (..., 2*half)
    if dim % 2:
        out = F.pad(out, (0, 1))
    return out


@dataclass
class KVCache:
    """Per-agent ring cache: k, v (L, N, H, S, dh); valid (N, S) bool; pos (N,) long = next position."""

    k: torch.Tensor
    v: torch.Tensor
    valid: torch.Tensor
    pos: torch.Tensor

    def reset_agents(self, mask: torch.Tensor) -> None:
        """Forget everything for agents where `mask` (N,) is True (in place)."""
        self.valid &= ~mask.unsqueeze(-1)
        self.pos.masked_fill_(mask, 0)


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def qkv_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(..., d) -> q, k, v each (..., H, dh)."""
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        shape = (*x.shape[:-1], self.heads, x.shape[-1] // self.heads)
        return q.reshape(shape), k.reshape(shape), v.reshape(shape)

    def finish(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        x = x + self.proj(attn)
        return x + self.mlp(self.ln2(x))


class TransformerPolicy(nn.Module):
    memoryless = False

    def __init__(self, layout: ObsLayout, num_actions: int, continuous: bool = False, embed: int = 64,
                 d_model: int = 128, n_layers: int = 2, n_heads: int = 4, horizon: int = 182, task_classes: int = 0,
                 partner_encoder: str = "linear"):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        if horizon < 1:
            raise ValueError(f"horizon={horizon} must be >= 1 (K x trial_length)")
        self.num_actions, self.continuous = num_actions, continuous
        self.d, self.n_layers, self.n_heads, self.horizon = d_model, n_layers, n_heads, horizon
        self.context_len = horizon - 1
        self.encoder = ObsEncoder(layout, embed, d_model, partner_encoder)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.actor = nn.Linear(d_model, head_size(num_actions, continuous))
        self.critic = nn.Linear(d_model, 1)
        nn.init.orthogonal_(self.actor.weight, 0.01)
        nn.init.zeros_(self.actor.bias)
        self.task_head = TaskHead(d_model, task_classes)

    def initial_state(self, n: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> KVCache:
        dh = self.d // self.n_heads
        shape = (self.n_layers, n, self.n_heads, self.horizon, dh)
        return KVCache(
            k=torch.zeros(shape, device=device, dtype=dtype),
            v=torch.zeros(shape, device=device, dtype=dtype),
            valid=torch.zeros(n, self.horizon, dtype=torch.bool, device=device),
            pos=torch.zeros(n, dtype=torch.long, device=device),
        )

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.ln_f(x)
        self.task_head.read(x)
        return self.actor(x), self.critic(x).squeeze(-1)

    # ---- stepping -------------------------------------------------------------------------------
    def forward_eval(self, obs: torch.Tensor, state: KVCache, terminals: torch.Tensor, removed: torch.Tensor,
                     active: torch.Tensor | None = None):
        """obs (N, D), terminals/removed (N,) bool -> logits (N, P), value (N,), the same (mutated) cache.

        `active` (N,) bool: compute only these agents (a host sync: CPU); the others get zero logits and
        value and their step is kept out of the cache, exactly as a removed step (the rollout passes the
        learner's agents in play: nothing reads the rest)."""
        n, S = obs.shape[0], self.horizon
        state.reset_agents(terminals.bool())
        here_all = torch.arange(S, device=obs.device).unsqueeze(0) == (state.pos % S).unsqueeze(1)  # (N, S)
        keep = ~removed.bool() if active is None else ~removed.bool() & active.bool()  # (N,) step enters the cache
        rows = torch.arange(n, device=obs.device) if active is None else active.nonzero().squeeze(1)  # (n,)
        m = rows.shape[0]
        slot = state.pos[rows] % S  # (n,)
        here = here_all if active is None else here_all[rows]  # (n, S)
        valid = state.valid if active is None else state.valid[rows]
        mask = ((valid & ~here) | here)[:, None, None, :]  # (n, 1, 1, S): the slot about to be overwritten is stale
        x = self.encoder(obs if active is None else obs[rows]) + sinusoid(state.pos[rows], self.d).to(obs.dtype)  # (n, d)
        for layer, blk in enumerate(self.blocks):
            q, k, v = blk.qkv_heads(x)  # (n, H, dh)
            state.k[layer, rows, :, slot] = k.to(state.k.dtype)
            state.v[layer, rows, :, slot] = v.to(state.v.dtype)
            ks = state.k[layer] if active is None else state.k[layer, rows]  # (n, H, S, dh)
            vs = state.v[layer] if active is None else state.v[layer, rows]
            a = F.scaled_dot_product_attention(q.unsqueeze(2), ks.to(q.dtype), vs.to(q.dtype), attn_mask=mask)  # (n, H, 1, dh)
            x = blk.finish(x, a.reshape(m, self.d))
        state.valid.copy_(torch.where(here_all, keep.unsqueeze(1), state.valid & ~here_all))
        state.pos += 1
        logits, value = self._heads(x)
        if active is not None:
            logits = logits.new_zeros(n, logits.shape[1]).index_copy(0, rows, logits)  # (N, P)
            value = value.new_zeros(n).index_copy(0, rows, value)  # (N,)
        return logits, value, state

    # ---- training -------------------------------------------------------------------------------
    @staticmethod
    def positions(terminals: torch.Tensor, pos0: torch.Tensor | None) -> torch.Tensor:
        """Position within the episode of every token (B, T); `pos0` (B,) = position of token 0."""
        B, T = terminals.shape
        t = torch.arange(T, device=terminals.device).expand(B, T)  # (B, T)
        last_start = torch.where(terminals.bool(), t, torch.full_like(t, -1)).cummax(dim=1).values  # (B, T)
        base = pos0.unsqueeze(1) + t if pos0 is not None else t
        return torch.where(last_start >= 0, t - last_start, base)  # (B, T)

    def attention_mask(self, terminals: torch.Tensor, removed: torch.Tensor) -> torch.Tensor:
        """(B, 1, T, T) bool: query i may read key j."""
        B, T = terminals.shape
        ep = terminals.long().cumsum(dim=1)  # (B, T) episode index within the row
        i = torch.arange(T, device=terminals.device)
        causal = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.horizon)  # (T, T)
        same = ep.unsqueeze(2) == ep.unsqueeze(1)  # (B, T, T)
        source = (~removed.bool()).unsqueeze(1) | torch.eye(T, dtype=torch.bool, device=terminals.device)  # (B, T, T)
        return (causal & same & source).unsqueeze(1)

    def forward(self, obs: torch.Tensor, terminals: torch.Tensor, removed: torch.Tensor, state=None,
                pos0: torch.Tensor | None = None, return_state: bool = False, needed: torch.Tensor | None = None,
                memory: tuple[torch.Tensor, torch.Tensor] | None = None):
        """obs (B, T - M, D), terminals/removed (B, T) -> logits (B, T - M, P), values (B, T - M), cache or None.

        `terminals[:, t]` means obs[:, t] starts a new episode. With `return_state`, also builds the
        KV cache a stepping agent would hold after the last token (used to prefill each rollout).
        `needed` (B, T - M) bool: the tokens whose outputs (or cached keys/values) the caller uses, closed
        under attention (every token a needed one may read is needed; see `ppo.loss_context`). Only those
        are computed, packed in order to the front of each row (a data-dependent width, so a host sync:
        callers pass it on CPU only); the outputs at the other tokens are unspecified.
        `memory` = (k, v), each (L, B, H, M, dh): the keys and values of the row's first M tokens, given
        (e.g. from `prefill`) instead of computed; `obs` then holds tokens M.. only, while
        `terminals`, `removed` and `pos0` still describe the whole row. No gradient reaches the memory
        (Transformer-XL's stop-gradient memory). With the weights that produced the memory this is the
        same function as the full forward (tested). M = 0 without memory.
        """
        if return_state and memory is not None:
            raise ValueError("return_state with memory is not supported: prefill from the whole row")
        logits, values, ks, vs, pos = self._run(obs, terminals, removed, pos0, needed, memory, return_state)
        cache = self._ring_from_sequence(ks, vs, pos, terminals, removed) if return_state else None
        return logits, values, cache

    @torch.no_grad()
    def prefill(self, obs: torch.Tensor, terminals: torch.Tensor, removed: torch.Tensor, pos0: torch.Tensor | None = None,
                needed: torch.Tensor | None = None) -> tuple[KVCache, tuple[torch.Tensor, torch.Tensor]]:
        """The ring cache after the row (as `forward(..., return_state=True)`) and the row's keys and values
        (k, v) each (L, B, H, T, dh) (zeros at tokens `needed` skips), to pass as `memory` in training."""
        _, _, ks, vs, pos = self._run(obs, terminals, removed, pos0, needed, None, True, kv_only=True)
        return self._ring_from_sequence(ks, vs, pos, terminals, removed), (torch.stack(ks), torch.stack(vs))

    def _run(self, obs, terminals, removed, pos0, needed, memory, keep_kv: bool, kv_only: bool = False):
        """The shared body of `forward` and `prefill`: logits, values, per-layer k and v (B, H, T-M, dh) when
        `keep_kv`, and the positions (B, T). `kv_only`: stop after the last layer's keys and values (the
        prefill needs nothing else); logits and values are then None."""
        B, T = terminals.shape
        M = 0 if memory is None else memory[0].shape[3]
        if obs.shape[1] != T - M:
            raise ValueError(f"obs covers {obs.shape[1]} tokens; terminals cover {T} with {M} in memory")
        pos = self.positions(terminals, pos0)  # (B, T)
        mask = self.attention_mask(terminals, removed)[:, :, M:]  # (B, 1, T-M, T)
        cols, W, pos_in = None, T - M, pos[:, M:]
        if needed is not None:
            W = max(1, int(needed.sum(dim=1).amax()))
            cols = torch.argsort((~needed).to(torch.uint8), dim=1, stable=True)[:, :W]  # (B, W) needed first
            obs = obs.gather(1, cols.unsqueeze(-1).expand(B, W, obs.shape[-1]))  # (B, W, D)
            needed = needed.gather(1, cols)  # (B, W)
            pos_in = pos_in.gather(1, cols)  # (B, W)
            mask = mask.gather(2, cols[:, None, :, None].expand(B, 1, W, T))  # (B, 1, W, T)
            new_keys = mask[..., M:].gather(3, cols[:, None, None, :].expand(B, 1, W, W))  # (B, 1, W, W)
            mask = torch.cat([mask[..., :M], new_keys], dim=3)  # (B, 1, W, M+W)
        x = self.encoder(obs, needed) + sinusoid(pos_in, self.d).to(obs.dtype)  # (B, W, d)
        ks, vs = [], []
        for layer, blk in enumerate(self.blocks):
            q, k, v = (z.transpose(1, 2) for z in blk.qkv_heads(x))  # (B, H, W, dh)
            if keep_kv:
                ks.append(k)
                vs.append(v)
            if kv_only and layer == self.n_layers - 1:
                break
            if memory is not None:
                k = torch.cat([memory[0][layer].detach().to(k.dtype), k], dim=2)  # (B, H, M+W, dh)
                v = torch.cat([memory[1][layer].detach().to(v.dtype), v], dim=2)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, W, dh)
            x = blk.finish(x, a.transpose(1, 2).reshape(B, W, self.d))
        if cols is not None:  # back to the row's columns
            if not kv_only:
                x = x.new_zeros(B, T - M, self.d).scatter(1, cols.unsqueeze(-1).expand(B, W, self.d), x)  # (B, T-M, d)
            dh = self.d // self.n_heads
            idx = cols[:, None, :, None].expand(B, self.n_heads, W, dh)
            ks = [k.new_zeros(B, self.n_heads, T - M, dh).scatter(2, idx, k) for k in ks]  # (B, H, T-M, dh)
            vs = [v.new_zeros(B, self.n_heads, T - M, dh).scatter(2, idx, v) for v in vs]
        if kv_only:
            return None, None, ks, vs, pos
        logits, values = self._heads(x)
        return logits, values, ks, vs, pos

    def _ring_from_sequence(self, ks, vs, pos, terminals, removed) -> KVCache:
        """The ring cache after stepping through the sequence: slot j holds the latest token of the
        current episode whose position is j mod S (gather, no loop)."""
        B, T = pos.shape
        S = self.horizon
        pos_last = pos[:, -1]  # (B,)
        j = torch.arange(S, device=pos.device)
        back = (pos_last.unsqueeze(1) - j) % S  # (B, S) steps back from the last token
        idx = (T - 1) - back  # (B, S) token index in the row
        ep = terminals.long().cumsum(dim=1)  # (B, T)
        safe = idx.clamp(min=0)
        valid = (idx >= 0) & (back <= pos_last.unsqueeze(1))
        valid &= ep.gather(1, safe) == ep[:, -1:]
        valid &= ~removed.bool().gather(1, safe)
        gidx = safe[:, None, :, None].expand(B, self.n_heads, S, self.d // self.n_heads)  # (B, H, S, dh)
        k = torch.stack([kk.gather(2, gidx) for kk in ks])  # (L, B, H, S, dh)
        v = torch.stack([vv.gather(2, gidx) for vv in vs])  # (L, B, H, S, dh)
        return KVCache(k=k.contiguous(), v=v.contiguous(), valid=valid, pos=pos_last + 1)
