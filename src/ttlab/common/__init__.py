"""Plumbing shared by the three systems: config, run dirs, logging, checkpoints, device, seeding."""

from ttlab.common.checkpoint import load_checkpoint, pack_state, save_checkpoint, unpack_state
from ttlab.common.config import parse_config
from ttlab.common.device import resolve_device, seed_everything
from ttlab.common.logging import Logger, progress
from ttlab.common.runs import RunDir, git_revision, make_run_dir

__all__ = [
    "Logger",
    "RunDir",
    "git_revision",
    "load_checkpoint",
    "make_run_dir",
    "pack_state",
    "parse_config",
    "progress",
    "resolve_device",
    "save_checkpoint",
    "seed_everything",
    "unpack_state",
]
