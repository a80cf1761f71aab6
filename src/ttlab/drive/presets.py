"""Named training configs (`ttlab drive train --preset NAME`), one function each."""

from __future__ import annotations

from ttlab.drive.policy import PolicyConfig
from ttlab.drive.ppo import PPOConfig
from ttlab.drive.sim.env import EnvConfig
from ttlab.drive.train import TrainConfig


def default() -> TrainConfig:
    """Goal respawn on procedural scenes, memoryless MLP (the PufferDrive baseline).

    Collisions and offroad remove the agent: offroad is "the box touches a road edge", so with `ignore` a
    policy learns to leave the road once and then sit beyond the edge, penalty-free (seen in a CPU run)."""
    return TrainConfig(
        env=EnvConfig(num_envs=64, max_agents=32, goal_behavior="respawn", episode_length=91,
                      collision_behavior="remove", offroad_behavior="remove"),
        scenarios="procedural:n=256", policy=PolicyConfig(core="mlp"), rollout_steps=64,
        total_agent_steps=50_000_000)


def _adaptive(k: int) -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(num_envs=64, max_agents=32, goal_behavior="trial", k_trials=k, trial_length=91,
                      collision_behavior="remove", offroad_behavior="remove"),
        scenarios="procedural:n=256", policy=PolicyConfig(core="transformer", hidden=128, n_layers=2, n_heads=4),
        rollout_steps=128, total_agent_steps=100_000_000)


def adaptive_k2() -> TrainConfig:
    """Two-trial episodes, transformer with a K x trial_length KV cache."""
    return _adaptive(2)


def adaptive_k4() -> TrainConfig:
    """Four-trial episodes, transformer with a K x trial_length KV cache."""
    return _adaptive(4)


def hidden_goal() -> TrainConfig:
    """Hidden goal among M = 3 exits, K = 2 trials: memory pays from trial 1 on."""
    cfg = _adaptive(2)
    cfg.env.hidden_goal = True
    cfg.env.trial_length = 60
    cfg.scenarios = "procedural:n=128,families=hidden_goal,hidden_goal=1"
    cfg.total_agent_steps = 30_000_000
    return cfg


def fast_k2() -> TrainConfig:
    """The adaptation benchmark's scale, fitted to 2 CPU cores: K = 2 trials of 40 ticks, 32 envs x 8 agents,
    observations fitted to the scene (8 partner and 64 road slots: the scenes hold <= 8 vehicles, and the 64
    nearest road segments cover the junction), a d_model = 64 core (embed 32), 1 epoch x 2 minibatches (as
    PufferLib), the transformer's context prefix as the stop-gradient keys/values the rollout computed
    (`PPOConfig.context = "stored"`: no prefill).
    `benchmarks/drive_train.py --preset fast_k2` measures it."""
    return TrainConfig(
        env=EnvConfig(num_envs=32, max_agents=8, goal_behavior="trial", k_trials=2, trial_length=40,
                      collision_behavior="remove", offroad_behavior="remove", partner_slots=8, road_slots=64),
        scenarios="procedural:n=128,agents=8",
        policy=PolicyConfig(core="transformer", embed=32, hidden=64, n_layers=2, n_heads=4),
        ppo=PPOConfig(update_epochs=1, num_minibatches=2, context="stored"), rollout_steps=32,
        total_agent_steps=20_000_000)


def debug() -> TrainConfig:
    """Tiny: 2 envs x 4 agents, 2 trials of 8 ticks, 1-layer transformer, 3 updates (seconds on CPU)."""
    return TrainConfig(
        env=EnvConfig(num_envs=2, max_agents=4, goal_behavior="trial", k_trials=2, trial_length=8,
                      collision_behavior="remove", offroad_behavior="remove", partner_slots=8, road_slots=32),
        scenarios="procedural:n=4,agents=4",
        policy=PolicyConfig(core="transformer", embed=16, hidden=32, n_layers=1, n_heads=2),
        ppo=PPOConfig(update_epochs=2, num_minibatches=2), rollout_steps=16, total_agent_steps=3 * 2 * 4 * 16,
        device="cpu", checkpoint_every=2, show_progress=False)


TRAIN_PRESETS = {"default": default, "adaptive_k2": adaptive_k2, "adaptive_k4": adaptive_k4,
                 "hidden_goal": hidden_goal, "fast_k2": fast_k2, "debug": debug}
