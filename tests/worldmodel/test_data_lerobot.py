"""LeRobot v2.1 and v3.0 readers on tiny datasets written in the upstream layouts (RT-1 fractal features)."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ttlab.worldmodel.data import DataError, WindowDataset, drop_bad
from ttlab.worldmodel.data.lerobot import LeRobotSource
from ttlab.worldmodel.data.sources import open_source
from ttlab.worldmodel.data.video import write_mp4

KEY = "observation.images.image"
H, W, FPS = 16, 20, 3
LENS = [5, 7]


def features():
    return {
        KEY: {"dtype": "video", "shape": [H, W, 3], "names": ["height", "width", "channel"],
              "info": {"video.fps": FPS, "video.codec": "h264", "video.pix_fmt": "yuv420p"}},
        "observation.state": {"dtype": "float32", "shape": [8], "names": None},
        "action": {"dtype": "float32", "shape": [7],
                   "names": ["x", "y", "z", "roll", "pitch", "yaw", "gripper"]},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    }


def frames_for(e, t):
    f = np.zeros((t, H, W, 3), np.uint8)
    f[:] = (np.arange(t) * 30 + 60 * e)[:, None, None, None] % 250
    return f


def actions_for(e, t):
    return (np.arange(t * 7, dtype=np.float32).reshape(t, 7) / 10 + e)


def rows_table(e, t, offset):
    return pa.table({
        "observation.state": pa.array(np.random.default_rng(e).normal(size=(t, 8)).astype(np.float32).tolist(),
                                      pa.list_(pa.float32())),
        "action": pa.array(actions_for(e, t).tolist(), pa.list_(pa.float32())),
        "timestamp": pa.array(np.arange(t, dtype=np.float32) / FPS),
        "frame_index": pa.array(np.arange(t), pa.int64()),
        "episode_index": pa.array([e] * t, pa.int64()),
        "index": pa.array(np.arange(t) + offset, pa.int64()),
        "task_index": pa.array([0] * t, pa.int64()),
    })


def info(version, data_path, video_path):
    return {"codebase_version": version, "robot_type": "google_robot", "total_episodes": len(LENS),
            "total_frames": sum(LENS), "total_tasks": 1, "total_videos": len(LENS), "total_chunks": 1,
            "chunks_size": 1000, "fps": FPS, "splits": {"train": f"0:{len(LENS)}"},
            "data_path": data_path, "video_path": video_path, "features": features()}


def write_v21(root):
    (root / "meta").mkdir(parents=True)
    (root / "meta/info.json").write_text(json.dumps(info(
        "v2.1", "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4")))
    lines, off = [], 0
    for e, t in enumerate(LENS):
        lines.append(json.dumps({"episode_index": e, "tasks": ["pick coke can"], "length": t}))
        (root / "data/chunk-000").mkdir(parents=True, exist_ok=True)
        pq.write_table(rows_table(e, t, off), root / f"data/chunk-000/episode_{e:06d}.parquet")
        write_mp4(root / f"videos/chunk-000/{KEY}/episode_{e:06d}.mp4", frames_for(e, t), fps=FPS)
        off += t
    (root / "meta/episodes.jsonl").write_text("\n".join(lines) + "\n")


def write_v30(root):
    (root / "meta/episodes/chunk-000").mkdir(parents=True)
    (root / "meta/info.json").write_text(json.dumps(info(
        "v3.0", "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4")))
    (root / "data/chunk-000").mkdir(parents=True)
    tables, eps, off = [], [], 0
    for e, t in enumerate(LENS):
        tables.append(rows_table(e, t, off))
        eps.append({"episode_index": e, "tasks": ["pick coke can"], "length": t,
                    "data/chunk_index": 0, "data/file_index": 0,
                    "dataset_from_index": off, "dataset_to_index": off + t,
                    f"videos/{KEY}/chunk_index": 0, f"videos/{KEY}/file_index": 0,
                    f"videos/{KEY}/from_timestamp": off / FPS, f"videos/{KEY}/to_timestamp": (off + t) / FPS,
                    "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        off += t
    pq.write_table(pa.concat_tables(tables), root / "data/chunk-000/file-000.parquet")
    pq.write_table(pa.Table.from_pylist(eps), root / "meta/episodes/chunk-000/file-000.parquet")
    allf = np.concatenate([frames_for(e, t) for e, t in enumerate(LENS)])
    write_mp4(root / f"videos/{KEY}/chunk-000/file-000.mp4", allf, fps=FPS)


@pytest.mark.parametrize("writer", [write_v21, write_v30])
def test_lerobot_fractal_layouts(tmp_path, writer):
    writer(tmp_path)
    src = open_source(tmp_path)
    assert isinstance(src, LeRobotSource) and src.image_key == KEY
    assert len(src) == 2 and src.action_dim == 7 and [src.length(i) for i in range(2)] == LENS
    for e, t in enumerate(LENS):
        ep = src[e]
        assert ep.frames.shape == (t, H, W, 3) and ep.states.shape == (t, 8)
        assert np.abs(ep.frames.astype(int) - frames_for(e, t)).mean() < 4
        np.testing.assert_allclose(ep.actions, actions_for(e, t))
    np.testing.assert_array_equal(src.frames(1, np.array([2, 4])), src[1].frames[[2, 4]])
    assert len(WindowDataset(src, 3, 2, split="all")) == sum(t - 4 for t in LENS)


def test_lerobot_bad_data(tmp_path):
    write_v21(tmp_path)
    (tmp_path / f"videos/chunk-000/{KEY}/episode_000001.mp4").unlink()
    src = LeRobotSource(tmp_path)
    with pytest.raises(DataError, match=r"episode 1: .*episode_000001\.mp4: video file not found"):
        src[1]
    kept, errors = drop_bad(src, skip_bad=True)
    assert len(kept) == 1 and len(errors) == 1
    lines = (tmp_path / "meta/episodes.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace('"length": 5', '"length": 6')
    (tmp_path / "meta/episodes.jsonl").write_text("\n".join(lines))
    with pytest.raises(DataError, match=r"episode 0: .*episode_000000\.parquet: length mismatch"):
        LeRobotSource(tmp_path).actions(0)
    with pytest.raises(DataError, match="image key"):
        LeRobotSource(tmp_path, image_key="observation.images.wrist")
