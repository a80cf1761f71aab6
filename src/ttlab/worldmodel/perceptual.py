"""ST-LPIPS: a perceptual distance whose network ships inside a PyPI wheel, so it runs offline.

LPIPS (Zhang et al. 2018) compares two images through a pretrained CNN's unit-normalised features, weighted per
channel by learned linear layers. The `lpips` wheel carries only those linear layers and fetches the backbone from
a hub. Shift-tolerant LPIPS (Ghildyal and Liu, ECCV 2022) is LPIPS retrained with an anti-aliased AlexNet
(stride-1 first convolution, then blur-pool downsampling with reflection padding) so that it does not jump when
an image moves by a pixel or two, and the `stlpips-pytorch` wheel carries the whole network: backbone, linear
layers and input scaling, 9.9 MB for AlexNet (`weights/vST0.0/alex_shift_tolerant.pth`).

The package itself imports torchvision, IPython and torchsummary at import time, so it is never imported here: the weight file
is found with `importlib.util.find_spec` and loaded into the small re-implementation below (a test checks it
against the package's own forward where that can be run). Frames are (N, 3, H, W) in [-1, 1]; 64 x 64 works.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

PACKAGE = "stlpips_pytorch"
WEIGHTS = "weights/vST0.0/alex_shift_tolerant.pth"
CHANNELS = (64, 192, 384, 256, 256)
"""AlexNet's five feature taps (after each ReLU), as LPIPS reads them."""
MIN_SIZE = 21
"""The smallest frame side the network takes (its reflection pads need larger maps below that)."""


def weights_path() -> Path | None:
    """The ST-LPIPS AlexNet weight file inside the installed `stlpips-pytorch` wheel, or None (not installed)."""
    spec = importlib.util.find_spec(PACKAGE)  # finds without importing (its __init__ needs torchvision)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / WEIGHTS
    return path if path.is_file() else None


class BlurPool(nn.Module):
    """Anti-aliased downsampling (Zhang 2019): reflection-pad by 2, a fixed [1 2 1]^T [1 2 1] / 16 blur per
    channel, stride 2. (N, C, H, W) -> (N, C, (H + 1) // 2 + 1, ...)."""

    def __init__(self, channels: int):
        super().__init__()
        a = torch.tensor([1.0, 2.0, 1.0])
        k = a[:, None] * a[None, :]
        self.register_buffer("filt", (k / k.sum())[None, None].repeat(channels, 1, 1, 1))  # (C, 1, 3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(F.pad(x, (2, 2, 2, 2), mode="reflect"), self.filt, stride=2, groups=x.shape[1])


class STLPIPS(nn.Module):
    """ST-LPIPS with the shift-tolerant AlexNet. `features(x)` -> five unit-normalised feature maps;
    `distance(fa, fb)` -> (N,); calling the module on two frame batches does both."""

    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.zeros(1, 3, 1, 1))
        self.register_buffer("scale", torch.ones(1, 3, 1, 1))
        c = CHANNELS
        self.conv = nn.ModuleList([nn.Conv2d(3, c[0], 11, padding=2), nn.Conv2d(c[0], c[1], 5, padding=2),
                                   nn.Conv2d(c[1], c[2], 3, padding=1), nn.Conv2d(c[2], c[3], 3, padding=1),
                                   nn.Conv2d(c[3], c[4], 3, padding=1)])
        self.blur = nn.ModuleList([BlurPool(c[0]), BlurPool(c[0]), BlurPool(c[1])])
        self.lin = nn.ModuleList([nn.Conv2d(ch, 1, 1, bias=False) for ch in c])

    @classmethod
    def from_file(cls, path: str | Path) -> STLPIPS:
        """Load the package's state dict (its module names mapped onto these)."""
        sd = torch.load(str(path), map_location="cpu", weights_only=True)
        names = {"scaling_layer.shift": "shift", "scaling_layer.scale": "scale",
                 "net.slice1.0": "conv.0", "net.slice2.5": "conv.1", "net.slice3.9": "conv.2",
                 "net.slice4.11": "conv.3", "net.slice5.13": "conv.4",
                 "net.slice1.1.filt": "blur.0.filt", "net.slice2.4.filt": "blur.1.filt", "net.slice3.8.filt": "blur.2.filt",
                 **{f"lin{i}.model.1": f"lin.{i}" for i in range(5)}}
        out = {}
        for k, v in sd.items():
            src = next((s for s in sorted(names, key=len, reverse=True) if k == s or k.startswith(s + ".")), None)
            if src is None:
                raise ValueError(f"ST-LPIPS weights {path}: unexpected tensor {k!r}")
            out[names[src] + k[len(src):]] = v
        m = cls()
        m.load_state_dict(out, strict=True)
        return m.eval().requires_grad_(False)

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """(N, 3, H, W) in [-1, 1] -> the five taps, each (N, C_k, h_k, w_k), unit length over channels."""
        h = (x.to(self.shift.device, torch.float32) - self.shift) / self.scale
        h = F.relu(self.blur[0](self.conv[0](h)))  # tap 1: conv (stride 1), blur-pool, ReLU
        taps = [h]
        h = F.relu(self.conv[1](self.blur[1](F.max_pool2d(h, 3, stride=1))))
        taps.append(h)
        h = F.relu(self.conv[2](self.blur[2](F.max_pool2d(h, 3, stride=1))))
        taps.append(h)
        h = F.relu(self.conv[3](h))
        taps.append(h)
        h = F.relu(self.conv[4](h))
        taps.append(h)
        return [t / (t.pow(2).sum(1, keepdim=True).sqrt() + 1e-10) for t in taps]

    def distance(self, fa: list[torch.Tensor], fb: list[torch.Tensor]) -> torch.Tensor:
        """Sum over taps of the spatial mean of the linearly weighted squared feature difference. (N,)."""
        return sum(lin((a - b).pow(2)).mean(dim=(1, 2, 3)) for lin, a, b in zip(self.lin, fa, fb, strict=True))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.distance(self.features(x), self.features(y))


