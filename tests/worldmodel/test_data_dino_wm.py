"""DINO-WM reader on tiny files written in the upstream layouts (pusht_noise, point_maze/wall, deformable)."""

import pickle

import numpy as np
import pytest
import torch

from ttlab.worldmodel.data import DataError, WindowDataset, drop_bad
from ttlab.worldmodel.data.dino_wm import DinoWMSource
from ttlab.worldmodel.data.sources import open_source
from ttlab.worldmodel.data.video import write_mp4

LENS = [6, 9, 7]


def frames_for(i, t, hw=16):
    f = np.zeros((t, hw, hw, 3), np.uint8)
    f[:] = (np.arange(t) * 20 + 40 * i)[:, None, None, None] % 250
    return f


def write_pusht(root, lens=LENS, skip_video=None):
    n, tmax = len(lens), max(lens)
    (root / "obses").mkdir(parents=True)
    states = torch.zeros(n, tmax, 5)
    rel = torch.zeros(n, tmax, 2)
    for i, t in enumerate(lens):
        states[i, :t] = torch.randn(t, 5)
        rel[i, :t] = torch.arange(2 * t, dtype=torch.float32).reshape(t, 2) + i
        if i != skip_video:
            write_mp4(root / "obses" / f"episode_{i:03d}.mp4", frames_for(i, t))
    torch.save(states, root / "states.pth")
    torch.save(rel, root / "rel_actions.pth")
    torch.save(rel * 2, root / "abs_actions.pth")
    torch.save(torch.zeros(n, tmax, 2), root / "velocities.pth")
    with open(root / "seq_lengths.pkl", "wb") as f:
        pickle.dump(list(lens), f)


def test_pusht_layout_mp4_roundtrip(tmp_path):
    write_pusht(tmp_path)
    src = open_source(tmp_path)
    assert isinstance(src, DinoWMSource) and src.layout == "pusht"
    assert len(src) == 3 and [src.length(i) for i in range(3)] == LENS and src.action_dim == 2
    ep = src[1]
    assert ep.frames.shape == (9, 16, 16, 3) and ep.states.shape == (9, 5)
    assert np.abs(ep.frames.astype(int) - frames_for(1, 9)).mean() < 3  # lossy H.264
    np.testing.assert_array_equal(ep.actions, np.arange(18, dtype=np.float32).reshape(9, 2) + 1)
    np.testing.assert_array_equal(DinoWMSource(tmp_path, relative=False).actions(1), ep.actions * 2)
    ds = WindowDataset(src, 3, 2, split="all")
    assert sum(max(t - 4, 0) for t in LENS) == len(ds)


def test_pth_layout_point_maze_with_seq_lengths(tmp_path):
    (tmp_path / "obses").mkdir()
    lens = [5, 8]
    torch.save(torch.randn(2, 8, 4), tmp_path / "states.pth")
    torch.save(torch.randn(2, 8, 2), tmp_path / "actions.pth")
    torch.save(torch.tensor(lens), tmp_path / "seq_lengths.pth")
    for i in range(len(lens)):
        torch.save(torch.from_numpy(frames_for(i, 8)), tmp_path / "obses" / f"episode_{i:03d}.pth")
    src = DinoWMSource(tmp_path)
    assert src.layout == "pth" and src.length(0) == 5
    np.testing.assert_array_equal(src[0].frames, frames_for(0, 8)[:5])  # lossless
    np.testing.assert_array_equal(src.frames(1, np.array([2, 7])), frames_for(1, 8)[[2, 7]])


def test_pth_layout_wall_without_seq_lengths(tmp_path):
    (tmp_path / "obses").mkdir()
    torch.save(torch.randn(1, 4, 4), tmp_path / "states.pth")
    torch.save(torch.randn(1, 4, 2), tmp_path / "actions.pth")
    torch.save(torch.from_numpy(frames_for(0, 4)), tmp_path / "obses" / "episode_000.pth")
    assert DinoWMSource(tmp_path).length(0) == 4


def test_deformable_layout_float_rgba_frames(tmp_path):
    n, t, p = 2, 5, 3
    torch.save(torch.randn(n, t, p, 4), tmp_path / "states.pth")
    torch.save(torch.randn(n, t, 4), tmp_path / "actions.pth")
    for i in range(n):
        d = tmp_path / f"{i:06d}"
        d.mkdir()
        rgba = np.concatenate([frames_for(i, t), np.full((t, 16, 16, 1), 255, np.uint8)], -1)
        torch.save(torch.from_numpy(rgba.astype(np.float32)), d / "obses.pth")
    src = DinoWMSource(tmp_path)
    assert src.layout == "deformable" and src.action_dim == 4
    ep = src[1]
    assert ep.frames.dtype == np.uint8 and ep.states.shape == (t, p * 4)
    np.testing.assert_array_equal(ep.frames, frames_for(1, t))


