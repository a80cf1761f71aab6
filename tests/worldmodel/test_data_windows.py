"""The window contract: indices, shifted concatenated actions, normalisation, split, stats JSON."""

import numpy as np
import pytest
import torch

from ttlab.worldmodel.data import ActionStats, DataError, Episode, ListSource, WindowDataset, split_episodes
from ttlab.worldmodel.data.windows import compute_action_stats, window_actions, window_starts


def make_eps(n=6, t=12, a=2, hw=4):
    eps = []
    for i in range(n):
        frames = np.zeros((t, hw, hw, 3), np.uint8)
        frames[:, 0, 0, 0] = np.arange(t)  # pixel encodes the raw step
        acts = (np.arange(t * a, dtype=np.float32).reshape(t, a) + 100 * i)
        eps.append(Episode(frames, acts))
    return eps


def test_window_actions_golden_shift_and_concat():
    acts = np.arange(20, dtype=np.float32).reshape(10, 2)
    w = window_actions(acts, start=1, num_frames=3, frame_interval=2)
    # frame 0 zeros; frame 1 <- raw actions 1,2; frame 2 <- raw actions 3,4
    np.testing.assert_array_equal(w, [[0, 0, 0, 0], [2, 3, 4, 5], [6, 7, 8, 9]])


def test_window_starts_respect_span():
    np.testing.assert_array_equal(window_starts(10, 3, 2), np.arange(6))  # last start 5: frames 5,7,9
    assert len(window_starts(4, 3, 2)) == 0


def test_item_frames_match_raw_steps_and_range():
    ds = WindowDataset(ListSource(make_eps()), num_frames=3, frame_interval=2, split="all")
    item = ds[7]
    e, s = item["episode"], item["start"]
    assert item["frames"].shape == (3, 3, 4, 4) and item["frames"].dtype == torch.float32
    raw = (item["frames"][:, 0, 0, 0] + 1) * 127.5
    torch.testing.assert_close(raw, torch.tensor([s, s + 2, s + 4], dtype=torch.float32))
    assert item["frames"].min() >= -1 and item["frames"].max() <= 1
    assert ds.action_dim == 4 and ds.raw_action_dim == 2
    st = ds.action_stats
    raw_a = ListSource(make_eps()).actions(e)
    expect = window_actions(st.normalize(raw_a), s, 3, 2)
    np.testing.assert_allclose(item["actions"].numpy(), expect, rtol=1e-6)
    assert (item["actions"][0] == 0).all()


def test_split_deterministic_disjoint_and_stats_from_train_only(tmp_path):
    tr, va = split_episodes(10, 0.3, seed=3)
    tr2, va2 = split_episodes(10, 0.3, seed=3)
    assert (tr == tr2).all() and (va == va2).all() and len(va) == 3
    assert set(tr).isdisjoint(va) and set(tr) | set(va) == set(range(10))
    src = ListSource(make_eps(10))
    path = tmp_path / "stats.json"
    train = WindowDataset(src, 3, 1, "train", 0.3, seed=3, action_stats=path)
    assert path.exists()
    expect = compute_action_stats([src.actions(e) for e in tr])
    np.testing.assert_allclose(train.action_stats.mean, expect.mean)
    val = WindowDataset(src, 3, 1, "val", 0.3, seed=3, action_stats=path)
    np.testing.assert_allclose(val.action_stats.std, train.action_stats.std)
    assert set(val.index_episode.tolist()) == set(va.tolist())
    loaded = ActionStats.load(path)
    np.testing.assert_allclose(loaded.mean, expect.mean, rtol=1e-6)


def test_stats_golden_numbers_and_constant_dim():
    st = compute_action_stats([np.array([[1.0, 5.0], [3.0, 5.0]], np.float32)])
    np.testing.assert_allclose(st.mean, [2.0, 5.0])
    np.testing.assert_allclose(st.std, [1.0, 1.0])  # second dim constant -> std 1


def test_bad_episode_errors_name_problem():
    with pytest.raises(DataError, match="length mismatch"):
        Episode(np.zeros((3, 2, 2, 3), np.uint8), np.zeros((4, 1), np.float32), name="ep7")
    with pytest.raises(DataError, match="uint8"):
        Episode(np.zeros((3, 2, 2, 3), np.float32), np.zeros((3, 1), np.float32))
    with pytest.raises(DataError, match="shorter"):
        WindowDataset(ListSource(make_eps(2, t=3)), num_frames=4, frame_interval=1, split="all")


def test_dataloader_batches():
    ds = WindowDataset(ListSource(make_eps()), 4, 1, "train", 0.2)
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=5, shuffle=True)))
    assert batch["frames"].shape == (5, 4, 3, 4, 4) and batch["actions"].shape == (5, 4, 2)
