"""A small KL autoencoder trained in-project: conv encoder to a Gaussian posterior, conv decoder.

Down/up-samples by 2**len(widths); latents are the posterior mean times `scale`, where `scale` is
1 / std of training latents measured after training (the same role as SD's 0.18215).
Checkpoint: `save_checkpoint` stem with {"config": AEConfig fields, "model": state_dict, "scale"}.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ttlab.common.checkpoint import load_checkpoint, save_checkpoint
from ttlab.worldmodel.codecs.base import Codec


@dataclass
class AEConfig:
    """Shape of the autoencoder."""

    latent_channels: int = 4
    """channels of the latent"""
    widths: tuple[int, ...] = (32, 64)
    """conv widths; each level halves the resolution"""


class ResBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(8, c), nn.Conv2d(c, c, 3, padding=1)
        self.n2, self.c2 = nn.GroupNorm(8, c), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.c1(F.silu(self.n1(x)))
        return x + self.c2(F.silu(self.n2(h)))  # (B, C, H, W)


class KLAutoencoder(Codec):
    name = "kl-ae"

    def __init__(self, cfg: AEConfig | None = None, scale: float = 1.0):
        super().__init__()
        self.cfg = cfg = cfg or AEConfig()
        w = list(cfg.widths)
        enc: list[nn.Module] = [nn.Conv2d(3, w[0], 3, padding=1)]
        cur = w[0]
        for c in w:
            enc += [ResBlock(cur), nn.Conv2d(cur, c, 4, stride=2, padding=1)]  # halves H, W
            cur = c
        enc += [ResBlock(cur), nn.GroupNorm(8, cur), nn.SiLU(), nn.Conv2d(cur, 2 * cfg.latent_channels, 3, padding=1)]
        self.encoder = nn.Sequential(*enc)
        dec: list[nn.Module] = [nn.Conv2d(cfg.latent_channels, cur, 3, padding=1), ResBlock(cur)]
        for c in reversed(w):
            dec += [nn.ConvTranspose2d(cur, c, 4, stride=2, padding=1), ResBlock(c)]  # doubles H, W
            cur = c
        dec += [nn.GroupNorm(8, cur), nn.SiLU(), nn.Conv2d(cur, 3, 3, padding=1)]
        self.decoder = nn.Sequential(*dec)
        self.scale = float(scale)
        self.latent_channels = cfg.latent_channels
        self.downsample = 2 ** len(w)

    def posterior(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, logvar = self.encoder(x).chunk(2, dim=1)  # (B, C', h, w) each
        return mean, logvar.clamp(-30.0, 20.0)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.posterior(x)[0] * self.scale  # (B, C', h, w)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(z / self.scale)  # (B, 3, H, W)

    def loss(self, x: torch.Tensor, kl_weight: float = 1e-6) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Training loss on images x (B, 3, H, W) in [-1, 1]: L1 + MSE reconstruction + kl_weight * KL."""
        mean, logvar = self.posterior(x)
        z = mean + torch.randn_like(mean) * (0.5 * logvar).exp()  # (B, C', h, w)
        rec = self.decoder(z)  # (B, 3, H, W)
        mse = F.mse_loss(rec, x)
        l1 = (rec - x).abs().mean()
        kl = kl_divergence(mean, logvar).mean()
        return l1 + mse + kl_weight * kl, {"loss/mse": mse.detach(), "loss/l1": l1.detach(), "loss/kl": kl.detach()}

    def save(self, stem: str | Path) -> Path:
        return save_checkpoint(stem, {"kind": "ttlab-kl-ae", "config": asdict(self.cfg), "scale": self.scale,
                                      "model": self.state_dict()})

    @classmethod
    def load(cls, stem: str | Path) -> KLAutoencoder:
        state = load_checkpoint(stem)
        if state.get("kind") != "ttlab-kl-ae":
            raise ValueError(f"{stem}: not an in-project autoencoder checkpoint (kind={state.get('kind')!r})")
        cfg = AEConfig(latent_channels=int(state["config"]["latent_channels"]),
                       widths=tuple(int(w) for w in state["config"]["widths"]))
        model = cls(cfg, scale=float(state["scale"]))
        model.load_state_dict(state["model"])
        return model


def kl_divergence(mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mean, exp(logvar)) || N(0, 1)) summed over all but the batch dim -> (B,)."""
    return 0.5 * (mean.pow(2) + logvar.exp() - 1.0 - logvar).flatten(1).sum(1)


def psnr(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PSNR in dB of images in [-1, 1] (peak-to-peak 2), averaged over the batch -> scalar."""
    mse = (x.clamp(-1, 1) - y.clamp(-1, 1)).pow(2).flatten(1).mean(1)  # (B,)
    return (10.0 * torch.log10(4.0 / mse.clamp_min(1e-10))).mean()
