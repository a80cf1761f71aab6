"""Contract: configs parse from flags and presets, and round-trip through config.json unchanged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ttlab.common.config import ConfigError, from_dict, load_config, parse_config, save_config, to_dict


@dataclasses.dataclass
class Inner:
    """Nested section."""

    width: int = 8
    """hidden width"""
    acts: tuple[str, ...] = ("relu",)
    """activations"""


@dataclasses.dataclass
class Cfg:
    """A test config."""

    lr: float = 3e-4
    """learning rate"""
    steps: int = 100
    """number of steps"""
    out: Path = Path("runs")
    """output dir"""
    name: str = "x"
    """run name"""
    inner: Inner = dataclasses.field(default_factory=Inner)
    """nested"""


def debug() -> Cfg:
    return Cfg(steps=3, name="debug", inner=Inner(width=2))


PRESETS = {"debug": debug}


def test_flags_override_defaults():
    cfg = parse_config(Cfg, PRESETS, ["--lr", "0.1", "--steps", "7", "--inner.width", "5"])
    assert cfg.lr == 0.1 and cfg.steps == 7 and cfg.inner.width == 5 and cfg.name == "x"


def test_preset_is_the_starting_point_and_flags_win():
    cfg = parse_config(Cfg, PRESETS, ["--preset", "debug", "--steps", "9"])
    assert cfg.name == "debug" and cfg.inner.width == 2 and cfg.steps == 9
    cfg2 = parse_config(Cfg, PRESETS, ["--preset=debug"])
    assert cfg2 == debug()


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown preset 'nope'.*debug"):
        parse_config(Cfg, PRESETS, ["--preset", "nope"])


def test_wrong_flag_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="--no-such-flag"):
        parse_config(Cfg, PRESETS, ["--no-such-flag", "1"])


def test_config_json_round_trip(tmp_path):
    cfg = parse_config(Cfg, PRESETS, ["--preset", "debug", "--lr", "0.5", "--out", str(tmp_path)])
    save_config(cfg, tmp_path / "config.json")
    data = json.loads((tmp_path / "config.json").read_text())
    assert data["inner"]["width"] == 2 and data["out"] == str(tmp_path)
    back = load_config(Cfg, tmp_path / "config.json")
    assert back == cfg and isinstance(back.out, Path) and isinstance(back.inner.acts, tuple)


def test_from_dict_rejects_unknown_keys():
    d = to_dict(Cfg())
    d["bogus"] = 1
    with pytest.raises(ConfigError, match="bogus"):
        from_dict(Cfg, d)


def test_load_config_errors_name_the_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json"):
        load_config(Cfg, p)
    with pytest.raises(ConfigError, match="missing.json"):
        load_config(Cfg, tmp_path / "missing.json")
    p.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="bad.json: expected a JSON object, got list"):
        load_config(Cfg, p)
