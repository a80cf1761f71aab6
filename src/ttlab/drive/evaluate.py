"""`ttlab drive eval`: evaluate a trained policy checkpoint.

Modes:
- self_play: every controlled agent is driven by the policy (the training setting);
- human_replay: only the ego (first controllable vehicle) is driven; everyone else replays its log;
- trial: multi-trial episodes (goal_behavior = trial, K trials); reports `trial_{k}_score`,
  `trial_{k}_goal_rate` and `ada_delta_trial_{k}_minus_0` for every k.

Writes the metrics as JSON (`--out`) and, with `--video`, a rendered rollout of env 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from ttlab.common.checkpoint import atomic_write_text
from ttlab.common.device import resolve_device, seed_everything
from ttlab.drive.policy.dist import sample
from ttlab.drive.sim.env import EnvConfig

MODES = ("self_play", "human_replay", "trial")


@dataclass
class EvalConfig:
    """Evaluate a drive policy checkpoint."""

    checkpoint: str = ""
    """Checkpoint stem, e.g. runs/drive/<run>/checkpoints/latest."""
    mode: str = "self_play"
    """self_play | human_replay | trial."""
    scenarios: str = "procedural:n=64,seed=1000"
    """Scene source (held-out procedural seed by default)."""
    num_envs: int = 32
    """Parallel envs."""
    max_agents: int = 32
    """Agent slots per env."""
    k_trials: int = 2
    """Trials per episode (trial mode)."""
    trial_length: int = 91
    """Ticks per trial (trial mode) / per episode (other modes)."""
    hidden_goal: bool = False
    """Hidden-goal scenes (trial mode)."""
    episodes: int = 2
    """Episodes (of K trials in trial mode) to run per env."""
    partner_slots: int = 63
    """Partner slots (must match training)."""
    road_slots: int = 200
    """Road slots (must match training)."""
    greedy: bool = False
    """Take the most likely action instead of sampling."""
    seed: int = 0
    """Seed."""
    device: str = "auto"
    """auto | cpu | cuda."""
    out: Path = Path("runs/drive/eval.json")
    """Metrics JSON."""
    video: Path | None = None
    """Optional video (.mp4/.gif) of env 0."""


def env_config(cfg: EvalConfig) -> EnvConfig:
    if cfg.mode not in MODES:
        raise ValueError(f"--mode {cfg.mode!r}: expected one of {', '.join(MODES)}")
    common = dict(num_envs=cfg.num_envs, max_agents=cfg.max_agents, partner_slots=cfg.partner_slots,
                  road_slots=cfg.road_slots, collision_behavior="remove", offroad_behavior="remove")
    if cfg.mode == "trial":
        return EnvConfig(goal_behavior="trial", k_trials=cfg.k_trials, trial_length=cfg.trial_length,
                         hidden_goal=cfg.hidden_goal, **common)
    return EnvConfig(goal_behavior="trial", k_trials=1, trial_length=cfg.trial_length,
                     control_mode="ego_only" if cfg.mode == "human_replay" else "all", **common)


@torch.no_grad()
def evaluate(cfg: EvalConfig) -> dict[str, float]:
    from ttlab.drive.rollout import _flat
    from ttlab.drive.train import load_policy, make_env

    if not cfg.checkpoint:
        raise ValueError("--checkpoint is required (a stem like runs/drive/<run>/checkpoints/latest)")
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    env = make_env(env_config(cfg), cfg.scenarios, device, cfg.seed)
    policy = load_policy(cfg.checkpoint, env, device).eval()
    recorder = None
    if cfg.video is not None:
        from ttlab.drive.render import Recorder

        recorder = Recorder(env, 0, 384)
    N = env.num_envs * env.num_agents
    obs = _flat(env.reset()).float()
    state = policy.initial_state(N, device)
    term = torch.ones(N, dtype=torch.bool, device=device)
    removed = torch.zeros(N, dtype=torch.bool, device=device)
    K = cfg.k_trials if cfg.mode == "trial" else 1
    steps = cfg.episodes * K * cfg.trial_length
    if recorder is not None:
        recorder.capture()
    for _ in range(steps):
        logits, _, state = policy.forward_eval(obs, state, term, removed)
        action = logits.argmax(-1) if cfg.greedy and not policy.continuous else sample(logits, policy.continuous)
        res = env.step(action.reshape(env.num_envs, env.num_agents, *action.shape[1:]))
        obs = _flat(res.obs).float()
        term = (env.ep_step == 0).unsqueeze(1).expand(env.num_envs, env.num_agents).reshape(-1)
        removed = _flat(env.state.removed | env.state.stopped) & _flat(res.controlled)
        if recorder is not None:
            recorder.capture()
    out = {k: float(v) for k, v in env.metrics().items()}
    out = {"mode": cfg.mode, "checkpoint": cfg.checkpoint, **out}
    atomic_write_text(cfg.out, json.dumps(out, indent=2) + "\n")
    if recorder is not None:
        from ttlab.drive.render import write_video

        out["video"] = str(write_video(recorder.frames, cfg.video))
    return out


def main(argv: list[str]) -> int:
    from ttlab.common.config import parse_config

    cfg = parse_config(EvalConfig, {"debug": debug}, argv, prog="ttlab drive eval")
    out = evaluate(cfg)
    keys = [k for k in out if k.startswith(("trial_", "ada_delta_trial_")) and k.count("_") <= 5] or list(out)
    print(json.dumps({k: out[k] for k in keys if k in out}, indent=1))
    print(f"wrote {cfg.out}")
    return 0


def debug() -> EvalConfig:
    """Tiny trial evaluation matching the `debug` training preset."""
    return EvalConfig(mode="trial", scenarios="procedural:n=4,agents=4", num_envs=2, max_agents=4, k_trials=2,
                      trial_length=8, episodes=1, partner_slots=8, road_slots=32, device="cpu")
