"""Dataclass configs parsed with tyro, with named presets selectable on the command line.

A preset is a plain function returning a config instance (torchtitan style)::

    def debug() -> TrainConfig: return TrainConfig(steps=10)
    cfg = parse_config(TrainConfig, {"debug": debug}, argv)

`--preset NAME` picks the starting point; every other flag overrides a field of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import tyro

from ttlab.common.errors import UserError, one_line

T = TypeVar("T")


class ConfigError(UserError):
    """A bad flag, preset name or config file; the message names what is wrong."""


def _tyro_error_text(captured: str) -> str:
    """tyro's error box as one line: its title and message, without the help footer and rules."""
    lines = []
    for raw in captured.splitlines():
        line = one_line(raw).strip("|").strip()  # box edges (unicode or, off a terminal, ASCII)
        if not line or re.fullmatch(r"[-=_+|\s]+", line) or line.startswith("For full helptext"):
            continue
        lines.append(line)
    if len(lines) > 1 and lines[1].lower().startswith(lines[0].lower()):  # the box title repeats the message
        lines = lines[1:]
    return " ".join(lines) or "invalid arguments"


def _tyro_cli(cls: type[T], default: T, args: list[str], prog: str | None, desc: str) -> T:
    """tyro.cli, with a parse error raised as ConfigError (one line) instead of printed as a box."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return tyro.cli(cls, default=default, args=args, prog=prog, description=desc)
    except SystemExit as e:
        if e.code in (0, None):  # --help: tyro printed it to stdout
            sys.stderr.write(err.getvalue())
            raise
        raise ConfigError(_tyro_error_text(err.getvalue())) from None


def _split_preset(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """Pull `--preset NAME` / `--preset=NAME` out of argv."""
    rest: list[str] = []
    preset = None
    i = 0
    argv = list(argv)
    while i < len(argv):
        a = argv[i]
        if a == "--preset":
            if i + 1 >= len(argv):
                raise ConfigError("--preset needs a name")
            preset = argv[i + 1]
            i += 2
            continue
        if a.startswith("--preset="):
            preset = a.split("=", 1)[1]
            i += 1
            continue
        rest.append(a)
        i += 1
    return preset, rest


def parse_config(
    cls: type[T],
    presets: Mapping[str, Callable[[], T]] | None = None,
    argv: Sequence[str] | None = None,
    prog: str | None = None,
    description: str | None = None,
    default_preset: str | None = None,
) -> T:
    """Parse `argv` into an instance of dataclass `cls`, starting from a named preset."""
    presets = dict(presets or {})
    argv = list(sys.argv[1:] if argv is None else argv)
    name, rest = _split_preset(argv)
    name = name or default_preset
    if name is not None:
        if not presets:
            raise ConfigError(f"--preset {name}: this command has no presets")
        if name not in presets:
            known = ", ".join(sorted(presets)) or "(none)"
            raise ConfigError(f"unknown preset {name!r}; known presets: {known}")
        default = presets[name]()
        if not isinstance(default, cls):
            raise ConfigError(f"preset {name!r} returned {type(default).__name__}, expected {cls.__name__}")
    else:
        default = cls()
    desc = description or (cls.__doc__ or "").strip()
    if presets:
        desc += "\n\npresets (--preset NAME): " + ", ".join(sorted(presets))
    return _tyro_cli(cls, default, rest, prog, desc)


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-safe dict of a (possibly nested) dataclass config."""

    def conv(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, Path):
            return str(v)
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {str(k): conv(x) for k, x in v.items()}
        return v

    return conv(cfg)


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """Rebuild a dataclass config from `to_dict` output; unknown keys are an error that names them."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    renamed = {old: new for old, new in getattr(cls, "RENAMED", {}).items() if old in data and new not in data}
    if renamed:  # a config.json written before a field got its current name
        data = {renamed.get(k, k): v for k, v in data.items()}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{cls.__name__}: unknown config keys {unknown}")
    kwargs: dict[str, Any] = {}
    for k, v in data.items():
        default_val = getattr(cls(), k)  # type: ignore[call-arg]
        if dataclasses.is_dataclass(default_val) and isinstance(v, Mapping):
            v = from_dict(type(default_val), v)
        elif isinstance(default_val, Path) and v is not None:
            v = Path(v)
        elif isinstance(default_val, tuple) and isinstance(v, list):
            v = tuple(v)
        kwargs[k] = v
    return cls(**kwargs)


def save_config(cfg: Any, path: str | Path) -> None:
    # deferred on purpose: checkpoint imports torch, which parsing a config does not need
    from ttlab.common.checkpoint import atomic_write_text

    atomic_write_text(Path(path), json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n")


def read_config_dict(path: str | Path) -> dict[str, Any]:
    """The JSON object in a saved `config.json`, or a `ConfigError` naming what is wrong with the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"config file not found: {path}") from e
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def load_config(cls: type[T], path: str | Path) -> T:
    return from_dict(cls, read_config_dict(path))