_CACHE: dict[str, STLPIPS | None] = {}


def load() -> STLPIPS | None:
    """The ST-LPIPS network from the installed wheel (loaded once per process), or None when it is not installed."""
    if "net" not in _CACHE:
        path = weights_path()
        _CACHE["net"] = STLPIPS.from_file(path) if path is not None else None
    return _CACHE["net"]


def skipped_reason(size: int = MIN_SIZE, channels: int = 3) -> str | None:
    """Why ST-LPIPS is absent from a scorecard of frames with `channels` channels whose smaller side is `size`,
    or None when it is there."""
    if weights_path() is None:
        return "pip install stlpips-pytorch (ships the ST-LPIPS AlexNet weights)"
    if channels != 3:
        return f"frames of {channels} channels: the network takes RGB"
    return f"frames of {size} px are below the network's {MIN_SIZE}" if size < MIN_SIZE else None


def skipped_for(frames: torch.Tensor) -> str | None:
    """`skipped_reason` for frames (..., C, H, W)."""
    return skipped_reason(min(frames.shape[-2:]), frames.shape[-3])


def load_for(frames: torch.Tensor) -> STLPIPS | None:
    """The network when it is installed and takes frames (..., C, H, W) of this shape, else None."""
    return load() if skipped_for(frames) is None else None


@torch.no_grad()
def frame_features(net: STLPIPS, frames: torch.Tensor, chunk: int = 0) -> list[torch.Tensor]:
    """(B, T, 3, H, W) frames in [-1, 1] -> the taps of every frame, (B T, C_k, h_k, w_k) each. Frames go through
    in chunks of `chunk` (0: about 2^20 pixels a chunk, so ~250 MB for the first tap whatever the frame size)."""
    x = frames.flatten(0, 1)
    chunk = chunk or max(1, 2**20 // (x.shape[-2] * x.shape[-1]))
    parts = [net.features(x[i:i + chunk]) for i in range(0, len(x), chunk)]
    return [torch.cat(p) for p in zip(*parts, strict=True)]


@torch.no_grad()
def frame_distance(net: STLPIPS, pred: torch.Tensor, target_feats: list[torch.Tensor]) -> torch.Tensor:
    """ST-LPIPS of (B, T, 3, H, W) predicted frames to targets given by their features. Returns (B, T).
    A prediction that repeats along B or T (an expanded view: copy-last, the mean frame) is embedded once."""
    B, T = pred.shape[:2]
    if pred.stride(1) == 0 and pred.stride(0) == 0:  # one frame for all
        f = [t.expand(B * T, *t.shape[1:]) for t in frame_features(net, pred[:1, :1])]
    elif pred.stride(1) == 0:  # one frame per clip (copy-last)
        f = [t.repeat_interleave(T, 0) for t in frame_features(net, pred[:, :1])]
    else:
        f = frame_features(net, pred)
    return net.distance(f, target_feats).reshape(B, T)
