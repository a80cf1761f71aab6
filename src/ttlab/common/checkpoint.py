"""Checkpoints: tensors in safetensors, everything else in JSON, both written atomically.

A checkpoint named `STEM` is two files, `STEM.safetensors` and `STEM.json`. Each is written to a
temporary file in the same directory, fsynced, then renamed over the target, and the JSON (written
last) records the size and SHA-256 of the tensor file it belongs to. A crash mid-write leaves either
the previous complete checkpoint, the new complete one, or (a crash between the two renames) new
tensors beside old metadata, which `load_checkpoint` detects by the hash and refuses by name: a torn
pair is never loaded silently.

Nested state (a model's `state_dict`, an optimizer's `state_dict` with its int-keyed `state`, RNG
states) goes through `pack_state` / `unpack_state`: tensors are pulled out into a flat dict keyed by
their path, the rest stays as a JSON skeleton.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ttlab.common.errors import UserError

_TENSOR = "__tensor__"
_TUPLE = "__tuple__"
_INTKEYS = "__intkeys__"
_BYTES = "__bytes__"


class CheckpointError(UserError, RuntimeError):
    """A missing, torn or mismatched checkpoint; the message names the file (a user error at the CLI)."""


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a prefix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def pack_state(obj: Any, prefix: str = "") -> tuple[dict[str, torch.Tensor], Any]:
    """Split a nested structure into (flat tensors, JSON skeleton)."""
    tensors: dict[str, torch.Tensor] = {}

    def walk(v: Any, path: str) -> Any:
        if isinstance(v, torch.Tensor):
            key = path or "_"
            tensors[key] = v.detach().cpu().contiguous()
            return {_TENSOR: key}
        if isinstance(v, dict):
            if v and all(isinstance(k, int) for k in v):
                return {_INTKEYS: {str(k): walk(x, f"{path}.{k}" if path else str(k)) for k, x in v.items()}}
            return {str(k): walk(x, f"{path}.{k}" if path else str(k)) for k, x in v.items()}
        if isinstance(v, tuple):
            return {_TUPLE: [walk(x, f"{path}.{i}") for i, x in enumerate(v)]}
        if isinstance(v, list):
            return [walk(x, f"{path}.{i}") for i, x in enumerate(v)]
        if isinstance(v, bytes):
            return {_BYTES: v.hex()}
        if isinstance(v, (str, int, float, bool)) or v is None:
            return v
        if hasattr(v, "item") and callable(v.item):  # numpy scalar
            return v.item()
        if hasattr(v, "tolist"):  # numpy array
            return v.tolist()
        raise TypeError(f"cannot checkpoint value of type {type(v).__name__} at {path or '<root>'}")

    skeleton = walk(obj, prefix)
    return tensors, skeleton


def unpack_state(tensors: dict[str, torch.Tensor], skeleton: Any) -> Any:
    """Inverse of `pack_state`."""

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            if _TENSOR in v and len(v) == 1:
                return tensors[v[_TENSOR]]
            if _TUPLE in v and len(v) == 1:
                return tuple(walk(x) for x in v[_TUPLE])
            if _INTKEYS in v and len(v) == 1:
                return {int(k): walk(x) for k, x in v[_INTKEYS].items()}
            if _BYTES in v and len(v) == 1:
                return bytes.fromhex(v[_BYTES])
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(skeleton)


def save_checkpoint(stem: str | Path, state: dict[str, Any]) -> Path:
    """Save a nested `state` (tensors anywhere inside) as `stem.safetensors` + `stem.json`."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    tensors, skeleton = pack_state(state)
    st_path = stem.with_name(stem.name + ".safetensors")
    js_path = stem.with_name(stem.name + ".json")
    # Shared storage (tied weights) must be cloned for safetensors.
    tensors = {k: v.clone() for k, v in tensors.items()}
    fd, tmp = tempfile.mkstemp(prefix=f".{st_path.name}.", suffix=".tmp", dir=stem.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        digest = _sha256(Path(tmp))
        os.replace(tmp, st_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    meta = {"format": "ttlab-ckpt-1", "tensor_file_bytes": st_path.stat().st_size, "tensor_file_sha256": digest,
            "state": skeleton}
    atomic_write_text(js_path, json.dumps(meta) + "\n")
    return js_path


def load_checkpoint(stem: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint saved by `save_checkpoint`; raises `CheckpointError` naming the bad file."""
    stem = Path(str(stem).removesuffix(".json").removesuffix(".safetensors"))
    st_path = stem.with_name(stem.name + ".safetensors")
    js_path = stem.with_name(stem.name + ".json")
    if not js_path.exists():
        raise CheckpointError(f"checkpoint metadata not found: {js_path}")
    if not st_path.exists():
        raise CheckpointError(f"checkpoint tensors not found: {st_path}")
    try:
        meta = json.loads(js_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{js_path}: corrupt JSON ({e})") from e
    if not isinstance(meta, dict) or meta.get("format") != "ttlab-ckpt-1":
        raise CheckpointError(f"{js_path}: not a ttlab checkpoint")
    missing = [k for k in ("tensor_file_bytes", "state") if k not in meta]
    if missing:
        raise CheckpointError(f"{js_path}: checkpoint metadata lacks {', '.join(missing)}")
    size = st_path.stat().st_size
    if size != meta["tensor_file_bytes"]:
        raise CheckpointError(
            f"{st_path}: size {size} does not match {meta['tensor_file_bytes']} recorded in {js_path.name}"
        )
    if "tensor_file_sha256" in meta and _sha256(st_path) != meta["tensor_file_sha256"]:
        raise CheckpointError(
            f"{st_path}: contents do not match the SHA-256 recorded in {js_path.name} (a torn save: tensors and "
            "metadata come from different saves)"
        )
    try:
        tensors = load_file(str(st_path), device=str(map_location))
    except Exception as e:  # safetensors raises its own error types
        raise CheckpointError(f"{st_path}: cannot read tensors ({e})") from e
    return unpack_state(tensors, meta["state"])


def latest_checkpoint(directory: str | Path, name: str = "latest") -> Path | None:
    """`directory/name` if a complete checkpoint is there, else None."""
    stem = Path(directory) / name
    if stem.with_name(name + ".json").exists() and stem.with_name(name + ".safetensors").exists():
        return stem
    return None


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch RNG states, checkpointable with `save_checkpoint`."""
    py = random.getstate()
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "python": [py[0], list(py[1]), py[2]],
        "numpy": [
            np_state[0],
            torch.from_numpy(np_state[1].astype("int64")),
            int(np_state[2]),
            int(np_state[3]),
            float(np_state[4]),
        ],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    v, internal, gauss = state["python"]
    random.setstate((v, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype("uint32"), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
