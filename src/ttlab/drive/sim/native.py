"""The native CPU kernels of the sim (csrc/*.c): built once with the system C compiler, loaded by ctypes.

    lib = native.load()              # raises NativeUnavailable (with the compiler's message) if it cannot build
    native.observe(grid, scene, inputs, settings)   # same as observe.observe, CPU tensors only
    native.contacts(...)             # same as contact.contacts

The shared object is cached under $TTLAB_CACHE (default ~/.cache/ttlab)/native, keyed by a hash of the
sources and the flags, and written atomically, so concurrent first uses do not race. The torch
implementations (observe.py, contact.py) stay the reference and the CUDA path; observations agree
to 1e-5 and contact flags exactly (tests/drive/test_sim_native.py).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

from ttlab.drive.sim.contact import COLLISION_RADIUS
from ttlab.drive.sim.grid import RoadGrid
from ttlab.drive.sim.observe import PARTNER_BASE_DIM, ObsInputs, ObsSettings, ego_features, partner_extra

SRCS = [Path(__file__).with_name("csrc") / name for name in ("observe.c", "contact.c")]
HEADERS = [Path(__file__).with_name("csrc") / "knn.h"]
FLAGS = ["-O3", "-std=c99", "-fPIC", "-shared", "-fopenmp", "-fno-math-errno", "-ffp-contract=off"]
MAX_CANDIDATES = 1024  # observe.c: per-agent road-candidate and nearest-partner buffers
MAX_COLLISION_CANDIDATES = 64  # contact.c: MAX_KC
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_error: str | None = None


class NativeUnavailable(RuntimeError):
    """The native kernel cannot be built or loaded here (no C compiler, or it failed)."""


def cache_dir() -> Path:
    return Path(os.environ.get("TTLAB_CACHE", Path.home() / ".cache" / "ttlab")) / "native"


def _compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise NativeUnavailable("no C compiler found (set CC, or install gcc); use EnvConfig.backend='torch'")
    return cc


def build() -> Path:
    """Compile csrc/*.c into the cache (if not there yet); returns the shared object's path."""
    cc = _compiler()
    src = b"".join(p.read_bytes() for p in (*SRCS, *HEADERS))
    key = hashlib.sha256(src + " ".join([cc, *FLAGS, platform.machine()]).encode()).hexdigest()[:16]
    out = cache_dir() / f"drive-sim-{key}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        res = subprocess.run([cc, *FLAGS, *map(str, SRCS), "-o", tmp, "-lm"], capture_output=True, text=True)
        if res.returncode != 0:
            raise NativeUnavailable(f"compiling {', '.join(map(str, SRCS))} with {cc} failed:\n{res.stderr.strip()[-2000:]}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def load() -> ctypes.CDLL:
    """The loaded kernel library (built on first use). Raises NativeUnavailable."""
    global _lib, _error
    with _lock:
        if _lib is not None:
            return _lib
        if _error is not None:
            raise NativeUnavailable(_error)
        try:
            lib = ctypes.CDLL(str(build()))
        except (NativeUnavailable, OSError) as e:
            _error = str(e)
            raise NativeUnavailable(_error) from e
        f = lib.ttlab_observe_partner_road
        i64, f32, i32, ptr = ctypes.c_int64, ctypes.c_float, ctypes.c_int32, ctypes.c_void_p
        f.argtypes = [i64, i64] + [ptr] * 7 + [i64] + [ptr] * 4 + [i32, i64, i64, ptr, ptr, ptr, f32, i64, f32, i64, f32,
                                               i64, f32, ptr, i64, i64, i64, i32]
        f.restype = None
        f = lib.ttlab_contacts
        f.argtypes = [i64, i64] + [ptr] * 9 + [i32, i64, i64, ptr, ptr, ptr, f32, i64, f32, i64, f32, ptr, ptr, i32]
        f.restype = None
        _lib = lib
        return lib


def available() -> bool:
    try:
        load()
        return True
    except NativeUnavailable:
        return False


def supports(grid: RoadGrid, road_slots: int, partner_slots: int, collision_candidates: int) -> bool:
    """Whether the kernels cover this configuration: road candidates are kept in cell order, so Kc <= slots;
    the per-agent selection buffers hold MAX_CANDIDATES partners and MAX_COLLISION_CANDIDATES colliders."""
    kc = grid.cell_cand.shape[2]
    return (kc <= road_slots and kc <= MAX_CANDIDATES and partner_slots <= MAX_CANDIDATES
            and collision_candidates <= MAX_COLLISION_CANDIDATES
            and grid.cell_cand.dtype in (torch.int16, torch.int32))


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


def observe(grid: RoadGrid, scene: torch.Tensor, inp: ObsInputs, cfg: ObsSettings,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """observe.observe on the native kernel: (E, A, obs_dim) float32, CPU tensors only; written into
    `out` (contiguous (E, A, obs_dim) float32) when given. The struct is unpacked here, at the C boundary."""
    lib = load()
    if inp.x.device.type != "cpu":
        raise ValueError(f"the native observation kernel runs on CPU tensors, got {inp.x.device}")
    E, A = inp.x.shape
    c, s = torch.cos(inp.heading), torch.sin(inp.heading)
    ego = ego_features(inp, c, s, cfg)  # (E, A, ego_dim)
    ego_dim = ego.shape[-1]
    cols = partner_extra(inp, cfg)
    pdim = PARTNER_BASE_DIM + len(cols)
    partner_offset, road_offset = ego_dim, ego_dim + cfg.partner_slots * pdim
    obs_dim = road_offset + cfg.road_slots * 7
    if out is None:
        obs = torch.empty(E, A, obs_dim, dtype=torch.float32)
    elif out.shape != (E, A, obs_dim) or out.dtype != torch.float32 or not out.is_contiguous():
        raise ValueError(f"native observe: out must be a contiguous float32 {(E, A, obs_dim)} tensor, "
                         f"got {tuple(out.shape)} {out.dtype}")
    else:
        obs = out
    obs[..., :ego_dim] = ego
    f32 = [t.contiguous().float() for t in (inp.x, inp.y, inp.heading, inp.speed, inp.length, inp.width)]
    extra = torch.stack(cols).float().contiguous() if cols else None  # (n_extra, E, A)
    vis = inp.visible.contiguous().to(torch.uint8)
    sc = scene.contiguous().long()
    cand = grid.cell_cand.contiguous()
    seg, org = grid.seg_table.contiguous().float(), grid.origin.contiguous().float()
    gx, gy = grid.gx.contiguous().long(), grid.gy.contiguous().long()
    inv = 1.0 / grid.pos_scale
    lib.ttlab_observe_partner_road(
        E, A, *(_ptr(t) for t in f32), None if extra is None else _ptr(extra), len(cols), _ptr(vis), _ptr(sc), _ptr(seg), _ptr(cand),
        int(cand.dtype == torch.int32), cand.shape[1], cand.shape[2], _ptr(org), _ptr(gx), _ptr(gy),
        float(grid.cell), grid.num_seg_slots, inv, cfg.partner_slots, float(cfg.partner_radius), cfg.road_slots,
        float(cfg.road_radius * inv), _ptr(obs), obs_dim, partner_offset, road_offset, torch.get_num_threads())
    return obs  # (E, A, obs_dim)


def contacts(grid: RoadGrid, scene: torch.Tensor, x: torch.Tensor, y: torch.Tensor, heading: torch.Tensor,
             length: torch.Tensor, width: torch.Tensor, visible: torch.Tensor, *,
             candidates: int) -> tuple[torch.Tensor, torch.Tensor]:
    """contact.contacts on the native kernel: collided, offroad (E, A) bool, CPU tensors only."""
    lib = load()
    if x.device.type != "cpu":
        raise ValueError(f"the native contact kernel runs on CPU tensors, got {x.device}")
    E, A = x.shape
    f32 = [t.contiguous().float() for t in (x, y, heading, length, width)]
    vis = visible.contiguous().to(torch.uint8)
    sc = scene.contiguous().long()
    cand = grid.edge_cand.contiguous()
    seg, org = grid.seg_table.contiguous().float(), grid.origin.contiguous().float()
    gx, gy = grid.gx.contiguous().long(), grid.gy.contiguous().long()
    collided = torch.empty(E, A, dtype=torch.bool)
    offroad = torch.empty(E, A, dtype=torch.bool)
    lib.ttlab_contacts(
        E, A, *(_ptr(t) for t in f32), _ptr(vis), _ptr(sc), _ptr(seg), _ptr(cand), int(cand.dtype == torch.int32),
        cand.shape[1], cand.shape[2], _ptr(org), _ptr(gx), _ptr(gy), float(grid.cell), grid.num_seg_slots,
        float(grid.pos_scale), candidates, COLLISION_RADIUS, _ptr(collided), _ptr(offroad), torch.get_num_threads())
    return collided, offroad
