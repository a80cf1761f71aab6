"""Converted scenario cache: JSON scenes -> shards of flat arrays (.npz) + one index.json.

Layout of OUT_DIR:
    index.json          {"format": "ttlab-drive-scenarios", "version": 1, "scenes": [{"name", "shard", "i",
                         "dt", "style_names", "metadata", "source"}, ...], "bad": [[file, error], ...]}
    shard_00000.npz     per array field F of `Scenario`: F (every scene's array flattened and concatenated),
                        F.shape (n, ndim) int64 with -1 rows for an absent optional field, F.off (n+1,)

Loading reads each shard once (uncompressed npz, memory copies only) and slices scenes out as views,
so thousands of scenes load in well under a second. `convert` runs shards in a process pool; a bad
file is recorded by name with its error and skipped, never fatal to the other files.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from ttlab.drive.scenarios.types import Scenario
from ttlab.drive.scenarios.waymo_json import ScenarioFormatError, load_scenario

INDEX = "index.json"
FORMAT = "ttlab-drive-scenarios"
VERSION = 1
FIELDS: tuple[str, ...] = ("pos", "heading", "vel", "valid", "length", "width", "agent_type", "goal", "expert",
                           "seg", "seg_type", "seg_road", "route", "goal_candidates", "style_pos", "style_heading",
                           "style_vel", "style_valid")
DTYPES = {"valid": np.bool_, "expert": np.bool_, "style_valid": np.bool_, "agent_type": np.int8, "seg_type": np.int8,
          "seg_road": np.int32}


class CacheError(ValueError):
    """A missing or damaged cache; the message names the file."""


def _json_safe(v):
    try:
        json.dumps(v)
        return v
    except TypeError:
        return str(v)


def write_shard(scenes: list[Scenario], path: Path) -> list[dict]:
    """Write scenes to one .npz shard (atomic rename); returns their index entries (without 'shard')."""
    arrays: dict[str, np.ndarray] = {}
    for f in FIELDS:
        dtype = DTYPES.get(f, np.float32)
        vals = [getattr(s, f) for s in scenes]
        ndim = max((np.ndim(v) for v in vals if v is not None), default=1)
        shapes = np.full((len(scenes), ndim), -1, np.int64)
        flat = []
        for k, v in enumerate(vals):
            if v is not None:
                shapes[k] = np.shape(v)
                flat.append(np.asarray(v, dtype).reshape(-1))
        sizes = [int(np.prod(s)) if s[0] >= 0 else 0 for s in shapes]
        arrays[f] = np.concatenate(flat) if flat else np.zeros(0, dtype)
        arrays[f + ".shape"] = shapes
        arrays[f + ".off"] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    return [{"name": s.name, "i": k, "dt": float(s.dt), "style_names": list(s.style_names),
             "metadata": {str(a): _json_safe(b) for a, b in s.metadata.items()}} for k, s in enumerate(scenes)]


def read_shard(path: Path, entries: list[dict]) -> list[Scenario]:
    """Scenes of one shard, in entry order; arrays are views into the shard's arrays."""
    try:
        with np.load(path) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise CacheError(f"{path}: cannot read shard ({e})") from e
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise CacheError(f"{path}: shard lacks arrays {missing}")
    out = []
    for e in entries:
        k = e["i"]
        kw = {}
        for f in FIELDS:
            shape = data[f + ".shape"][k]
            if shape[0] < 0:
                kw[f] = None
                continue
            off = data[f + ".off"]
            kw[f] = data[f][off[k]:off[k + 1]].reshape(tuple(int(d) for d in shape))
        out.append(Scenario(name=e["name"], dt=e["dt"], style_names=tuple(e["style_names"]),
                            metadata=e["metadata"], **kw))
    return out


def load_cache(root: str | Path) -> list[Scenario]:
    """All scenes of a converted cache directory, in index order."""
    root = Path(root)
    index_path = root / INDEX
    try:
        index = json.loads(index_path.read_text())
    except FileNotFoundError as e:
        raise CacheError(f"{index_path}: no cache index (run `ttlab drive convert SRC_DIR {root}` first)") from e
    except json.JSONDecodeError as e:
        raise CacheError(f"{index_path}: not valid JSON ({e})") from e
    if index.get("format") != FORMAT or index.get("version") != VERSION:
        raise CacheError(f"{index_path}: not a {FORMAT} v{VERSION} index "
                         f"(format={index.get('format')!r}, version={index.get('version')!r})")
    by_shard: dict[str, list[dict]] = {}
    for e in index["scenes"]:
        by_shard.setdefault(e["shard"], []).append(e)
    scenes = []
    for shard, entries in by_shard.items():
        scenes += read_shard(root / shard, entries)
    return scenes


def _convert_shard(files: list[str], out: str, tolerance: float, strict: bool = False
                   ) -> tuple[str, list[dict], list[tuple[str, str]], list[tuple[str, list[str]]]]:
    """Worker: load a list of JSON files, write the good ones to `out`.

    Returns (shard, entries, bad, repaired): repaired lists (file, repair notes) of files read leniently."""
    good, srcs, bad, repaired = [], [], [], []
    for f in files:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the repairs are returned and reported by the caller
                sc = load_scenario(f, tolerance=tolerance, strict=strict)
            good.append(sc)
            srcs.append(Path(f).name)
            if sc.metadata.get("repairs"):
                repaired.append((Path(f).name, list(sc.metadata["repairs"])))
        except (ScenarioFormatError, OSError, ValueError) as e:
            bad.append((Path(f).name, str(e)))
    entries = write_shard(good, Path(out)) if good else []
    for e, s in zip(entries, srcs, strict=True):
        e["source"] = s
    return Path(out).name, entries, bad, repaired


def convert(src: str | Path, out: str | Path, workers: int = 1, shard_size: int = 64, tolerance: float = 0.1,
            on_progress: Callable[[int], None] | None = None, strict: bool = False) -> dict:
    """Convert every *.json under `src` into a cache at `out`. Returns the index (with its 'bad' list).

    workers > 1 converts shards in a process pool. The index is written last, atomically."""
    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise FileNotFoundError(f"source directory not found: {src}")
    files = sorted(str(p) for p in src.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"{src}: no *.json scene files")
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(files[i:i + shard_size], str(out / f"shard_{i // shard_size:05d}.npz"))
            for i in range(0, len(files), shard_size)]
    results = {}
    if workers <= 1:
        for fs, o in jobs:
            results[o] = _convert_shard(fs, o, tolerance, strict)
            if on_progress:
                on_progress(len(fs))
    else:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            futs = {ex.submit(_convert_shard, fs, o, tolerance, strict): (fs, o) for fs, o in jobs}
            for fut in as_completed(futs):
                fs, o = futs[fut]
                results[o] = fut.result()
                if on_progress:
                    on_progress(len(fs))
    scenes, bad, repaired = [], [], []
    for _, o in jobs:  # index in file order, whatever order the workers finished in
        shard, entries, b, r = results[o]
        scenes += [{**e, "shard": shard} for e in entries]
        bad += b
        repaired += r
    index = {"format": FORMAT, "version": VERSION, "source": str(src), "tolerance": tolerance,
             "scenes": scenes, "bad": [list(x) for x in bad],
             "repaired": [[name, notes] for name, notes in repaired]}
    tmp = out / (INDEX + ".tmp")
    tmp.write_text(json.dumps(index, indent=1))
    os.replace(tmp, out / INDEX)
    written = {Path(o).name for _, o in jobs}
    for stale in out.glob("shard_*.npz"):  # shards of an earlier, larger conversion into the same folder
        if stale.name not in written:
            stale.unlink()
    return index
