"""Whether bf16 autocast is used on CPU: measured, overridable, and the trainer falls back to float32 with a warning."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

from ttlab.common import device
from ttlab.worldmodel.presets import pusht_cpu_debug
from ttlab.worldmodel.train import resolve_precision


def test_the_measured_speedup_is_a_positive_ratio():
    s = device.cpu_bf16_speedup()
    assert s > 0 and s == device.cpu_bf16_speedup()  # measured once per process


@pytest.mark.parametrize("speedup, ok", [(0.01, False), (0.9, False), (1.0, True), (4.0, True)])
def test_bf16_is_kept_only_where_it_is_not_slower(monkeypatch, speedup, ok):
    monkeypatch.delenv("TTLAB_CPU_BF16", raising=False)
    monkeypatch.setattr(device, "cpu_bf16_speedup", lambda: speedup)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert device.cpu_bf16_ok("thing") is ok
    assert any("thing" in str(w.message) and "float32" in str(w.message) for w in caught) is (not ok)


@pytest.mark.parametrize("forced", ["0", "1"])
def test_the_environment_overrides_the_measurement(monkeypatch, forced):
    monkeypatch.setenv("TTLAB_CPU_BF16", forced)
    monkeypatch.setattr(device, "cpu_bf16_speedup", lambda: pytest.fail("measured despite the override"))
    assert device.cpu_bf16_ok("thing") is (forced == "1")


def test_the_world_model_trains_in_float32_on_a_cpu_without_bf16_units(monkeypatch):
    monkeypatch.delenv("TTLAB_CPU_BF16", raising=False)
    cfg = pusht_cpu_debug()
    assert cfg.precision == "bf16-mixed"
    monkeypatch.setattr(device, "cpu_bf16_speedup", lambda: 0.01)
    with pytest.warns(UserWarning, match="bf16-mixed.*float32"):
        assert resolve_precision(cfg, "cpu") == "32-true"
    assert resolve_precision(cfg, "gpu") == "bf16-mixed"  # CUDA keeps what it asked for
    assert resolve_precision(replace(cfg, precision="auto"), "cpu") == "32-true"
    monkeypatch.setattr(device, "cpu_bf16_speedup", lambda: 5.0)
    assert resolve_precision(cfg, "cpu") == "bf16-mixed"
