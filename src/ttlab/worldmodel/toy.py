"""A tiny synthetic world for tests and smoke runs: a square whose velocity is the action.

Each episode moves a coloured square on a dark background; the action at step t is the (dx, dy)
velocity in pixels that takes frame t to frame t+1 (clipped at the borders). A model that ignores the
action cannot predict where the square goes, so this doubles as a learnability test of action injection.
Episodes follow the data contract (uint8 frames (T, H, W, 3), float32 actions (T, A)).
"""

from __future__ import annotations

import numpy as np

from ttlab.worldmodel.data.episodes import Episode, ListSource


def moving_square_episode(rng: np.random.Generator, length: int = 24, size: int = 16, square: int = 4,
                          max_speed: int = 2) -> Episode:
    pos = rng.integers(0, size - square, size=2).astype(np.int64)  # (2,) top-left (y, x)
    color = rng.integers(128, 256, size=3).astype(np.uint8)
    frames = np.full((length, size, size, 3), 20, dtype=np.uint8)  # (T, H, W, 3)
    actions = np.zeros((length, 2), dtype=np.float32)  # (T, 2): velocity (dx, dy) taking t -> t+1
    vel = rng.integers(-max_speed, max_speed + 1, size=2)
    for t in range(length):
        y, x = pos
        frames[t, y:y + square, x:x + square] = color
        if rng.random() < 0.3:
            vel = rng.integers(-max_speed, max_speed + 1, size=2)
        nxt = pos + vel
        vel = np.where((nxt < 0) | (nxt > size - square), -vel, vel)  # bounce off the walls
        actions[t] = (vel[1], vel[0])
        pos = pos + vel
    return Episode(frames=frames, actions=actions, name="toy")


def moving_square_source(num_episodes: int = 64, length: int = 24, size: int = 16, seed: int = 0) -> ListSource:
    rng = np.random.default_rng(seed)
    return ListSource([moving_square_episode(rng, length, size) for _ in range(num_episodes)])
