"""CS:GO deathmatch recordings as DIAMOND uses them (Pearce & Zhu): one HDF5 file per episode.

    hdf5_dm_july2021_<n>.hdf5:  frame_<i>_x  uint8 (H, W, 3) BGR (150 x 280 in the release)
                                frame_<i>_y  (51,) action: keys, clicks, mouse-x and mouse-y bins
                                frame_<i>_xaux, frame_<i>_helperarr (ignored)

Files are ordered by their number (natural sort), so `_10` comes after `_2`. Frames are returned RGB.
Files are opened per read (never held open), which keeps DataLoader workers safe.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ttlab.worldmodel.data.episodes import BaseSource, DataError

FRAME_KEY = re.compile(r"frame_(\d+)_x$")


def natural_key(path: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


class CSGOSource(BaseSource):
    """A directory (searched recursively) of DIAMOND CSGO .hdf5 episodes."""

    def __init__(self, root: str | Path, actions_cache: int = 256):
        self.root = root = Path(root)
        if not root.is_dir():
            raise DataError("dataset directory not found", path=root)
        self.files = sorted((p for p in root.rglob("*") if p.suffix in (".hdf5", ".h5")), key=natural_key)
        if not self.files:
            raise DataError("not a CSGO (DIAMOND) dataset: no .hdf5 files", path=root)
        self._lengths: dict[int, int] = {}
        self._actions: OrderedDict[int, np.ndarray] = OrderedDict()
        self._actions_cache = actions_cache
        self._action_dim: int | None = None

    def _open(self, e: int):
        import h5py

        path = self.files[e]
        try:
            return h5py.File(path, "r")
        except OSError as err:
            raise DataError(f"cannot open HDF5 ({err})", episode=e, path=path) from None

    @property
    def action_dim(self) -> int:
        """Width of frame_0_y in the first readable file (51 in the release)."""
        if self._action_dim is None:
            for e in range(len(self.files)):
                try:
                    with self._open(e) as f:
                        self._action_dim = int(np.prod(f["frame_0_y"].shape))
                        break
                except (DataError, KeyError):
                    continue
            else:
                raise DataError("no readable episode with frame_0_y", path=self.root)
        return self._action_dim

    def __len__(self) -> int:
        return len(self.files)

    def length(self, e: int) -> int:
        t = self._lengths.get(e)
        if t is None:
            with self._open(e) as f:
                ids = sorted(int(m.group(1)) for k in f.keys() if (m := FRAME_KEY.match(k)))
            if not ids or ids != list(range(len(ids))):
                raise DataError(f"frame_<i>_x keys must run 0..T-1, found {len(ids)} keys", episode=e,
                                path=self.files[e])
            t = self._lengths[e] = len(ids)
        return t

    def frames(self, e: int, idx: Sequence[int] | np.ndarray) -> np.ndarray:
        idx = self._frame_idx(e, idx)
        path = self.files[e]
        out = []
        with self._open(e) as f:
            for i in idx.tolist():
                x = f[f"frame_{i}_x"]
                if x.dtype != np.uint8:
                    raise DataError(f"frame_{i}_x must be uint8 BGR, got {x.dtype}", episode=e, path=path)
                if x.ndim != 3 or x.shape[-1] != 3:
                    raise DataError(f"frame_{i}_x must be (H, W, 3), got {x.shape}", episode=e, path=path)
                out.append(x[()][..., ::-1])  # BGR -> RGB
        return np.ascontiguousarray(np.stack(out))  # (n, H, W, 3)

    def actions(self, e: int) -> np.ndarray:
        a = self._actions.get(e)
        if a is not None:
            self._actions.move_to_end(e)
            return a
        t, path = self.length(e), self.files[e]
        with self._open(e) as f:
            try:
                rows = [np.asarray(f[f"frame_{i}_y"][()]).reshape(-1) for i in range(t)]
            except KeyError as err:
                raise DataError(f"missing action ({err})", episode=e, path=path) from None
        if len({r.shape for r in rows}) != 1 or not np.issubdtype(rows[0].dtype, np.number):
            raise DataError("frame_<i>_y actions must be numeric vectors of one width", episode=e, path=path)
        a = np.stack(rows).astype(np.float32)  # (T, 51)
        self._actions[e] = a
        while len(self._actions) > self._actions_cache:
            self._actions.popitem(last=False)
        return a
