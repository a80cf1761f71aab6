"""LeRobot datasets (v2.0/v2.1 and v3.0), read with pyarrow and PyAV only (no `lerobot` package).

    v2.x: meta/info.json, meta/episodes.jsonl (episode_index, length),
          data/chunk-XXX/episode_XXXXXX.parquet (one file per episode),
          videos/chunk-XXX/<image key>/episode_XXXXXX.mp4
    v3.0: meta/info.json, meta/episodes/chunk-XXX/file-XXX.parquet (per episode: length, data file,
          video file and from/to timestamps), data/chunk-XXX/file-XXX.parquet and
          videos/<image key>/chunk-XXX/file-XXX.mp4, each holding many episodes back to back

Paths come from info.json's `data_path` / `video_path` templates. Images are the `image_key` feature:
`video` (mp4) or `image` (PNG/JPEG bytes inside the parquet rows). RT-1 (fractal) as converted to
LeRobot: image key `observation.images.image`, 7-D `action` (x, y, z, roll, pitch, yaw, gripper),
8-D `observation.state`. Episode numbers in errors are the dataset's `episode_index`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ttlab.worldmodel.data.episodes import BaseSource, DataError, EpisodeCache, default_cache_bytes
from ttlab.worldmodel.data.video import decode_image, read_frames

PREFERRED_IMAGE_KEYS = ("observation.images.image", "observation.image")


def _pyarrow():
    """(pyarrow, pyarrow.parquet), imported on first use: deferred on purpose, pyarrow is an optional dependency
    that only LeRobot datasets need (and a slow import)."""
    import pyarrow as pa  # deferred on purpose (see above)
    import pyarrow.parquet as pq

    return pa, pq


def column_to_numpy(col: Any) -> np.ndarray:
    """A pyarrow column of scalars or (fixed-size) lists of numbers -> (rows, width) array."""
    pa, _ = _pyarrow()

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or pa.types.is_fixed_size_list(arr.type):
        return arr.flatten().to_numpy(zero_copy_only=False).reshape(len(arr), -1)
    return arr.to_numpy(zero_copy_only=False).reshape(len(arr), 1)


class LeRobotSource(BaseSource):
    """A LeRobot dataset directory. Decoded episodes are kept (LRU): at most `cache` (-1: no count limit) and
    at most `cache_bytes` bytes (None: `default_cache_bytes()`, a quarter of the memory available)."""

    def __init__(self, root: str | Path, image_key: str | None = None, action_key: str = "action",
                 state_key: str = "observation.state", cache: int = -1, cache_bytes: int | None = None):
        self.root = root = Path(root)
        info_path = root / "meta" / "info.json"
        if not info_path.is_file():
            raise DataError("not a LeRobot dataset: no meta/info.json", path=root)
        try:
            self.info = info = json.loads(info_path.read_text())
            self.version = str(info["codebase_version"])
            self.major = int(self.version.lstrip("v").split(".")[0])
            self.features: dict = info["features"]
            self.fps = float(info["fps"])
        except (json.JSONDecodeError, KeyError, ValueError, TypeError) as e:
            raise DataError(f"unreadable info.json ({type(e).__name__}: {e})", path=info_path) from None
        if not isinstance(self.features, dict) or not all(isinstance(f, dict) for f in self.features.values()):
            raise DataError("unreadable info.json: `features` must map each feature name to an object",
                            path=info_path)
        if self.major not in (2, 3):
            raise DataError(f"LeRobot codebase_version {self.version} not supported (v2.x, v3.0)", path=info_path)
        images = [k for k, f in self.features.items() if f.get("dtype") in ("video", "image")]
        if image_key is None:
            pref = [k for k in PREFERRED_IMAGE_KEYS if k in images]
            if not images:
                raise DataError("no image or video feature in the dataset", path=info_path)
            image_key = (pref or images)[0]
        elif image_key not in images:
            raise DataError(f"image key {image_key!r} is not an image/video feature; the dataset has {images}",
                            path=info_path)
        if action_key not in self.features:
            raise DataError(f"no {action_key!r} feature; features are {sorted(self.features)}", path=info_path)
        self.image_key, self.action_key = image_key, action_key
        self.is_video = self.features[image_key]["dtype"] == "video"
        for template in ("data_path", "video_path") if self.is_video else ("data_path",):
            if not isinstance(info.get(template), str):
                raise DataError(f"unreadable info.json: no `{template}` template (a string)", path=info_path)
        self.state_key = state_key if state_key in self.features else None
        self.action_dim = int(np.prod(self.features[action_key].get("shape", [1])))
        self._frames = EpisodeCache(cache, default_cache_bytes() if cache_bytes is None else cache_bytes)
        self._columns: dict[int, dict[str, np.ndarray]] = {}  # episode -> {"action": (T, A), "state": (T, S)}
        self._files: dict[Path, dict[str, np.ndarray]] = {}  # v3 data file -> columns (few kept)
        if self.major == 2:
            self._load_v2_episodes()
        else:
            self._load_v3_episodes()

    # ---- episode tables -------------------------------------------------------------------------
    def _load_v2_episodes(self) -> None:
        path = self.root / "meta" / "episodes.jsonl"
        if not path.is_file():
            raise DataError("not a LeRobot v2 dataset: no meta/episodes.jsonl", path=self.root)
        rows = []
        for i, line in enumerate(path.read_text().splitlines()):
            if line.strip():
                try:
                    d = json.loads(line)
                    rows.append((int(d["episode_index"]), int(d["length"])))
                except (json.JSONDecodeError, KeyError, ValueError, TypeError) as e:
                    raise DataError(f"line {i + 1}: {type(e).__name__}: {e}", path=path) from None
        if not rows:
            raise DataError("no episodes", path=path)
        rows.sort()
        self.episode_index = np.array([r[0] for r in rows], dtype=np.int64)
        self._lengths = np.array([r[1] for r in rows], dtype=np.int64)
        self._meta_name = "meta/episodes.jsonl"

    def _load_v3_episodes(self) -> None:
        pa, pq = _pyarrow()

        files = sorted((self.root / "meta" / "episodes").rglob("*.parquet"))
        if not files:
            raise DataError("not a LeRobot v3 dataset: no meta/episodes/*.parquet", path=self.root)
        try:
            tab = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
        except (pa.ArrowException, OSError) as e:
            raise DataError(f"cannot read episode metadata ({type(e).__name__}: {e})", path=files[0].parent) from None
        k = self.image_key
        cols = ["episode_index", "length", "data/chunk_index", "data/file_index"]
        if self.is_video:
            cols += [f"videos/{k}/chunk_index", f"videos/{k}/file_index", f"videos/{k}/from_timestamp"]
        missing = [c for c in cols if c not in tab.column_names]
        if missing:
            raise DataError(f"episode metadata lacks columns {missing}", path=files[0])
        order = np.argsort(tab.column("episode_index").to_numpy())
        self._v3 = {c: tab.column(c).to_numpy()[order] for c in cols}
        self.episode_index = self._v3["episode_index"].astype(np.int64)
        self._lengths = self._v3["length"].astype(np.int64)
        self._meta_name = "meta/episodes"

    # ---- paths ----------------------------------------------------------------------------------
    def data_path(self, e: int) -> Path:
        ep = int(self.episode_index[e])
        if self.major == 2:
            chunk = ep // int(self.info.get("chunks_size", 1000))
            return self.root / self.info["data_path"].format(episode_chunk=chunk, episode_index=ep)
        return self.root / self.info["data_path"].format(chunk_index=int(self._v3["data/chunk_index"][e]),
                                                         file_index=int(self._v3["data/file_index"][e]))

    def video_path(self, e: int) -> Path:
        ep, k = int(self.episode_index[e]), self.image_key
        if self.major == 2:
            chunk = ep // int(self.info.get("chunks_size", 1000))
            return self.root / self.info["video_path"].format(episode_chunk=chunk, video_key=k, episode_index=ep)
        return self.root / self.info["video_path"].format(
            video_key=k, chunk_index=int(self._v3[f"videos/{k}/chunk_index"][e]),
            file_index=int(self._v3[f"videos/{k}/file_index"][e]))

    # ---- source interface -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._lengths)

    def length(self, e: int) -> int:
        return int(self._lengths[e])

    def _read_rows(self, e: int, columns: list[str]):
        """The parquet rows of episode e (only `columns`), as a pyarrow table."""
        pa, pq = _pyarrow()

        path = self.data_path(e)
        if not path.is_file():
            raise DataError("data file not found", path=path)
        try:
            if self.major == 2:
                return pq.read_table(path, columns=columns)
            return pq.read_table(path, columns=columns,
                                 filters=[("episode_index", "=", int(self.episode_index[e]))])
        except (pa.ArrowException, OSError) as e_:
            raise DataError(f"cannot read parquet ({type(e_).__name__}: {e_})", path=path) from None

    def _episode_columns(self, e: int) -> dict[str, np.ndarray]:
        got = self._columns.get(e)
        if got is not None:
            return got
        path = self.data_path(e)
        keys = [self.action_key] + ([self.state_key] if self.state_key else [])
        if self.major == 2:
            tab = self._read_rows(e, keys)
            cols = {k: column_to_numpy(tab.column(k)).astype(np.float32) for k in keys}
        else:
            cols = self._v3_file_columns(path, keys)
            sel = cols["episode_index"][:, 0] == self.episode_index[e]
            cols = {k: cols[k][sel].astype(np.float32) for k in keys}
        rows = len(cols[self.action_key])
        if rows != self.length(e):
            raise DataError(f"length mismatch: {self._meta_name} says {self.length(e)} rows, the file has {rows}",
                            path=path)
        out = {"action": cols[self.action_key], "state": cols[self.state_key] if self.state_key else None}
        self._columns[e] = out
        return out

    def _v3_file_columns(self, path: Path, keys: list[str]) -> dict[str, np.ndarray]:
        pa, pq = _pyarrow()

        got = self._files.get(path)
        if got is None:
            if not path.is_file():
                raise DataError("data file not found", path=path)
            try:
                tab = pq.read_table(path, columns=["episode_index", *keys])
            except (pa.ArrowException, OSError) as e:
                raise DataError(f"cannot read parquet ({type(e).__name__}: {e})", path=path) from None
            got = {k: column_to_numpy(tab.column(k)) for k in ["episode_index", *keys]}
            if len(self._files) >= 2:
                self._files.pop(next(iter(self._files)))
            self._files[path] = got
        return got

    def actions(self, e: int) -> np.ndarray:
        try:
            return self._episode_columns(e)["action"]  # (T, A)
        except DataError as err:
            raise err.at(int(self.episode_index[e])) from None

    def states(self, e: int) -> np.ndarray | None:
        try:
            return self._episode_columns(e)["state"]  # (T, S)
        except DataError as err:
            raise err.at(int(self.episode_index[e])) from None

    def _decode(self, e: int, idx: np.ndarray) -> np.ndarray:
        if self.is_video:
            start = 0.0 if self.major == 2 else float(self._v3[f"videos/{self.image_key}/from_timestamp"][e])
            return read_frames(self.video_path(e), idx, start_time=start, fps=self.fps)
        tab = self._read_rows(e, [self.image_key])
        if tab.num_rows != self.length(e):
            raise DataError(f"length mismatch: {self._meta_name} says {self.length(e)} rows, the file has "
                            f"{tab.num_rows}", path=self.data_path(e))
        col = tab.column(self.image_key)
        out = []
        for i in idx.tolist():
            v = col[i].as_py()
            data = v.get("bytes") if isinstance(v, dict) else v
            if not data:
                raise DataError(f"row {i}: no image bytes in {self.image_key!r}", path=self.data_path(e))
            out.append(decode_image(data, self.data_path(e)))
        return np.stack(out)  # (n, H, W, 3)

    def frames(self, e: int, idx: Sequence[int] | np.ndarray) -> np.ndarray:
        idx = self._frame_idx(e, idx)
        try:
            full = self._frames.get(e)
            if full is not None:
                return full[idx]
            if not self._frames.enabled:
                return self._decode(e, idx)
            full = self._decode(e, np.arange(self.length(e)))
            self._frames.put(e, full)
            return full[idx]  # (n, H, W, 3)
        except DataError as err:
            raise err.at(int(self.episode_index[e])) from None
