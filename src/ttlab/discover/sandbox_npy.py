"""A strict `.npy` reader for bytes a hostile program produced (pure function, no file access).

`np.load` trusts the header: a header claiming 2^40 elements makes it allocate before noticing the data
is short (MemoryError in the parent), and it accepts structured dtypes. `parse_npy` accepts exactly what
`np.save` writes for a plain numeric array: format 1.0/2.0/3.0, a dict header of `descr` (bool, int,
uint or float, little-endian or byte-sized), `fortran_order` and `shape` (<= 8 non-negative dims), and
a data section of EXACTLY prod(shape) * itemsize bytes, checked in Python integers before anything is
allocated. Anything else raises `NpyError` with what is wrong.
"""

from __future__ import annotations

import math
import re

import numpy as np

MAGIC = b"\x93NUMPY"
MAX_HEADER = 65536
MAX_DIMS = 8
_HEADER = re.compile(
    r"\{'descr':\s*'(?P<descr>[<|][biuf]\d{1,2})',\s*'fortran_order':\s*(?P<fo>True|False),\s*"
    r"'shape':\s*\((?P<shape>[0-9,\s]{0,200})\),?\s*\}\s*$"
)
_ALLOWED = {"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8"}


class NpyError(ValueError):
    """The bytes are not a plain numeric array in np.save's format."""


def parse_npy(buf: bytes | bytearray | memoryview, max_elements: int) -> np.ndarray:
    """Decode `np.save` bytes into a fresh array; raises NpyError on anything unexpected."""
    buf = bytes(buf)
    if len(buf) < 10 or buf[:6] != MAGIC:
        raise NpyError("not an .npy file (bad magic)")
    major = buf[6]
    if major == 1:
        hlen, start = int.from_bytes(buf[8:10], "little"), 10
    elif major in (2, 3):
        if len(buf) < 12:
            raise NpyError("truncated .npy header")
        hlen, start = int.from_bytes(buf[8:12], "little"), 12
    else:
        raise NpyError(f"unknown .npy format version {major}")
    if hlen > MAX_HEADER or start + hlen > len(buf):
        raise NpyError(f".npy header length {hlen} exceeds the data ({len(buf)} bytes) or {MAX_HEADER}")
    try:
        header = buf[start:start + hlen].decode("latin1" if major < 3 else "utf8")
    except UnicodeDecodeError as e:
        raise NpyError(".npy header is not text") from e
    m = _HEADER.match(header.strip())
    if not m:
        raise NpyError(f".npy header is not a plain numeric array header: {header[:120]!r}")
    descr = m.group("descr")
    if descr not in _ALLOWED:
        raise NpyError(f".npy dtype {descr!r} not allowed (need bool/int/uint/float, little-endian)")
    dims = [d.strip() for d in m.group("shape").split(",") if d.strip()]
    if len(dims) > MAX_DIMS:
        raise NpyError(f".npy shape has {len(dims)} dims (limit {MAX_DIMS})")
    shape = tuple(int(d) for d in dims)
    count = math.prod(shape)
    if count > max_elements:
        raise NpyError(f".npy shape {shape} has {count} elements (limit {max_elements})")
    dtype = np.dtype(descr)
    data = len(buf) - start - hlen
    if data != count * dtype.itemsize:
        raise NpyError(f".npy shape {shape} needs {count * dtype.itemsize} data bytes, file has {data}")
    arr = np.frombuffer(buf, dtype=dtype, count=count, offset=start + hlen)
    return arr.reshape(shape, order="F" if m.group("fo") == "True" else "C").copy()
