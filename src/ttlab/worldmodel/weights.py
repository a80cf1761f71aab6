"""A trained world model rebuilt from its weights export: the denoiser, its diffusion objective and the action
statistics it was trained with (what evaluation, rollouts and play load)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ttlab.common.checkpoint import CheckpointError, load_checkpoint
from ttlab.worldmodel.codecs.load import load_codec
from ttlab.worldmodel.diffusion import DiffusionConfig, Objective
from ttlab.worldmodel.diffusion.guidance import AutoGuided
from ttlab.worldmodel.model import NanoWM, NanoWMConfig


@dataclass
class LoadedWorldModel:
    model: NanoWM
    obj: Objective
    train_cfg: dict
    action_mean: np.ndarray
    action_std: np.ndarray
    step: int


def load_world_model(path: str | Path, device: str | torch.device = "cpu", ema: bool = True) -> LoadedWorldModel:
    """Rebuild a trained model from `weights_latest` (or any weights export) of a run."""
    p = Path(path)
    if p.is_dir():
        p = p / "checkpoints" / "weights_latest" if (p / "checkpoints").is_dir() else p / "weights_latest"
    state = load_checkpoint(p, map_location=device)
    try:
        mc = dict(state["model_cfg"])
        mc.setdefault("null_first_action", False)  # weights saved before the option embedded frame 0's zeros
        model = NanoWM(NanoWMConfig(**mc)).to(device)
        model.load_state_dict(state["ema" if ema else "model"])
        tc = state["train_cfg"]
        obj = Objective(DiffusionConfig(**tc["diffusion"]), device)
        st = state["action_stats"]
        mean, std = np.asarray(st["mean"], np.float32), np.asarray(st["std"], np.float32)
        step = int(state["step"])
    except (KeyError, TypeError, ValueError, RuntimeError) as e:  # another kind of checkpoint, or mismatched weights
        what = f"missing {e}" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
        raise CheckpointError(f"{p}: not NanoWM weights from `ttlab wm train` ({what})") from e
    return LoadedWorldModel(model.eval(), obj, tc, mean, std, step)


def run_dir_of(weights: str | Path) -> Path:
    """The run directory of a run directory or of a weights export stem (`<run>/checkpoints/weights_latest`)."""
    w = Path(weights)
    return w if w.is_dir() else w.parent.parent


def run_codec(train_cfg: dict, device):
    """The codec a run was trained through, or None for pixels."""
    if train_cfg.get("codec", "pixel") == "pixel":
        return None
    return load_codec(train_cfg["codec"], device).requires_grad_(False)


def decode(codec, z: torch.Tensor) -> torch.Tensor:
    """(B, F, ...) model-space frames -> pixels in [-1, 1] (clamped; identity for pixel runs)."""
    if codec is None:
        return z.float().clamp(-1, 1)
    B, Fr = z.shape[:2]
    x = codec.decode(z.flatten(0, 1).float()).clamp(-1, 1)
    return x.reshape(B, Fr, *x.shape[1:])


def load_guide(path: str | Path, like: LoadedWorldModel, device: str | torch.device = "cpu") -> NanoWM:
    """The weaker model autoguidance steers away from: the EMA weights of a training checkpoint
    (`<run>/checkpoints/step=N.ckpt`) or of a weights export, which must have `like`'s architecture."""
    p = Path(path)
    if p.suffix == ".ckpt":
        if not p.is_file():
            raise CheckpointError(f"{p}: guide checkpoint not found")
        try:  # a Lightning checkpoint: the module's state dict holds model.* and ema.*
            sd = torch.load(p, map_location=device, weights_only=True, mmap=True)["state_dict"]
        except Exception as e:  # noqa: BLE001 - a torn or foreign file; name it in one line
            raise CheckpointError(f"{p}: not a readable training checkpoint ({type(e).__name__}: {e})") from e
        ema = {k.removeprefix("ema."): v for k, v in sd.items() if k.startswith("ema.")}
        if not ema:
            raise CheckpointError(f"{p}: no ema.* weights in its state dict (not a `ttlab wm train` checkpoint)")
        model = NanoWM(like.model.cfg).to(device)
        try:
            model.load_state_dict(ema)
        except RuntimeError as e:
            raise CheckpointError(f"{p}: not the architecture of the model it guides ({str(e).splitlines()[0]})") \
                from e
        return model.eval()
    guide = load_world_model(p, device).model
    if guide.cfg != like.model.cfg:
        raise CheckpointError(f"{p}: not the architecture of the model it guides")
    return guide


def sampling_model(wm: LoadedWorldModel, guide: str, guidance: float, device: str | torch.device = "cpu"):
    """The denoiser a sampler calls: the model, or the model autoguided away from `guide` with weight `guidance`."""
    if not guide:
        return wm.model
    return AutoGuided(wm.model, load_guide(guide, wm, device), guidance)
