"""CS:GO deathmatch recordings as DIAMOND uses them (Pearce & Zhu): one HDF5 file per episode.

    hdf5_dm_july2021_<n>.hdf5:  frame_<i>_x  uint8 (H, W, 3) BGR (150 x 280 in the release)
                                frame_<i>_y  (51,) action: keys, clicks, mouse-x and mouse-y bins
                                frame_<i>_xaux, frame_<i>_helperarr (ignored)

Files are ordered by their number (natural sort), so `_10` comes after `_2`. Frames are returned RGB.
Files are opened per read (never held open), which keeps DataLoader workers safe.

Published splits (Vid2World's CSGO release): a text file naming the validation/test episodes, one file name
per line (`test_split*.txt`; every other file is training data), and a .npy of start indices
(`csgo_validation_start_indices*.npy`): validation window i is the i-th listed file *in sorted path order*
(Python string order over the paths, as Vid2World's `file_list.sort()`: `_10` before `_2`), starting at raw
step `starts[i]`. `published_split` and `published_windows` read them, so numbers are comparable.
"""

from __future__ import annotations

import re
import warnings
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
        import h5py  # deferred on purpose: optional, only CSGO datasets need it

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


def read_split_list(path: str | Path) -> list[str]:
    """A Vid2World split list: one episode file name per line (blank lines ignored) -> the file names."""
    path = Path(path)
    if not path.is_file():
        raise DataError("split list not found", path=path)
    names = [Path(line.strip()).name for line in path.read_text().splitlines() if line.strip()]
    if not names:
        raise DataError("split list names no file", path=path)
    return names


def published_split(source: CSGOSource, split_list: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(train, val) episode indices of `source` for a Vid2World split list: val = the listed files in sorted
    path order (Vid2World's order), train = every other file in the source's order. Listed files missing from
    the directory are a warning naming the list (the numbers are then not the published ones); none found is
    an error."""
    names = read_split_list(split_list)
    listed = set(names)
    by_name: dict[str, list[int]] = {}
    for e, p in enumerate(source.files):
        by_name.setdefault(p.name, []).append(e)
    dup = sorted(n for n in listed if len(by_name.get(n, [])) > 1)
    if dup:
        raise DataError(f"{len(dup)} listed file name(s) occur in several folders (e.g. {dup[0]}); the split is "
                        f"ambiguous", path=split_list)
    missing = [n for n in names if n not in by_name]
    if len(missing) == len(listed):
        raise DataError(f"none of the {len(listed)} listed files is in {source.root}", path=split_list)
    if missing:
        warnings.warn(f"{split_list}: {len(missing)} of {len(listed)} listed files are not in {source.root} (first: "
                      f"{missing[0]}); the validation set is not the published one", stacklevel=2)
    val = sorted((by_name[n][0] for n in listed if n in by_name),
                 key=lambda e: str(source.files[e].relative_to(source.root)))
    val_set = set(val)
    train = [e for e in range(len(source)) if e not in val_set]
    return np.asarray(train, dtype=np.int64), np.asarray(val, dtype=np.int64)


def published_windows(source: CSGOSource, val: np.ndarray, starts_path: str | Path, num_frames: int,
                      frame_interval: int = 1) -> list[tuple[int, int]]:
    """Fixed validation windows: (val[i], starts[i]) for every validation episode i (in `published_split`'s
    order), from a Vid2World start-index .npy. Extra start indices are unused, as in Vid2World; too few, or a
    window that runs past its episode, is an error naming the file and the index."""
    path = Path(starts_path)
    if not path.is_file():
        raise DataError("start-index file not found", path=path)
    try:
        starts = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise DataError(f"not a .npy array ({type(e).__name__}: {e})", path=path) from None
    if starts.ndim != 1 or not np.issubdtype(starts.dtype, np.integer):
        raise DataError(f"start indices must be a 1-D integer array, got {starts.dtype} {starts.shape}", path=path)
    if len(starts) < len(val):
        raise DataError(f"{len(starts)} start indices for {len(val)} validation episodes", path=path)
    span = (num_frames - 1) * frame_interval + 1
    out = []
    for i, e in enumerate(val.tolist()):
        s, t = int(starts[i]), source.length(e)
        if s < 0 or s + span > t:
            raise DataError(f"start index {i} = {s}: a {num_frames}-frame window (interval {frame_interval}) does "
                            f"not fit episode {source.files[e].name} of {t} frames", path=path)
        out.append((int(e), s))
    return out
