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


def _vid2world_release(tmp_path):
    """A tiny CSGO tree in the layout Vid2World reads (`data_dir/1-200/hdf5_dm_july2021_<n>.hdf5`), its split
    list (`test_split_subsample_50.txt`: one file name per line) and start indices (.npy of ints)."""
    data = tmp_path / "csgo"
    (data / "1-200").mkdir(parents=True)
    (data / "201-400").mkdir()
    frames = {}
    for k in (1, 2, 10, 27, 117, 250):
        folder = "1-200" if k <= 200 else "201-400"
        frames[k] = write_csgo(data / folder / f"hdf5_dm_july2021_{k}.hdf5", 12, k)[0][..., ::-1]  # RGB
    assets = tmp_path / "assets" / "long_rollout"
    assets.mkdir(parents=True)
    (assets / "test_split_subsample_50.txt").write_text(
        "hdf5_dm_july2021_27.hdf5\nhdf5_dm_july2021_250.hdf5\nhdf5_dm_july2021_2.hdf5\nhdf5_dm_july2021_10.hdf5\n")
    np.save(assets / "csgo_validation_start_indices_subsample_50.npy", np.array([3, 0, 5, 8, 99]))  # 5th unused
    return data, assets, frames


def test_published_split_list_and_start_indices_in_the_vid2world_layout(tmp_path):
    from dataclasses import replace

    from ttlab.worldmodel.presets import debug
    from ttlab.worldmodel.train import build_datasets

    data, assets, frames = _vid2world_release(tmp_path)
    cfg = replace(debug(), data=str(data), num_frames=4, frame_interval=1, num_workers=0,
                  val_list=str(assets / "test_split_subsample_50.txt"),
                  val_starts=str(assets / "csgo_validation_start_indices_subsample_50.npy"))
    train, val = build_datasets(cfg, None)
    names = lambda eps: [train.source.files[int(e)].name.split("_")[-1] for e in eps]  # noqa: E731
    assert names(train.episodes) == ["1.hdf5", "117.hdf5"]  # every unlisted file trains
    # Vid2World's order: sorted path strings (1-200/.._10 < 1-200/.._2 < 1-200/.._27 < 201-400/.._250)
    assert names(val.index_episode) == ["10.hdf5", "2.hdf5", "27.hdf5", "250.hdf5"]
    assert val.fixed_windows and val.index_start.tolist() == [3, 0, 5, 8] and len(val) == 4
    np.testing.assert_array_equal(val.source.frames(int(val.index_episode[0]), [3, 4, 5, 6]), frames[10][3:7])
    assert np.abs(val[2]["frames"].numpy() - (frames[27][5:9].transpose(0, 3, 1, 2) / 127.5 - 1)).max() < 1e-6
    # without start indices: the listed files are the validation episodes, windows enumerated as usual
    _, val2 = build_datasets(replace(cfg, val_starts=""), None)
    assert not val2.fixed_windows and len(val2) == 4 * (12 - 3)


def test_published_split_errors_name_the_file(tmp_path):
    from dataclasses import replace

    from ttlab.worldmodel.data.csgo import published_split, published_windows
    from ttlab.worldmodel.presets import debug
    from ttlab.worldmodel.train import build_datasets

    data, assets, _ = _vid2world_release(tmp_path)
    src = CSGOSource(data)
    lst = assets / "partial.txt"
    lst.write_text("hdf5_dm_july2021_2.hdf5\nhdf5_dm_july2021_4000.hdf5\n")
    with pytest.warns(UserWarning, match=r"partial\.txt: 1 of 2 listed files are not in"):
        train, val = published_split(src, lst)
    assert len(val) == 1 and len(train) == 5
    lst.write_text("hdf5_dm_july2021_4000.hdf5\n")
    with pytest.raises(DataError, match=r"partial\.txt: none of the 1 listed files"):
        published_split(src, lst)
    starts = assets / "short.npy"
    np.save(starts, np.array([0]))
    _, val = published_split(src, assets / "test_split_subsample_50.txt")
    with pytest.raises(DataError, match=r"short\.npy: 1 start indices for 4 validation episodes"):
        published_windows(src, val, starts, 4)
    np.save(starts, np.array([0, 0, 9, 0]))
    with pytest.raises(DataError, match=r"short\.npy: start index 2 = 9: a 4-frame window .*july2021_27\.hdf5"):
        published_windows(src, val, starts, 4)
    with pytest.raises(ValueError, match="--val-starts needs --val-list"):
        build_datasets(replace(debug(), data=str(data), val_starts=str(starts), num_workers=0), None)
