"""Precomputed codec latents on disk (`ttlab wm encode`) and the source that reads them.

A latent dataset directory holds

    latents.npy   (total_frames, C, h, w) float16/float32, episodes back to back (memory-mapped on read)
    actions.npy   (total_frames, A) float32 raw actions, same order
    states.npy    (total_frames, S) float32, when every source episode has states
    latents.json  format, codec spec/name/scale, latent_shape, dtype, lengths, ... (written last: a
                  directory without it is an unfinished encode)

`LatentSource` serves it through the source interface with `is_latent = True`: `frames` returns
float32 latents (n, C, h, w), already multiplied by the codec's scale, and `WindowDataset` uses them
as they are.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ttlab.common.checkpoint import atomic_write_text
from ttlab.common.logging import progress
from ttlab.worldmodel.data.episodes import BaseSource, DataError, EpisodeSource
from ttlab.worldmodel.data.windows import _codec_device, to_model_frames

FORMAT = "ttlab-latents"
META = "latents.json"
DTYPES = ("float16", "float32")


@dataclass
class LatentEpisode:
    latents: np.ndarray  # float32 (T, C, h, w)
    actions: np.ndarray  # float32 (T, A)
    states: np.ndarray | None = None


class LatentSource(BaseSource):
    """A directory written by `encode_source`."""

    is_latent = True

    def __init__(self, root: str | Path):
        self.root = root = Path(root)
        meta_path = root / META
        if not meta_path.is_file():
            raise DataError(f"not a latent dataset: no {META} (make one with `ttlab wm encode`)", path=root)
        try:
            self.meta = meta = json.loads(meta_path.read_text())
            if meta.get("format") != FORMAT:
                raise ValueError(f"format is {meta.get('format')!r}, expected {FORMAT!r}")
            self._lengths = np.asarray(meta["lengths"], dtype=np.int64)
            self.latent_shape = tuple(int(v) for v in meta["latent_shape"])
            self.action_dim = int(meta["action_dim"])
        except (json.JSONDecodeError, KeyError, ValueError, TypeError) as e:
            raise DataError(f"unreadable latent metadata ({type(e).__name__}: {e})", path=meta_path) from None
        self.codec_spec, self.scale = str(meta.get("codec", "")), float(meta.get("scale", 1.0))
        self._offsets = np.concatenate([[0], np.cumsum(self._lengths)])
        total = int(self._offsets[-1])
        self._actions = self._load(root / "actions.npy", (total, self.action_dim))
        self._states = self._load(root / "states.npy", None) if (root / "states.npy").is_file() else None
        self._latents: np.ndarray | None = None  # memory map, opened lazily in each process

    @staticmethod
    def _load(path: Path, shape: tuple | None, mmap: str | None = None) -> np.ndarray:
        if not path.is_file():
            raise DataError("file not found", path=path)
        try:
            x = np.load(path, mmap_mode=mmap, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise DataError(f"cannot read array ({e})", path=path) from None
        if shape is not None and x.shape != shape:
            raise DataError(f"expected shape {shape}, found {x.shape}", path=path)
        return x

    def latents_array(self) -> np.ndarray:
        if self._latents is None:
            self._latents = self._load(self.root / "latents.npy", (int(self._offsets[-1]), *self.latent_shape), "r")
        return self._latents

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_latents": None}  # workers re-open the memory map

    def __len__(self) -> int:
        return len(self._lengths)

    def length(self, e: int) -> int:
        return int(self._lengths[e])

    def frames(self, e: int, idx: Sequence[int] | np.ndarray) -> np.ndarray:
        idx = self._frame_idx(e, idx)
        return np.asarray(self.latents_array()[self._offsets[e] + idx], dtype=np.float32)  # (n, C, h, w)

    def actions(self, e: int) -> np.ndarray:
        return self._actions[self._offsets[e]: self._offsets[e + 1]]  # (T, A)

    def states(self, e: int) -> np.ndarray | None:
        return None if self._states is None else self._states[self._offsets[e]: self._offsets[e + 1]]

    def __getitem__(self, e: int) -> LatentEpisode:
        e = self._episode(e)
        return LatentEpisode(self.frames(e, np.arange(self.length(e))), self.actions(e), self.states(e))

    def check(self, e: int) -> None:
        if not np.isfinite(self[e].latents).all():
            raise DataError("non-finite latents", episode=e, path=self.root / "latents.npy")


def frame_batches(source: EpisodeSource, lengths: Sequence[int], batch_size: int):
    """uint8 (b, H, W, 3) batches of every frame in episode order, crossing episode boundaries."""
    pending: list[np.ndarray] = []
    waiting = 0
    for e, t in enumerate(lengths):
        pending.append(source.frames(e, np.arange(t)))  # (T, H, W, 3)
        waiting += t
        while waiting >= batch_size:
            cat = np.concatenate(pending)
            yield cat[:batch_size]
            pending, waiting = [cat[batch_size:]], waiting - batch_size
    if waiting:
        yield np.concatenate(pending)


def encode_source(source: EpisodeSource, codec: Any, out: str | Path, codec_spec: str = "", batch_size: int = 64,
                  dtype: str = "float16", size: int = 0, show_progress: bool | None = None,
                  overwrite: bool = False) -> dict[str, Any]:
    """Encode every frame of `source` with `codec` into a latent dataset at `out`; returns a summary.

    Frames go through the codec in batches of `batch_size` across episode boundaries, on the codec's
    device. `size > 0` resizes frames to size x size (antialiased bilinear) first. `codec_spec` is
    recorded so a trainer can load the same codec to decode.
    """
    if source.is_latent:
        raise DataError("the source is already latent")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    out = Path(out)
    if (out / META).exists():
        if not overwrite:
            raise FileExistsError(f"{out} already holds a latent dataset; pass --overwrite to replace it")
        (out / META).unlink()
        (out / "states.npy").unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    n = len(source)
    lengths = [source.length(e) for e in range(n)]
    total = int(sum(lengths))
    device = _codec_device(codec)

    def encode(frames: np.ndarray) -> np.ndarray:
        x = to_model_frames(frames).to(device)  # (b, 3, H, W)
        if size > 0:
            x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
        return codec.encode(x).float().cpu().numpy()  # (b, C, h, w)

    actions = np.concatenate([np.asarray(source.actions(e), np.float32) for e in range(n)])  # (total, A)
    states = [source.states(e) for e in range(n)]
    np.save(out / "actions.npy", actions)
    if all(st is not None for st in states):
        np.save(out / "states.npy", np.concatenate([np.asarray(st, np.float32).reshape(len(st), -1) for st in states]))
    with torch.inference_mode():
        first = source.frames(0, [0])  # (1, H, W, 3)
        latent_shape = tuple(int(v) for v in encode(first).shape[1:])
        lat = np.lib.format.open_memmap(out / "latents.npy", mode="w+", dtype=dtype, shape=(total, *latent_shape))
        cursor = 0
        with progress(total, "encode", disable=None if show_progress is None else not show_progress) as bar:
            for batch in frame_batches(source, lengths, batch_size):  # (b, H, W, 3)
                lat[cursor: cursor + len(batch)] = encode(batch).astype(dtype)
                cursor += len(batch)
                bar.advance(len(batch))
        lat.flush()
    secs = time.perf_counter() - t0
    h, w = first.shape[1:3] if size <= 0 else (size, size)
    meta = {"format": FORMAT, "version": 1, "codec": str(codec_spec), "codec_name": getattr(codec, "name", ""),
            "scale": float(getattr(codec, "scale", 1.0)), "latent_shape": list(latent_shape), "dtype": dtype,
            "frame_shape": [int(h), int(w), 3], "resize": int(size), "episodes": n, "frames": total,
            "action_dim": int(source.action_dim), "source": str(getattr(source, "root", "")),
            "lengths": [int(t) for t in lengths]}
    atomic_write_text(out / META, json.dumps(meta) + "\n")
    summary = {k: v for k, v in meta.items() if k != "lengths"}
    summary.update({"out": str(out), "seconds": secs, "frames_per_s": total / max(secs, 1e-9),
                    "bytes": int((out / "latents.npy").stat().st_size)})
    return summary
