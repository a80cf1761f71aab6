"""DINO-WM datasets (gaoyuezhou/dino_wm), read in their upstream layouts.

    pusht:       states.pth (N, T, 5), rel_actions.pth | abs_actions.pth (N, T, 2), velocities.pth,
                 seq_lengths.pkl (list of N ints), obses/episode_XXX.mp4
    pth:         states.pth, actions.pth (N, T, A), optional seq_lengths.pth, obses/episode_XXX.pth
                 (uint8 (T, H, W, 3) tensors; point_maze, wall)
    deformable:  states.pth (N, T, P, D), actions.pth (N, T, A), {idx:06d}/obses.pth (float RGBA 0..255)

Episodes are zero-padded to T in the tensors; the episode's length is its seq_length (or T). Tensors
are read with `torch.load(weights_only=True)`; seq_lengths.pkl with an unpickler that accepts plain
numbers and arrays only. A seq_lengths.pth holding a Python list of ints (or of 0-d tensors) instead of a
tensor is accepted, as the official loader accepts it, with a warning naming the file.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ttlab.worldmodel.data.episodes import BaseSource, DataError, EpisodeCache, default_cache_bytes
from ttlab.worldmodel.data.video import read_frames


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles lists/tuples of numbers and NumPy scalars/arrays; refuses any other global."""

    ALLOWED = {(m, n) for m in ("numpy.core.multiarray", "numpy._core.multiarray") for n in ("scalar", "_reconstruct")}
    ALLOWED |= {("numpy", "dtype"), ("numpy", "ndarray")}

    def find_class(self, module: str, name: str):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}")


def load_tensor(path: Path) -> np.ndarray:
    """A tensor file written by torch.save, as a NumPy array (weights_only: no code runs)."""
    if not path.is_file():
        raise DataError("file not found", path=path)
    try:
        x = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError / UnpicklingError / EOFError for bad files
        raise DataError(f"cannot read tensor file ({type(e).__name__}: {e})", path=path) from None
    if not isinstance(x, torch.Tensor):
        raise DataError(f"expected a tensor, found {type(x).__name__}", path=path)
    return x.numpy() if x.dtype != torch.bfloat16 else x.float().numpy()


def load_lengths(path: Path) -> np.ndarray:
    """seq_lengths.pth: a tensor of ints, or (lenient, with a warning naming the file) a list/tuple of ints or
    0-d tensors, which is what `torch.save(list_of_lengths)` writes."""
    if not path.is_file():
        raise DataError("file not found", path=path)
    try:
        x = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError / UnpicklingError / EOFError for bad files
        raise DataError(f"cannot read tensor file ({type(e).__name__}: {e})", path=path) from None
    if isinstance(x, torch.Tensor):
        return x.numpy().astype(np.int64).reshape(-1)
    if isinstance(x, (list, tuple)) and all(isinstance(v, (int, np.integer)) or
                                            (isinstance(v, torch.Tensor) and v.numel() == 1) for v in x):
        warnings.warn(f"{path}: seq_lengths holds a Python {type(x).__name__} of {len(x)} lengths, not a tensor; "
                      f"reading it as the episode lengths (the DINO-WM loader accepts both)", stacklevel=2)
        return np.asarray([int(v) for v in x], dtype=np.int64)
    raise DataError(f"expected a tensor or a list of ints, found {type(x).__name__}", path=path)


def to_uint8_rgb(x: np.ndarray, path: Path) -> np.ndarray:
    """(T, H, W, C) or (T, C, H, W) frames, C in {3, 4}, uint8 or float (0..1 or 0..255) -> uint8 (T, H, W, 3)."""
    if x.ndim != 4:
        raise DataError(f"frames must be 4-D (T, H, W, C), got shape {x.shape}", path=path)
    if x.shape[-1] not in (3, 4) and x.shape[1] in (3, 4):
        x = x.transpose(0, 2, 3, 1)  # (T, C, H, W) -> (T, H, W, C)
    if x.shape[-1] not in (3, 4):
        raise DataError(f"frames must have 3 (RGB) or 4 (RGBA) channels, got shape {x.shape}", path=path)
    x = x[..., :3]
    if x.dtype == np.uint8:
        return np.ascontiguousarray(x)
    if np.issubdtype(x.dtype, np.floating):
        if x.size and x.max() <= 1.0:
            x = x * 255.0
        return np.clip(np.round(x), 0, 255).astype(np.uint8)
    if np.issubdtype(x.dtype, np.integer) and (x.size == 0 or (x.min() >= 0 and x.max() <= 255)):
        return x.astype(np.uint8)
    raise DataError(f"frames must be uint8 or float, got {x.dtype}", path=path)


PUSHT_WORKSPACE = 512.0  # gym-pusht's workspace side in world units (x -> column, y -> row)


