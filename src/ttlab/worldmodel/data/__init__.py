"""World-model data: episodes, readers for DINO-WM / LeRobot / CSGO / latents, training windows, PushT maker.

The contract (see DESIGN.md): an episode is uint8 frames (T, H, W, 3) + float32 actions (T, A) (+ states);
a sample is a window of frames every `frame_interval` steps with the raw actions between kept frames
concatenated and shifted by one (frame 0 gets zeros).
"""

from ttlab.worldmodel.data.episodes import (
    BaseSource,
    DataError,
    Episode,
    EpisodeSource,
    ListSource,
    SubsetSource,
    drop_bad,
)
from ttlab.worldmodel.data.windows import (
    ActionStats,
    WindowDataset,
    compute_action_stats,
    split_episodes,
    to_model_frames,
    window_actions,
    window_starts,
)

__all__ = [
    "ActionStats",
    "BaseSource",
    "DataError",
    "Episode",
    "EpisodeSource",
    "ListSource",
    "SubsetSource",
    "WindowDataset",
    "compute_action_stats",
    "drop_bad",
    "split_episodes",
    "to_model_frames",
    "window_actions",
    "window_starts",
]
