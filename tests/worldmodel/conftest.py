"""Shared world-model fixtures."""

from __future__ import annotations

from dataclasses import replace

import pytest


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    """A 4-step run of the debug preset: a real checkpoint for the eval / rollout / play commands."""
    from ttlab.worldmodel.presets import debug
    from ttlab.worldmodel.train import train

    root = tmp_path_factory.mktemp("wm")
    cfg = replace(debug(), root=str(root), run_name="t", max_steps=4, val_every=4, checkpoint_every=4, val_samples=2,
                  sample_steps=2)
    return train(cfg)["run_dir"]
