"""A policy from a `ttlab drive train` checkpoint (or a shipped `pretrained:<name>`), built for an env's layout."""

from __future__ import annotations

from pathlib import Path

import torch

from ttlab.common.checkpoint import load_checkpoint
from ttlab.common.config import from_dict
from ttlab.drive.config import PolicyConfig
from ttlab.drive.policy import build_policy


def env_horizon(env) -> int:
    """Steps in one episode: K x trial_length in trial mode, else episode_length."""
    cfg = getattr(env, "cfg", None)
    if cfg is None:
        return int(env.horizon)
    if cfg.goal_behavior == "trial":
        return cfg.k_trials * cfg.trial_length
    return cfg.episode_length


def is_continuous(env) -> bool:
    cfg = getattr(env, "cfg", None)
    return bool(cfg is not None and getattr(cfg, "action", "discrete") == "continuous")


def load_policy(stem: str | Path, env, device: torch.device) -> torch.nn.Module:
    """A policy from a `ttlab drive train` checkpoint, built for `env`'s observation layout."""
    ck = load_checkpoint(stem, "cpu")
    if "policy" not in ck or "policy_config" not in ck:
        raise ValueError(f"{stem}: not a drive policy checkpoint (no 'policy' / 'policy_config')")
    pcfg = from_dict(PolicyConfig, ck["policy_config"])
    policy = build_policy(pcfg, env.layout, env.num_actions, is_continuous(env), horizon=int(ck["horizon"]))
    try:
        policy.load_state_dict(ck["policy"])
    except RuntimeError as e:
        raise ValueError(f"{stem}: weights do not fit this env's observation layout ({e})") from e
    return policy.to(device)
