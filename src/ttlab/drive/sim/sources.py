"""Scene pools for the simulator's own commands (render, demo, benchmark): thin wrappers over
`ttlab.drive.scenarios` (procedural generator, Waymo-format JSON loader, `build_pool`)."""

from __future__ import annotations

from pathlib import Path

import torch

from ttlab.drive.scenarios import Scenario, ScenarioPool, build_pool, generate, load_scenario


def to_pool(scenes: list[Scenario], device: torch.device | str) -> ScenarioPool:
    return build_pool(scenes, device=device)


def procedural_scenes(n: int, seed: int = 0) -> tuple[list[Scenario], str]:
    """n procedural scenes, one per seed, cycling through the road families."""
    return [generate(seed=seed + i) for i in range(n)], "procedural"


def json_scene(path: str | Path) -> Scenario:
    """One Waymo/GPUDrive-format JSON scene (clear error naming file and field when malformed)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"scene file not found: {path}")
    return load_scenario(path)
