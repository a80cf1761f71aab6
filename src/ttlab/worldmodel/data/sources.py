"""Open any supported dataset directory as an episode source, by name or by what the directory holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ttlab.worldmodel.data.csgo import CSGOSource
from ttlab.worldmodel.data.dino_wm import DinoWMSource
from ttlab.worldmodel.data.episodes import DataError, EpisodeSource
from ttlab.worldmodel.data.latents import LatentSource
from ttlab.worldmodel.data.lerobot import LeRobotSource

FORMATS = ("auto", "dino_wm", "lerobot", "csgo", "latents")


def detect_format(path: str | Path) -> str:
    """dino_wm | lerobot | csgo | latents, from the files in `path`."""
    p = Path(path)
    if not p.exists():
        raise DataError("dataset path does not exist", path=p)
    if not p.is_dir():
        raise DataError("expected a dataset directory, found a file", path=p)
    if (p / "latents.json").is_file():
        return "latents"
    if (p / "meta" / "info.json").is_file():
        return "lerobot"
    if (p / "obses").is_dir() or (p / "000000" / "obses.pth").is_file() or (p / "train" / "obses").is_dir():
        return "dino_wm"
    if next(p.rglob("*.hdf5"), None) is not None or next(p.rglob("*.h5"), None) is not None:
        return "csgo"
    raise DataError("not a recognised dataset (DINO-WM: obses/ + *.pth; LeRobot: meta/info.json; "
                    "CSGO: *.hdf5; latents: latents.json)", path=p)


def open_source(path: str | Path, format: str = "auto", **kwargs: Any) -> EpisodeSource:
    """The source reading `path`; `kwargs` go to the reader (e.g. `image_key=`, `relative=`, `cache=`)."""
    if format not in FORMATS:
        raise DataError(f"unknown dataset format {format!r}; one of {', '.join(FORMATS)}")
    kind = detect_format(path) if format == "auto" else format
    if kind == "dino_wm":
        return DinoWMSource(path, **kwargs)
    if kind == "lerobot":
        return LeRobotSource(path, **kwargs)
    if kind == "csgo":
        return CSGOSource(path, **kwargs)
    return LatentSource(path, **kwargs)
