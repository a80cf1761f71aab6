"""`ttlab drive ...` command tree. Each command parses its own dataclass config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ttlab.common.cli import dispatch
from ttlab.common.config import parse_config
from ttlab.common.device import resolve_device
from ttlab.common.flags import at_least
from ttlab.common.logging import console
from ttlab.common.outdir import writable_parent
from ttlab.drive.config import EnvConfig, GoalBehaviour, TrainConfig
from ttlab.drive.evaluate import EvalConfig, evaluate
from ttlab.drive.evaluate import main as eval_main
from ttlab.drive.presets import TRAIN_PRESETS
from ttlab.drive.render import rollout_frames, write_video
from ttlab.drive.scenarios.convert_cmd import main as convert_main
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.sources import json_scene, procedural_scenes, to_pool
from ttlab.drive.train import train


@dataclass
class RenderConfig:
    """Render a top-down video of one env: a procedural scene or a Waymo-format JSON file."""

    scene: str = "procedural"
    """'procedural' or the path of a Waymo/GPUDrive-format JSON scene."""
    out: Path = Path("runs/drive/render.mp4")
    """Output video (.mp4 or .gif)."""
    actions: Literal["replay", "random"] = "replay"
    """replay (every agent follows its log) | random (policy agents take random actions)."""
    steps: int = 90
    """Ticks to render."""
    goal_behavior: GoalBehaviour = "respawn"
    """respawn | new_goal | stop | trial."""
    k_trials: int = 2
    """Trials per episode when goal_behavior=trial."""
    trial_length: int = 45
    """Ticks per trial when goal_behavior=trial."""
    seed: int = 0
    """Scene and action seed."""
    size: int = 512
    """Frame size in pixels."""
    fps: int = 10
    """Frames per second."""
    device: str = "auto"
    """auto | cpu | cuda."""
    checkpoint: str | None = None
    """A policy drives instead (`--actions` is then ignored): a checkpoint stem or `pretrained:<name>`, e.g.
    pretrained:selfplay. The rollout is `ttlab drive eval` with a video: one episode of env 0; its metrics are
    written beside the video (.json)."""
    mode: Literal["self_play", "human_replay"] = "self_play"
    """With --checkpoint: self_play (every vehicle is the policy's) | human_replay (one ego, the others replay their
    logs, `--k-trials` trials)."""


def render_main(argv: list[str]) -> int:
    cfg = parse_config(RenderConfig, None, argv, prog="ttlab drive render")
    at_least(cfg, ("steps", "k_trials", "trial_length", "fps"), 1)
    at_least(cfg, ("size",), 16)
    writable_parent("--out", cfg.out)
    if cfg.checkpoint is not None:
        return _render_policy(cfg)
    device = resolve_device(cfg.device)
    scenes = procedural_scenes(1, cfg.seed)[0] if cfg.scene == "procedural" else [json_scene(cfg.scene)]
    env_cfg = EnvConfig(num_envs=1, max_agents=128, goal_behavior=cfg.goal_behavior, k_trials=cfg.k_trials,
                        trial_length=cfg.trial_length, episode_length=max(cfg.steps + 1, 2),
                        control_mode="replay" if cfg.actions == "replay" else "all")
    env = DriveEnv(env_cfg, to_pool(scenes, device), device=device, seed=cfg.seed)
    frames = rollout_frames(env, cfg.steps, cfg.actions, size=cfg.size, seed=cfg.seed)
    path = write_video(frames, cfg.out, cfg.fps)
    print(f"wrote {path} ({len(frames)} frames)")
    return 0


def _render_policy(cfg: RenderConfig) -> int:
    """A checkpoint's policy drives the scene for one episode (`ttlab drive eval` with a video)."""
    scenes = f"procedural:n=1,agents=8,seed={cfg.seed + 1000}" if cfg.scene == "procedural" else cfg.scene
    out = Path(cfg.out)
    m = evaluate(EvalConfig(checkpoint=cfg.checkpoint, mode=cfg.mode, scenarios=scenes, num_envs=1, episodes=1,
                            k_trials=cfg.k_trials if cfg.mode == "human_replay" else None, seed=cfg.seed,
                            device=cfg.device, out=out.with_suffix(".json"), video=out))
    print(f"wrote {out} ({cfg.mode}, goal rate {m['trial_0_goal_rate']:.3f}, "
          f"collision {m['trial_0_collision_rate']:.3f}, offroad {m['trial_0_offroad_rate']:.3f})")
    return 0


def train_main(argv: list[str]) -> int:
    cfg = parse_config(TrainConfig, TRAIN_PRESETS, argv, prog="ttlab drive train", default_preset="default")
    out = train(cfg)
    keys = [k for k in ("env/score", "env/goal_rate", "losses/approx_kl", "charts/SPS") if k in out]
    console.print(f"done: {out['run_dir']} update {out['update']} " + " ".join(f"{k}={out[k]:.4g}" for k in keys))
    return 0


COMMANDS: dict = {
    # name: (handler(argv) -> int, one-line help); commands are added as they are built.
    "render": (render_main, "render a top-down video of a procedural or JSON scene (logs or random actions)"),
    "convert": (convert_main, "convert a folder of Waymo/GPUDrive JSON scenes into a fast-loading scenario cache"),
    "train": (train_main, f"train a policy with PPO (--preset {'|'.join(TRAIN_PRESETS)})"),
    "eval": (eval_main, "evaluate a checkpoint: self_play | human_replay | trial (trial_k_score, ada_delta); JSON + video"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("ttlab drive", COMMANDS, argv)
