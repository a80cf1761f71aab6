"""mp4 (H.264) and single-image reading/writing through PyAV, with errors that name the file.

Frames are counted in decode order from the start of the file, or, when reading from `start_time`
(LeRobot v3 files that hold many episodes back to back), by timestamp: frame k is the one at
`start_time + k / fps`.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

from ttlab.worldmodel.data.episodes import DataError


def write_mp4(path: str | Path, frames: np.ndarray, fps: float = 10, crf: int = 18) -> Path:
    """uint8 (T, H, W, 3) RGB -> H.264 yuv420p mp4 (frame i at time i / fps). H and W must be even."""
    import av  # deferred on purpose: PyAV is optional (only video files and images need it) and slow to import

    path = Path(path)
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"{path}: write_mp4 needs uint8 (T, H, W, 3) frames, got {frames.dtype} {frames.shape}")
    t, h, w, _ = frames.shape
    if h % 2 or w % 2:
        raise ValueError(f"{path}: H.264 yuv420p needs even height and width, got {h}x{w}")
    rate = Fraction(fps).limit_denominator(1001)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w") as box:
        st = box.add_stream("libx264", rate=rate)
        st.width, st.height, st.pix_fmt = w, h, "yuv420p"
        st.options = {"crf": str(crf)}
        for i in range(t):
            vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frames[i]), format="rgb24")
            vf.pts, vf.time_base = i, 1 / rate
            for pkt in st.encode(vf):
                box.mux(pkt)
        for pkt in st.encode():
            box.mux(pkt)
    return path


def read_frames(path: str | Path, indices: Sequence[int] | np.ndarray | None = None, *, start_time: float = 0.0,
                fps: float | None = None) -> np.ndarray:
    """Decode frames `indices` (counted from the frame at `start_time`) as uint8 (n, H, W, 3) RGB.

    `indices=None` decodes every frame to the end of the file. Decoding stops after the last index
    asked for. A file that ends before an index is a "length mismatch" `DataError`.
    """
    import av  # deferred on purpose: PyAV is optional (only video files and images need it) and slow to import

    path = Path(path)
    if not path.is_file():
        raise DataError("video file not found", path=path)
    want = None if indices is None else np.asarray(indices, dtype=np.int64).reshape(-1)
    last = None if want is None or want.size == 0 else int(want.max())
    wanted = None if want is None else set(want.tolist())
    got: dict[int, np.ndarray] = {}
    seen = 0
    try:
        with av.open(str(path)) as box:
            if not box.streams.video:
                raise DataError("no video stream", path=path)
            st = box.streams.video[0]
            by_time = start_time > 0
            if by_time:
                rate = float(fps or st.average_rate or st.guessed_rate or 0)
                if rate <= 0:
                    raise DataError("cannot read by timestamp: unknown frame rate", path=path)
                box.seek(int(start_time / st.time_base), stream=st, backward=True, any_frame=False)
            for fr in box.decode(st):
                if by_time:
                    if fr.time is None:
                        raise DataError("frame without timestamp", path=path)
                    k = round((fr.time - start_time) * rate)
                    if k < 0:
                        continue
                else:
                    k = seen
                seen = k + 1
                if last is not None and k > last:
                    break
                if wanted is None or k in wanted:
                    got[k] = fr.to_ndarray(format="rgb24")  # (H, W, 3)
                if last is not None and k == last:
                    break
    except av.error.FFmpegError as e:
        raise DataError(f"cannot decode video ({type(e).__name__}: {e})", path=path) from None
    if want is None:
        if not got:
            raise DataError("video has no frames" + (f" after {start_time:.3f} s" if start_time else ""), path=path)
        want = np.arange(max(got) + 1)
    missing = [int(k) for k in want if int(k) not in got]
    if missing:
        raise DataError(f"length mismatch: video ends after {seen} frames, "
                        f"frame {missing[0]} needed", path=path)
    if want.size == 0:
        return np.zeros((0, 0, 0, 3), np.uint8)
    return np.stack([got[int(k)] for k in want])  # (n, H, W, 3)


def decode_image(data: bytes, where: str | Path | None = None) -> np.ndarray:
    """PNG/JPEG bytes -> uint8 (H, W, 3) RGB."""
    import av  # deferred on purpose: PyAV is optional (only video files and images need it) and slow to import

    try:
        with av.open(io.BytesIO(data)) as box:
            return next(box.decode(video=0)).to_ndarray(format="rgb24")
    except (av.error.FFmpegError, StopIteration) as e:
        raise DataError(f"cannot decode image ({type(e).__name__}: {e})", path=where) from None