class DinoWMSource(BaseSource):
    """A DINO-WM dataset directory. `relative` picks rel_actions.pth over abs_actions.pth (PushT).
    Decoded episodes are kept (LRU) so windows of one episode decode its video once: at most `cache` of them
    (-1: no count limit) and at most `cache_bytes` bytes (None: `default_cache_bytes()`, a quarter of the
    memory available)."""

    def __init__(self, root: str | Path, relative: bool = True, cache: int = -1, cache_bytes: int | None = None):
        self.root = root = Path(root)
        self.relative = relative
        self._cache = EpisodeCache(cache, default_cache_bytes() if cache_bytes is None else cache_bytes)
        if not root.is_dir():
            raise DataError("dataset directory not found", path=root)
        if (root / "000000" / "obses.pth").is_file():
            self.layout = "deformable"
        elif (root / "obses").is_dir():
            self.layout = "pusht" if next((root / "obses").glob("episode_*.mp4"), None) else "pth"
        else:
            hint = "; it has a train/ folder: point at train/ (or val/)" if (root / "train" / "obses").is_dir() else ""
            raise DataError(f"not a DINO-WM dataset: no obses/ folder and no 000000/obses.pth{hint}", path=root)

        names = ["rel_actions.pth" if relative else "abs_actions.pth", "actions.pth"]
        found = [root / n for n in names if (root / n).is_file()]
        if not found:
            raise DataError(f"not a DINO-WM dataset: neither {names[0]} nor {names[1]}", path=root)
        self.action_file = found[0]
        acts = load_tensor(self.action_file)
        if not np.issubdtype(acts.dtype, np.floating):
            raise DataError(f"actions must be floating point, got {acts.dtype}", path=self.action_file)
        if acts.ndim != 3:
            raise DataError(f"actions must be (episodes, T, A), got shape {acts.shape}", path=self.action_file)
        self._actions = acts.astype(np.float32, copy=False)  # (N, T, A)
        n, t_max, self.action_dim = self._actions.shape
        if self.action_file.name == "abs_actions.pth" and self.action_dim == 2:
            self.action_extent = PUSHT_WORKSPACE  # PushT's absolute actions: the agent's PD target in the image

        self._states = None
        if (root / "states.pth").is_file():
            st = load_tensor(root / "states.pth")
            if st.ndim < 2 or st.shape[:2] != (n, t_max):
                raise DataError(f"states must be (episodes={n}, T={t_max}, ...), got shape {st.shape}",
                                path=root / "states.pth")
            self._states = st.reshape(n, t_max, -1).astype(np.float32, copy=False)  # (N, T, S)
        self._lengths = self._read_lengths(n, t_max)

    def _read_lengths(self, n: int, t_max: int) -> np.ndarray:
        pkl, pth = self.root / "seq_lengths.pkl", self.root / "seq_lengths.pth"
        if pkl.is_file():
            try:
                with open(pkl, "rb") as f:
                    raw = _PlainUnpickler(f).load()
                lengths = np.asarray(raw, dtype=np.int64).reshape(-1)
            except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
                raise DataError(f"cannot read sequence lengths ({type(e).__name__}: {e})", path=pkl) from None
            where = pkl
        elif pth.is_file():
            lengths, where = load_lengths(pth), pth
        else:
            return np.full(n, t_max, dtype=np.int64)
        if len(lengths) != n:
            raise DataError(f"{len(lengths)} lengths for {n} episodes in {self.action_file.name}", path=where)
        bad = np.flatnonzero((lengths < 1) | (lengths > t_max))
        if bad.size:
            raise DataError(f"episode {bad[0]} has length {lengths[bad[0]]}, outside 1..{t_max}", path=where)
        return lengths

    def __len__(self) -> int:
        return len(self._lengths)

    def length(self, e: int) -> int:
        return int(self._lengths[e])

    def obs_path(self, e: int) -> Path:
        if self.layout == "deformable":
            return self.root / f"{e:06d}" / "obses.pth"
        return self.root / "obses" / f"episode_{e:03d}.{'mp4' if self.layout == 'pusht' else 'pth'}"

    def _read_all(self, e: int) -> np.ndarray:
        path, t = self.obs_path(e), self.length(e)
        x = read_frames(path, np.arange(t)) if self.layout == "pusht" else to_uint8_rgb(load_tensor(path), path)
        if len(x) < t:
            raise DataError(f"length mismatch: {len(x)} frames, the episode has {t} steps", path=path)
        return x[:t]  # (T, H, W, 3)

    def frames(self, e: int, idx: Sequence[int] | np.ndarray) -> np.ndarray:
        idx = self._frame_idx(e, idx)
        try:
            full = self._cache.get(e)
            if full is None and self.layout == "pusht" and not self._cache.enabled:
                return read_frames(self.obs_path(e), idx)  # decode only up to the last frame asked for
            if full is None:
                full = self._read_all(e)
                self._cache.put(e, full)
            return full[idx]  # (n, H, W, 3)
        except DataError as err:
            raise err.at(e) from None

    def actions(self, e: int) -> np.ndarray:
        return self._actions[e, : self.length(e)]  # (T, A)

    def states(self, e: int) -> np.ndarray | None:
        return None if self._states is None else self._states[e, : self.length(e)]  # (T, S)
