"""NanoWM: an action-conditioned space/time factorised diffusion transformer (DiT with adaLN-Zero).

Blocks alternate: a *spatial* block attends over the patches of one frame (2-D RoPE), a *temporal* block
attends over the frames at one patch position (1-D RoPE, frame-causal). Every frame carries its own
diffusion time (diffusion forcing) and its own action embedding; both modulate the blocks per frame.
Frame-causality holds end to end: the output for frame t depends only on inputs at frames <= t.

The model knows nothing of noise schedules: `forward(x_t, t, actions)` maps noisy frames, a per-frame
time value (any float; the diffusion code passes a timestep in [0, 1000)) and per-frame actions to a
prediction of the same shape as x_t. What that prediction means (v, x, eps, flow) is the caller's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ttlab.worldmodel.model.action_map import check_action_map, render_action_maps
from ttlab.worldmodel.model.injection import ActionEmbedder, BlockInjection, check_injection
from ttlab.worldmodel.model.refiner import Refiner
from ttlab.worldmodel.model.rope import apply_rope, rope_1d, rope_2d


@dataclass
class NanoWMConfig:
    """Shape of a NanoWM denoiser."""

    input_size: int = 32
    """Height = width of the (latent) frames."""
    in_channels: int = 4
    """Channels of the (latent) frames."""
    patch_size: int = 2
    """Square patch side; tokens per frame = (input_size / patch_size)^2."""
    hidden: int = 384
    """Transformer width D."""
    depth: int = 12
    """Number of blocks, spatial and temporal alternating (must be even)."""
    heads: int = 6
    """Attention heads (head dim = hidden / heads, divisible by 4 for 2-D RoPE)."""
    mlp_ratio: float = 4.0
    """SwiGLU hidden width = mlp_ratio * hidden."""
    action_dim: int = 2
    """Width of one frame's action vector (raw action dim x frame_interval)."""
    injection: str = "additive"
    """How actions enter: additive | adaln | adaln_fuse | film | cross_attention."""
    max_frames: int = 64
    """Longest clip the temporal RoPE table covers."""
    causal: bool = True
    """Frame-causal temporal attention."""
    cond_channels: int = 0
    """Channels of a conditioning image concatenated to every frame's input (the last context frame, when the
    diffusion runs on the change from it); the output keeps `in_channels`."""
    null_first_action: bool = True
    """Frame 0's action embedding is exactly zero (the official model's null action: nothing led to the first
    frame of a clip), whatever `actions[:, 0]` holds. False embeds `actions[:, 0]` as given (the data
    pipeline's zeros, i.e. the *mean* action after normalisation: the behaviour before this option)."""
    action_map: str = "none"
    """Also draw the actions into the frame (`action_map.py`): none | gaussian (each of the frame's raw (x, y)
    targets a blob in its own input channel, patch-embedded with the frame). Needs actions that are image
    positions; the global injection stays."""
    action_map_sigma: float = 1.5
    """Width of each blob in pixels."""
    action_pixels: tuple[float, float, float, float] = (1.0, 0.0, 1.0, 0.0)
    """(sx, ox, sy, oy): normalised action (x, y) -> pixel (column x sx + ox, row y sy + oy); see `pixel_affine`."""
    refiner: int = 0
    """Channels of a full-resolution conv refiner after the patch output (`refiner.py`; 0 = none): three 3x3
    convolutions that see the transformer's output, the noisy frame, the conditioning image and the level, and add
    a per-pixel correction (zero at init). A U-Net's full-resolution skip, for detail the patch bottleneck loses."""

    def __post_init__(self) -> None:
        check_injection(self.injection)
        check_action_map(self.action_map, self.action_dim, self.action_map_sigma)
        self.action_pixels = tuple(float(v) for v in self.action_pixels)
        if len(self.action_pixels) != 4:
            raise ValueError(f"action_pixels {self.action_pixels}: expected (sx, ox, sy, oy)")
        if self.depth % 2:
            raise ValueError(f"depth={self.depth}: must be even (spatial and temporal blocks alternate)")
        if self.hidden % self.heads or (self.hidden // self.heads) % 4:
            raise ValueError(f"hidden={self.hidden}, heads={self.heads}: head dim must be a multiple of 4")
        if self.input_size % self.patch_size:
            raise ValueError(f"input_size={self.input_size} is not divisible by patch_size={self.patch_size}")
        if self.refiner < 0:
            raise ValueError(f"refiner={self.refiner}: must be >= 0 (0 = no refiner)")

    @property
    def grid(self) -> int:
        return self.input_size // self.patch_size

    @property
    def tokens_per_frame(self) -> int:
        return self.grid**2

    @property
    def map_channels(self) -> int:
        """Input channels of the action map: one per raw (x, y) point of a frame's action, 0 without a map."""
        return 0 if self.action_map == "none" else self.action_dim // 2


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale) + shift


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w3(F.silu(self.w1(x)) * self.w2(x))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v over (N, h, L, d). On CPU written out as two batched matmuls and a float32
    softmax: PyTorch's CPU flash-attention backward is several times slower at these short sequences (L = 64
    patches or a few frames); elsewhere the fused kernel."""
    if q.device.type != "cpu":
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = (q @ k.transpose(-2, -1)).float() * q.shape[-1] ** -0.5  # (N, h, L, L)
    if causal:
        L = q.shape[-2]
        s = s.masked_fill(torch.ones(L, L, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return s.softmax(-1).to(v.dtype) @ v  # (N, h, L, d)


class Attention(nn.Module):
    """Self-attention over the L axis of x (B, G, L, D), with QK RMSNorm and RoPE."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.q_norm = nn.RMSNorm(dim // heads, eps=1e-6)
        self.k_norm = nn.RMSNorm(dim // heads, eps=1e-6)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], causal: bool) -> torch.Tensor:
        B, G, L, D = x.shape
        qkv = self.qkv(x).reshape(B * G, L, 3, self.heads, D // self.heads)  # (BG, L, 3, h, hd)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (BG, h, L, hd) each
        hd = (D // self.heads,)  # QK RMSNorm in the activations' dtype (bf16 under autocast: the fused kernel)
        q = apply_rope(F.rms_norm(q, hd, self.q_norm.weight.to(q.dtype), self.q_norm.eps), *rope)
        k = apply_rope(F.rms_norm(k, hd, self.k_norm.weight.to(k.dtype), self.k_norm.eps), *rope)
        o = attention(q, k, v, causal)  # (BG, h, L, hd)
        return self.proj(o.transpose(1, 2).reshape(B, G, L, D))  # (B, G, L, D)


class Block(nn.Module):
    """adaLN-Zero transformer block on x (B, G, L, D); attention runs over L within each group G.

    Conditioning c and action a are (B, g, l, D) with g in {1, G}, l in {1, L}: per frame either way.
    """

    def __init__(self, dim: int, heads: int, mlp_ratio: float, injection: str):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = SwiGLU(dim, int(dim * mlp_ratio))
        self.ada = nn.Linear(dim, 6 * dim)
        self.inject = BlockInjection(injection, dim, heads)

    def forward(self, x, c, a, a_tokens, rope, causal: bool) -> torch.Tensor:
        if a is not None:
            x = self.inject.pre(x, a)
        mod = self.ada(F.silu(c))  # (B, g, l, 6D)
        if a is not None:
            mod = self.inject.modulation(mod, a)
        sh1, sc1, g1, sh2, sc2, g2 = mod.chunk(6, dim=-1)  # (B, g, l, D) each
        x = x + g1 * self.attn(modulate(self.norm1(x), sh1, sc1), rope, causal)  # (B, G, L, D)
        if a is not None:
            x = self.inject.after_attention(x, a)
        x = x + g2 * self.mlp(modulate(self.norm2(x), sh2, sc2))
        if a is not None:
            x = self.inject.after_mlp(x, a_tokens, causal)
        return x


class TimestepEmbedder(nn.Module):
    """Scalar time -> sinusoid (256) -> MLP -> (..., D)."""

    def __init__(self, dim: int, freq_dim: int = 256):
        super().__init__()
        self.freq_dim = freq_dim
        self.fc1 = nn.Linear(freq_dim, dim)
        self.fc2 = nn.Linear(dim, dim)

    @staticmethod
    def sinusoid(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
        ang = t.float()[..., None] * freqs  # (..., half)
        return torch.cat([ang.cos(), ang.sin()], dim=-1)  # (..., dim)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        emb = self.sinusoid(t, self.freq_dim).to(self.fc1.weight.dtype)
        return self.fc2(F.silu(self.fc1(emb)))  # (..., D)


class NanoWM(nn.Module):
    """The denoiser: `forward(x_t (B, F, C, H, W), t (B, F), actions (B, F, A)) -> (B, F, C, H, W)`."""

    def __init__(self, cfg: NanoWMConfig):
        super().__init__()
        self.cfg = cfg
        D, p = cfg.hidden, cfg.patch_size
        self.patch = nn.Conv2d(cfg.in_channels + cfg.cond_channels, D, kernel_size=p, stride=p)
        # the action map's own patch embedding, added to the frame's (= extra input channels of one conv)
        self.map_patch = nn.Conv2d(cfg.map_channels, D, kernel_size=p, stride=p) if cfg.map_channels else None
        self.pos_embed = nn.Parameter(torch.zeros(1, 1, cfg.tokens_per_frame, D))
        self.t_embed = TimestepEmbedder(D)
        self.a_embed = ActionEmbedder(cfg.action_dim, D)
        self.blocks = nn.ModuleList(Block(D, cfg.heads, cfg.mlp_ratio, cfg.injection) for _ in range(cfg.depth))
        self.final_norm = nn.LayerNorm(D, elementwise_affine=False, eps=1e-6)
        self.final_ada = nn.Linear(D, 2 * D)
        self.final = nn.Linear(D, p * p * cfg.in_channels)
        self.refine = (Refiner(2 * cfg.in_channels + cfg.cond_channels, cfg.in_channels, cfg.refiner)
                       if cfg.refiner else None)
        hd = D // cfg.heads
        for name, (cos, sin) in (("space", rope_2d(cfg.grid, cfg.grid, hd)), ("time", rope_1d(cfg.max_frames, hd))):
            self.register_buffer(f"{name}_cos", cos, persistent=False)
            self.register_buffer(f"{name}_sin", sin, persistent=False)
        self.init_weights()

    def init_weights(self) -> None:
        """DiT init: xavier linears, N(0, 0.02) embeddings, and explicit zeros on every residual gate path."""
        cfg = self.cfg
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        nn.init.normal_(self.pos_embed, std=0.02)
        w = self.patch.weight.data
        nn.init.xavier_uniform_(w.view(w.shape[0], -1))
        nn.init.zeros_(self.patch.bias)
        if self.map_patch is not None:  # zero: at init the map adds nothing (the action-free model)
            nn.init.zeros_(self.map_patch.weight)
            nn.init.zeros_(self.map_patch.bias)
        nn.init.normal_(self.t_embed.fc1.weight, std=0.02)
        nn.init.normal_(self.t_embed.fc2.weight, std=0.02)
        self.a_embed.init_weights(zero_output=cfg.injection in ("additive", "adaln_fuse"))
        for blk in self.blocks:
            nn.init.zeros_(blk.ada.weight)  # adaLN-Zero: gates start at 0, so each block is the identity
            nn.init.zeros_(blk.ada.bias)
            blk.inject.init_weights()
        for lin in (self.final_ada, self.final):  # output exactly zero at init
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)
        if self.refine is not None:
            self.refine.init_weights()

    def forward(self, x: torch.Tensor, t: torch.Tensor, actions: torch.Tensor,
                cond: torch.Tensor | None = None) -> torch.Tensor:
        B, Fr, C, H, W = x.shape
        cfg, p, g = self.cfg, self.cfg.patch_size, self.cfg.grid
        if (C, H, W) != (cfg.in_channels, cfg.input_size, cfg.input_size):
            raise ValueError(f"NanoWM: frames {(C, H, W)} do not match the config "
                             f"({cfg.in_channels}, {cfg.input_size}, {cfg.input_size})")
        if t.shape != (B, Fr) or actions.shape[:2] != (B, Fr) or actions.shape[-1] != cfg.action_dim:
            raise ValueError(f"NanoWM: t {tuple(t.shape)} must be {(B, Fr)} and actions {tuple(actions.shape)} "
                             f"must be {(B, Fr, cfg.action_dim)}")
        if Fr > cfg.max_frames:
            raise ValueError(f"NanoWM: {Fr} frames exceed max_frames={cfg.max_frames}")
        if (cond is None) != (cfg.cond_channels == 0) or (cond is not None and cond.shape[-3] != cfg.cond_channels):
            raise ValueError(f"NanoWM: cond_channels={cfg.cond_channels} but cond is "
                             f"{None if cond is None else tuple(cond.shape)}")
        dt = self.patch.weight.dtype
        if cond is not None:  # (B, Cc, H, W) or (B, F, Cc, H, W): the same image beside every frame
            cond = cond if cond.ndim == 5 else cond[:, None]
            x = torch.cat([x, cond.to(x.dtype).expand(B, Fr, *cond.shape[2:])], dim=2)  # (B, F, C + Cc, H, W)
        tok = self.patch(x.reshape(B * Fr, x.shape[2], H, W).to(dt))  # (BF, D, g, g)
        if self.map_patch is not None:
            maps = render_action_maps(actions, cfg.action_pixels, H, cfg.action_map_sigma)  # (B, F, K, H, W)
            tok = tok + self.map_patch(maps.reshape(B * Fr, -1, H, W).to(dt))  # (BF, D, g, g)
        h = tok.flatten(2).transpose(1, 2).reshape(B, Fr, g * g, -1) + self.pos_embed  # (B, F, P, D)
        c_time = self.t_embed(t)  # (B, F, D)
        a = self.a_embed(actions.to(dt))  # (B, F, D)
        if cfg.null_first_action:
            a = torch.cat([torch.zeros_like(a[:, :1]), a[:, 1:]], dim=1)  # frame 0: the null action
        c = c_time
        if cfg.injection == "adaln_fuse":
            c, a = c_time + a, None
        c_s, c_t = c[:, :, None], c[:, None]  # spatial (B, F, 1, D); temporal (B, 1, F, D)
        a_s, a_t = (a[:, :, None], a[:, None]) if a is not None else (None, None)
        space = (self.space_cos, self.space_sin)
        time = (self.time_cos[:Fr], self.time_sin[:Fr])
        for i, blk in enumerate(self.blocks):
            if i % 2 == 0:  # spatial: groups = frames, sequence = patches
                h = blk(h, c_s, a_s, a_s, space, causal=False)  # (B, F, P, D)
            else:  # temporal: groups = patches, sequence = frames
                h = h.transpose(1, 2)  # (B, P, F, D)
                h = blk(h, c_t, a_t, a_t, time, causal=cfg.causal)
                h = h.transpose(1, 2)  # (B, F, P, D)
        # the final layer is modulated by the timestep only, in every mode (adaln_fuse included), as officially
        shift, scale = self.final_ada(F.silu(c_time[:, :, None])).chunk(2, dim=-1)  # (B, F, 1, D) each
        out = self.final(modulate(self.final_norm(h), shift, scale))  # (B, F, P, p*p*C)
        out = out.reshape(B, Fr, g, g, p, p, C).permute(0, 1, 6, 2, 4, 3, 5)  # (B, F, C, g, p, g, p)
        out = out.reshape(B, Fr, C, H, W)
        if self.refine is not None:  # x: the noisy frames (+ cond), (B, F, C + Cc, H, W)
            out = out + self.refine(out, x.to(out.dtype), t)
        return out


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def forward_flops(cfg: NanoWMConfig, frames: int, attention: bool = True) -> float:
    """Matmul FLOPs of one forward pass on one clip (2 per multiply-add); training step ~ 3x this.

    Counts every linear layer on every token plus the attention scores and weighted sums; norms,
    activations and the tiny embedders are ignored (< 0.5%).
    """
    D, P, Fr = cfg.hidden, cfg.tokens_per_frame, frames
    N = P * Fr  # tokens in the clip
    mlp = int(D * cfg.mlp_ratio)
    per_token = 4 * D * D + 3 * D * mlp  # qkv + proj + SwiGLU
    extra = {"adaln": 6 * D * D, "film": 2 * D * D, "cross_attention": 2 * D * D}.get(cfg.injection, 0)
    linear = 2 * N * (per_token + extra) * cfg.depth
    attn_s = 2 * 2 * Fr * P * P * D * (cfg.depth // 2)  # QK^T and AV over patches, per frame
    attn_t = 2 * 2 * P * Fr * Fr * D * (cfg.depth // 2)  # over frames, per patch (full; causal masks half)
    head = 2 * N * D * cfg.patch_size**2 * (2 * cfg.in_channels + cfg.cond_channels + cfg.map_channels)
    k = cfg.refiner
    refine = 2 * 9 * Fr * cfg.input_size**2 * k * (2 * cfg.in_channels + cfg.cond_channels + 1 + k + cfg.in_channels)
    return float(linear + head + refine + (attn_s + attn_t if attention else 0))
