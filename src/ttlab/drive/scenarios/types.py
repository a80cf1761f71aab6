"""The scenario contract shared by every scenario source and the simulator.

A `Scenario` is one scene in numpy (what loaders and the generator produce, what the cache stores).
A `ScenarioPool` is many scenes padded into device tensors (what the simulator samples from).

Units: metres, radians, seconds; logs at `dt` = 0.1 s, T steps (91 for Waymo-style scenes).
Invalid log steps carry valid = False (positions there are meaningless; Waymo files use -1e4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

# Road element types; the id is the index + 1 (0 = padding). The policy one-hots the id.
ROAD_TYPES: tuple[str, ...] = (
    "lane", "road_line", "road_edge", "stop_sign", "crosswalk", "speed_bump", "driveway",
)
NUM_ROAD_TYPES = len(ROAD_TYPES) + 1  # with padding id 0
ROAD_TYPE_ID = {name: i + 1 for i, name in enumerate(ROAD_TYPES)}

AGENT_TYPES: tuple[str, ...] = ("vehicle", "pedestrian", "cyclist", "other")
AGENT_TYPE_ID = {name: i for i, name in enumerate(AGENT_TYPES)}


@dataclass
class Scenario:
    """One scene. N agents, T log steps, S road segments (polylines cut into straight segments)."""

    name: str
    pos: np.ndarray  # (N, T, 2) float32 logged positions
    heading: np.ndarray  # (N, T) float32 logged headings (rad)
    vel: np.ndarray  # (N, T, 2) float32 logged velocities (m/s)
    valid: np.ndarray  # (N, T) bool
    length: np.ndarray  # (N,) float32
    width: np.ndarray  # (N,) float32
    agent_type: np.ndarray  # (N,) int8, AGENT_TYPE_ID
    goal: np.ndarray  # (N, 2) float32 goal position
    expert: np.ndarray  # (N,) bool, mark_as_expert (log-replay only, never policy-controlled)
    seg: np.ndarray  # (S, 4) float32 segments x0, y0, x1, y1
    seg_type: np.ndarray  # (S,) int8 ROAD_TYPE_ID
    seg_road: np.ndarray  # (S,) int32 index of the polyline (road element) a segment came from
    dt: float = 0.1
    # Optional: per-agent lane route (for "new goal ahead on the lane"), padded by repeating the end.
    route: np.ndarray | None = None  # (N, R, 2) float32
    # Optional: hidden-goal candidates (the true one is drawn per episode by the simulator).
    goal_candidates: np.ndarray | None = None  # (N, M, 2) float32
    # Optional: alternative logs of the same scene per partner style (e.g. cautious, aggressive).
    style_names: tuple[str, ...] = ()
    style_pos: np.ndarray | None = None  # (Y, N, T, 2)
    style_heading: np.ndarray | None = None  # (Y, N, T)
    style_vel: np.ndarray | None = None  # (Y, N, T, 2)
    style_valid: np.ndarray | None = None  # (Y, N, T)
    metadata: dict = field(default_factory=dict)

    @property
    def num_agents(self) -> int:
        return int(self.pos.shape[0])

    @property
    def num_steps(self) -> int:
        return int(self.pos.shape[1])

    @property
    def num_segments(self) -> int:
        return int(self.seg.shape[0])


@dataclass
class ScenarioPool:
    """P scenes padded to N agents, T steps, S segments, as tensors on one device.

    Padding agents have valid = False at every step and exists = False; padding segments type 0.
    """

    names: list[str]
    pos: torch.Tensor  # (P, N, T, 2)
    heading: torch.Tensor  # (P, N, T)
    vel: torch.Tensor  # (P, N, T, 2)
    valid: torch.Tensor  # (P, N, T) bool
    exists: torch.Tensor  # (P, N) bool (a real agent of that scene)
    length: torch.Tensor  # (P, N)
    width: torch.Tensor  # (P, N)
    agent_type: torch.Tensor  # (P, N) long
    goal: torch.Tensor  # (P, N, 2)
    expert: torch.Tensor  # (P, N) bool
    seg: torch.Tensor  # (P, S, 4)
    seg_type: torch.Tensor  # (P, S) long
    num_segments: torch.Tensor  # (P,) long
    route: torch.Tensor | None = None  # (P, N, R, 2)
    goal_candidates: torch.Tensor | None = None  # (P, N, M, 2)
    style_pos: torch.Tensor | None = None  # (P, Y, N, T, 2)
    style_heading: torch.Tensor | None = None  # (P, Y, N, T)
    style_vel: torch.Tensor | None = None  # (P, Y, N, T, 2)
    style_valid: torch.Tensor | None = None  # (P, Y, N, T)
    dt: float = 0.1

    @property
    def size(self) -> int:
        return len(self.names)
