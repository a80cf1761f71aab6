"""Episodes and the sources that serve them: the contract every reader meets.

An episode is `frames: uint8 (T, H, W, 3)` + `actions: float32 (T, A)` (+ optional `states: (T, S)`).
A source is an indexed collection of episodes that can also hand out parts of one (a few frames, all
actions) without decoding the rest, which is what random-access windows need. Every reading problem
is a `DataError` whose message names the episode and the file: `episode 3: .../episode_003.mp4: ...`.
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ttlab.common.logging import progress


class DataError(ValueError):
    """Bad or missing data. The message reads `episode E: PATH: problem` (each part when known)."""

    def __init__(self, problem: str, *, episode: Any = None, path: str | Path | None = None):
        self.problem, self.episode, self.path = problem, episode, path
        where = ([f"episode {episode}"] if episode is not None else []) + ([str(path)] if path is not None else [])
        super().__init__(": ".join([*where, problem]))

    def at(self, episode: Any) -> DataError:
        """The same error tagged with the episode it happened in (an existing tag is kept)."""
        if self.episode is not None:
            return self
        return DataError(self.problem, episode=episode, path=self.path)


@dataclass
class Episode:
    """One episode in memory; construction validates dtypes, shapes and lengths."""

    frames: np.ndarray  # uint8 (T, H, W, 3)
    actions: np.ndarray  # float32 (T, A)
    states: np.ndarray | None = None  # float32 (T, S)
    name: str = ""

    def __post_init__(self) -> None:
        who = self.name or None
        f, a = np.asarray(self.frames), np.asarray(self.actions)
        if f.dtype != np.uint8:
            raise DataError(f"frames must be uint8 (T, H, W, 3), got dtype {f.dtype}", episode=who)
        if f.ndim != 4 or f.shape[-1] != 3:
            raise DataError(f"frames must have shape (T, H, W, 3), got {f.shape}", episode=who)
        if not np.issubdtype(a.dtype, np.floating):
            raise DataError(f"actions must be floating point (T, A), got dtype {a.dtype}", episode=who)
        if a.ndim != 2:
            raise DataError(f"actions must have shape (T, A), got {a.shape}", episode=who)
        if len(f) != len(a):
            raise DataError(f"length mismatch: {len(f)} frames but {len(a)} actions", episode=who)
        s = self.states
        if s is not None:
            s = np.asarray(s, np.float32).reshape(len(np.asarray(s)), -1)  # (T, S)
            if len(s) != len(f):
                raise DataError(f"length mismatch: {len(f)} frames but {len(s)} states", episode=who)
        self.frames, self.actions, self.states = f, a.astype(np.float32, copy=False), s

    def __len__(self) -> int:
        return len(self.frames)


@runtime_checkable
class EpisodeSource(Protocol):
    """What `WindowDataset`, the codec trainer and the encoder read. `frames` of a latent source
    (`is_latent`) are float (n, C, h, w) latents instead of uint8 pixels."""

    is_latent: bool
    action_dim: int

    def __len__(self) -> int: ...

    def length(self, e: int) -> int: ...

    def frames(self, e: int, idx: Sequence[int] | np.ndarray) -> np.ndarray: ...

    def actions(self, e: int) -> np.ndarray: ...

    def states(self, e: int) -> np.ndarray | None: ...

    def check(self, e: int) -> None: ...


class BaseSource:
    """Defaults shared by the readers: bounds checks, whole-episode reads, `check` = read it all."""

    is_latent = False
    action_dim = 0
    action_extent: float | None = None
    """Side of the square workspace the frames image when every action is an (x, y) point of it, x along the
    columns and y along the rows (PushT's PD target: 512 world units); None: actions are not image positions."""

    def __len__(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def length(self, e: int) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def frames(self, e: int, idx: Sequence[int] | np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def actions(self, e: int) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def states(self, e: int) -> np.ndarray | None:
        return None

    def _episode(self, e: int) -> int:
        n = len(self)
        if not -n <= e < n:
            raise IndexError(f"episode {e} out of range: the dataset has {n} episodes")
        return e % n

    def _frame_idx(self, e: int, idx: Sequence[int] | np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        t = self.length(e)
        if idx.size and (idx.min() < 0 or idx.max() >= t):
            raise IndexError(f"episode {e}: frame indices {idx.min()}..{idx.max()} outside 0..{t - 1}")
        return idx

    def __getitem__(self, e: int) -> Episode:
        e = self._episode(e)
        try:
            frames = self.frames(e, np.arange(self.length(e)))
            return Episode(frames, self.actions(e), self.states(e), name=str(e))
        except DataError as err:
            raise err.at(e) from None

    def __iter__(self):
        for e in range(len(self)):
            yield self[e]

    def check(self, e: int) -> None:
        """Read episode `e` completely; raise a `DataError` naming it and its file if anything is wrong."""
        self[e]


class ListSource(BaseSource):
    """Episodes already in memory (tests, the toy world, small generated sets)."""

    def __init__(self, episodes: Sequence[Episode]):
        self.episodes = list(episodes)
        if not self.episodes:
            raise DataError("no episodes")
        dims = sorted({ep.actions.shape[1] for ep in self.episodes})
        if len(dims) > 1:
            raise DataError(f"episodes have different action widths {dims}")
        self.action_dim = dims[0]

    def __len__(self) -> int:
        return len(self.episodes)

    def length(self, e: int) -> int:
        return len(self.episodes[e])

    def frames(self, e: int, idx: Sequence[int] | np.ndarray) -> np.ndarray:
        return self.episodes[e].frames[self._frame_idx(e, idx)]  # (n, H, W, 3)

    def actions(self, e: int) -> np.ndarray:
        return self.episodes[e].actions  # (T, A)

    def states(self, e: int) -> np.ndarray | None:
        return self.episodes[e].states

    def __getitem__(self, e: int) -> Episode:
        return self.episodes[self._episode(e)]


class SubsetSource(BaseSource):
    """Some episodes of another source, renumbered 0..n-1; other attributes pass through."""

    def __init__(self, source: EpisodeSource, episodes: Sequence[int] | np.ndarray):
        self.source = source
        self.episodes = np.asarray(episodes, dtype=np.int64)
        self.is_latent, self.action_dim = source.is_latent, source.action_dim

    def __getattr__(self, name: str) -> Any:
        if name == "source" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.source, name)

    def __len__(self) -> int:
        return len(self.episodes)

    def _src(self, e: int) -> int:
        return int(self.episodes[self._episode(e)])

    def length(self, e: int) -> int:
        return self.source.length(self._src(e))

    def frames(self, e: int, idx: Sequence[int] | np.ndarray) -> np.ndarray:
        return self.source.frames(self._src(e), idx)

    def actions(self, e: int) -> np.ndarray:
        return self.source.actions(self._src(e))

    def states(self, e: int) -> np.ndarray | None:
        return self.source.states(self._src(e))

    def __getitem__(self, e: int):
        return self.source[self._src(e)]

    def check(self, e: int) -> None:
        self.source.check(self._src(e))


def default_cache_bytes(readers: int = 1, fraction: float = 0.25) -> int:
    """A decode-cache budget per reader process: `fraction` of the memory available now, shared by `readers`
    processes (the main process or each DataLoader worker holds its own cache)."""
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume 8 GiB
        avail = 8 << 30
    return int(avail * fraction / max(readers, 1))


class EpisodeCache:
    """Least-recently-used decoded episodes, bounded by a count (`size`; -1 = no count limit, 0 disables) and by
    the bytes they hold (`max_bytes`; None = no byte limit). With `size=-1` the cache is sized by memory: it
    keeps every episode of a dataset that fits the budget (each video decoded once per reader), and as many
    as fit otherwise. An episode larger than the whole budget is not kept."""

    def __init__(self, size: int, max_bytes: int | None = None):
        self.size = -1 if int(size) < 0 else int(size)
        self.max_bytes = None if max_bytes is None else max(int(max_bytes), 0)
        self.nbytes = 0
        self._items: OrderedDict[int, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def enabled(self) -> bool:
        return self.size != 0 and self.max_bytes != 0

    def get(self, e: int) -> np.ndarray | None:
        x = self._items.get(e)
        if x is not None:
            self._items.move_to_end(e)
        return x

    def put(self, e: int, x: np.ndarray) -> None:
        if not self.enabled or (self.max_bytes is not None and x.nbytes > self.max_bytes):
            return
        old = self._items.pop(e, None)
        self.nbytes -= 0 if old is None else old.nbytes
        self._items[e] = x
        self.nbytes += x.nbytes
        while (self.size >= 0 and len(self._items) > self.size) or \
                (self.max_bytes is not None and self.nbytes > self.max_bytes):
            _, dropped = self._items.popitem(last=False)
            self.nbytes -= dropped.nbytes


def drop_bad(source: EpisodeSource, skip_bad: bool = True,
             show_progress: bool | None = False) -> tuple[EpisodeSource, list[str]]:
    """Read every episode once (`check`); return (the good episodes, one message per bad one).

    With `skip_bad=False` the first bad episode raises its `DataError` (naming episode and file).
    Skipped episodes are counted on stderr; a dataset with no good episode is an error.
    """

    keep: list[int] = []
    errors: list[str] = []
    with progress(len(source), "check episodes", disable=None if show_progress is None else not show_progress) as bar:
        for e in range(len(source)):
            try:
                source.check(e)
            except DataError as err:
                if not skip_bad:
                    raise err.at(e) from None
                errors.append(str(err.at(e)))
            else:
                keep.append(e)
            bar.advance(1)
    if not errors:
        return source, errors
    if not keep:
        raise DataError(f"all {len(source)} episodes are bad; first: {errors[0]}")
    print(f"skipped {len(errors)} of {len(source)} episodes with bad data; first: {errors[0]}", file=sys.stderr)
    return SubsetSource(source, keep), errors
