"""CSGO reader (DIAMOND layout): one HDF5 per episode, frame_{i}_x BGR uint8, frame_{i}_y 51-D action."""

import h5py
import numpy as np
import pytest

from ttlab.worldmodel.data import DataError, WindowDataset, drop_bad
from ttlab.worldmodel.data.csgo import CSGOSource
from ttlab.worldmodel.data.sources import open_source


def write_csgo(path, t, seed, frame_dtype=np.uint8):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 255, (t, 15, 28, 3)).astype(frame_dtype)
    y = rng.random((t, 51)).astype(np.float32)
    with h5py.File(path, "w") as f:
        for i in range(t):
            f[f"frame_{i}_x"] = x[i]
            f[f"frame_{i}_y"] = y[i]
            f[f"frame_{i}_xaux"] = np.zeros(54, np.float32)
            f[f"frame_{i}_helperarr"] = np.zeros(2, np.float32)
    return x, y


def test_csgo_reads_rgb_and_51d_actions(tmp_path):
    data = [write_csgo(tmp_path / f"hdf5_dm_july2021_{k}.hdf5", 6 + k, k) for k in (1, 2, 10)]
    src = open_source(tmp_path)
    assert isinstance(src, CSGOSource) and [p.name for p in src.files][-1] == "hdf5_dm_july2021_10.hdf5"
    ep = src[2]
    np.testing.assert_array_equal(ep.frames, data[2][0][..., ::-1])  # BGR on disk -> RGB
    np.testing.assert_array_equal(ep.actions, data[2][1])
    assert src.action_dim == 51 and len(WindowDataset(src, 2, 1, split="all")) == (7 - 1) + (8 - 1) + (16 - 1)


def test_csgo_bad_files(tmp_path):
    write_csgo(tmp_path / "hdf5_dm_july2021_1.hdf5", 4, 0)
    write_csgo(tmp_path / "hdf5_dm_july2021_2.hdf5", 4, 1, frame_dtype=np.float32)
    (tmp_path / "hdf5_dm_july2021_3.hdf5").write_bytes(b"junk")
    src = CSGOSource(tmp_path)
    with pytest.raises(DataError, match=r"episode 1: .*july2021_2\.hdf5: frame_0_x must be uint8"):
        src[1]
    with pytest.raises(DataError, match=r"episode 2: .*july2021_3\.hdf5: cannot open HDF5"):
        src.check(2)
    kept, errors = drop_bad(src, skip_bad=True)
    assert len(kept) == 1 and len(errors) == 2