def test_bad_data_named_and_skippable(tmp_path):
    write_pusht(tmp_path, skip_video=1)
    (tmp_path / "obses" / "episode_002.mp4").write_bytes(b"not a video" * 50)
    src = DinoWMSource(tmp_path)
    with pytest.raises(DataError, match=r"episode 1: .*episode_001\.mp4: video file not found"):
        src[1]
    with pytest.raises(DataError, match=r"episode 1: .*episode_001\.mp4"):
        drop_bad(src, skip_bad=False)
    kept, errors = drop_bad(src, skip_bad=True)
    assert len(kept) == 1 and len(errors) == 2 and "episode_002.mp4" in errors[1]
    assert len(WindowDataset(kept, 2, 1, split="all")) == LENS[0] - 1


def test_length_mismatch_and_wrong_dtype(tmp_path):
    write_pusht(tmp_path, lens=[6, 4])
    write_mp4(tmp_path / "obses" / "episode_001.mp4", frames_for(1, 2))  # shorter than seq_length 4
    src = DinoWMSource(tmp_path)
    with pytest.raises(DataError, match="length mismatch"):
        src.check(1)
    torch.save(torch.zeros(2, 6, 2, dtype=torch.int64), tmp_path / "rel_actions.pth")
    with pytest.raises(DataError, match=r"rel_actions\.pth.*floating point"):
        DinoWMSource(tmp_path)
    with pytest.raises(DataError, match="not a DINO-WM dataset"):
        DinoWMSource(tmp_path / "obses")


def _pth_layout(root, lens, tmax=8):
    (root / "obses").mkdir()
    torch.save(torch.randn(len(lens), tmax, 4), root / "states.pth")
    torch.save(torch.randn(len(lens), tmax, 2), root / "actions.pth")
    for i in range(len(lens)):
        torch.save(torch.from_numpy(frames_for(i, tmax)), root / "obses" / f"episode_{i:03d}.pth")


@pytest.mark.parametrize("as_list", [[5, 8], [torch.tensor(5), torch.tensor(8)], (5, 8)])
def test_seq_lengths_pth_saved_as_a_python_list_is_read_with_a_warning_naming_the_file(tmp_path, as_list):
    _pth_layout(tmp_path, [5, 8])
    torch.save(as_list, tmp_path / "seq_lengths.pth")  # what torch.save(list_of_lengths) writes
    with pytest.warns(UserWarning, match=r"seq_lengths\.pth.*Python (list|tuple)"):
        src = DinoWMSource(tmp_path)
    assert [src.length(0), src.length(1)] == [5, 8]
    torch.save({"lengths": [5, 8]}, tmp_path / "seq_lengths.pth")
    with pytest.raises(DataError, match=r"seq_lengths\.pth: expected a tensor or a list of ints, found dict"):
        DinoWMSource(tmp_path)
    torch.save([5, 9], tmp_path / "seq_lengths.pth")
    with pytest.warns(UserWarning), pytest.raises(DataError, match=r"episode 1 has length 9, outside 1\.\.8"):
        DinoWMSource(tmp_path)


def test_episode_cache_is_bounded_by_bytes_and_count():
    from ttlab.worldmodel.data.episodes import EpisodeCache

    ep = np.zeros((10, 4, 4, 3), np.uint8)  # 480 bytes
    c = EpisodeCache(-1, max_bytes=2 * ep.nbytes)
    for e in range(3):
        c.put(e, ep.copy())
    assert len(c) == 2 and c.get(0) is None and c.get(2) is not None and c.nbytes == 2 * ep.nbytes
    c.put(9, np.zeros((100, 4, 4, 3), np.uint8))  # larger than the whole budget: not kept, nothing evicted
    assert c.get(9) is None and len(c) == 2
    counted = EpisodeCache(1, max_bytes=None)
    counted.put(0, ep)
    counted.put(1, ep)
    assert len(counted) == 1 and counted.get(1) is not None
    assert not EpisodeCache(0).enabled and not EpisodeCache(-1, max_bytes=0).enabled


def test_default_cache_decodes_every_video_once_when_the_dataset_fits(tmp_path, monkeypatch):
    import ttlab.worldmodel.data.dino_wm as dw

    write_pusht(tmp_path)
    decodes = []
    real = dw.read_frames
    monkeypatch.setattr(dw, "read_frames", lambda path, idx: decodes.append(path.name) or real(path, idx))
    ds = WindowDataset(DinoWMSource(tmp_path), 3, 1, split="all")  # default: sized by memory, no count limit
    for _ in range(2):
        for i in range(len(ds)):
            ds[i]
    assert sorted(decodes) == [f"episode_{i:03d}.mp4" for i in range(3)]  # each video once, over 2 epochs
    decodes.clear()
    one = DinoWMSource(tmp_path, cache_bytes=16 * 16 * 3 * 9)  # room for one 9-frame episode only
    for e in (0, 0, 1, 1, 0):
        one.frames(e, [0])
    assert decodes == ["episode_000.mp4", "episode_001.mp4", "episode_000.mp4"]  # a hit while kept; 1 evicts 0
