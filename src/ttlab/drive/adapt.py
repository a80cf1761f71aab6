"""Train and evaluate on the hidden-exit adaptation benchmark (`presets.hidden_exit`): shared by
`benchmarks/drive_adapt.py` and the `drive` demo stage.

    policy, curve, facts = train_hidden_exit("transformer", seed=0, steps=1_500_000)   # or seconds=180
    out = run_policy(held_out_env(), policy, episodes=8)   # paired per-trial goal / exit / wrong-exit rates

The loop is the trainer's (Rollout -> ppo_update), without run directories, so a benchmark can log the
per-trial goal rates of every update's rollouts as its learning curve.
"""

from __future__ import annotations

import time

import torch

from ttlab.drive.config import TrainConfig
from ttlab.drive.policy import build_policy
from ttlab.drive.ppo import annealed, ppo_update
from ttlab.drive.presets import (
    HIDDEN_EXIT_HELD_OUT,
    HIDDEN_EXIT_INTENT_SCENES,
    HIDDEN_EXIT_SCENES,
    hidden_exit,
)
from ttlab.drive.rollout import Rollout
from ttlab.drive.scenarios.pool import ProceduralSpec
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.train import env_horizon, make_env


def train_hidden_exit(core: str, seed: int, steps: int | None = None, seconds: float | None = None,
                      log=None, num_envs: int | None = None, intent: bool = True, **overrides) -> tuple[torch.nn.Module, list[dict], dict]:
    """PPO on `presets.hidden_exit(core)` for `steps` agent-steps (rounded up to whole updates) or until
    `seconds` of wall time have passed (checked between updates). Returns (policy in eval mode, learning
    curve: one dict per update with the rollouts' per-trial metrics, run facts). intent=False: the steering-only
    design (`presets.hidden_exit(intent=False)`)."""
    if (steps is None) == (seconds is None):
        raise ValueError("train_hidden_exit: give exactly one of steps= or seconds=")
    cfg = apply_overrides(hidden_exit(core, intent=intent), overrides)
    if num_envs is not None:
        cfg.env.num_envs = num_envs
    torch.manual_seed(seed)
    env = make_env(cfg.env, cfg.scenarios, torch.device("cpu"), seed)
    policy = build_policy(cfg.policy, env.layout, env.num_actions, False, horizon=env_horizon(env))
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.ppo.lr, eps=1e-5)
    ro = Rollout(env, policy, cfg.rollout_steps, cfg.ppo.gamma, cfg.ppo.gae_lambda, explore_steer=cfg.ppo.explore_steer,
                      explore_start=cfg.ppo.explore_start, explore_start_prob=cfg.ppo.explore_start_prob)
    per_update = ro.N * cfg.rollout_steps
    updates = -(-steps // per_update) if steps is not None else None
    curve: list[dict] = []
    t0 = time.perf_counter()
    u = 0
    ent0, lr0 = cfg.ppo.ent_coef, cfg.ppo.lr
    while (u < updates) if updates is not None else (time.perf_counter() - t0 < seconds):
        u += 1
        frac = (u - 1) / max(1, updates - 1) if updates is not None else (time.perf_counter() - t0) / seconds
        cfg.ppo.ent_coef = annealed(ent0, cfg.ppo.ent_coef_end, frac)
        for group in opt.param_groups:
            group["lr"] = annealed(lr0, cfg.ppo.lr_end, frac)
        policy.eval()
        batch = ro.collect()
        policy.train()
        losses = ppo_update(policy, opt, batch, cfg.ppo)
        m = env.metrics()  # one host sync per update
        row = {"update": u, "agent_steps": u * per_update, "wall_s": round(time.perf_counter() - t0, 1)}
        row.update({k: round(float(v), 4) for k, v in m.items()
                    if k.startswith(("trial_", "n_trials")) or k == "ada_delta_trial_1_minus_0"})
        row.update({k.split("/")[1]: round(float(losses[k]), 4) for k in ("losses/entropy", "losses/task_accuracy")
                    if k in losses})
        row["ent_coef"] = round(cfg.ppo.ent_coef, 5)
        curve.append(row)
        if log is not None and (u % 10 == 0 or u == updates):
            log(f"  {core} seed {seed} update {u}{'/' + str(updates) if updates else ''} {row['wall_s']:.0f}s "
                f"goal t0 {row.get('trial_0_goal_rate', 0):.3f} t1 {row.get('trial_1_goal_rate', 0):.3f} "
                f"exit t0 {row.get('trial_0_exit_rate', 0):.3f} ent {row.get('entropy', 0):.2f} "
                f"task acc {row.get('task_accuracy', float('nan')):.3f}")
    facts = {"updates": u, "agent_steps": u * per_update, "train_wall_s": round(time.perf_counter() - t0, 1),
             "params": sum(p.numel() for p in policy.parameters())}
    return policy.eval(), curve, facts


def apply_overrides(cfg: TrainConfig, overrides: dict[str, str] | None) -> TrainConfig:
    """Set `section.field=value` overrides (e.g. "ppo.lr", "env.k_trials", or "scenarios") on `cfg`, in place, each
    value cast to the field's type; an unknown key is refused with its name."""
    for key, value in (overrides or {}).items():
        section, _, name = key.rpartition(".")
        obj = getattr(cfg, section, None) if section else cfg  # "scenarios" or "ppo.lr"
        if obj is None or not hasattr(obj, name):
            raise ValueError(f"unknown override {key!r} (use section.field, e.g. ppo.lr)")
        cur = getattr(obj, name)
        setattr(obj, name, float(value) if cur is None else type(cur)(value))
    return cfg


def held_out_source(cfg: TrainConfig) -> str:
    """The held-out scenes of a (possibly overridden) hidden-exit config: `presets.HIDDEN_EXIT_HELD_OUT` when the
    training scenes are the preset's, else the training source's families and exits on 64 scenes of seed 1000
    (t_maze_shown, a training companion, is left out)."""
    if cfg.scenarios in (HIDDEN_EXIT_INTENT_SCENES, HIDDEN_EXIT_SCENES):
        return HIDDEN_EXIT_HELD_OUT
    spec = ProceduralSpec.parse(cfg.scenarios)
    fams = tuple(f for f in spec.families if f != "t_maze_shown") or ("t_maze",)
    return (f"procedural:n=64,seed=1000,families={'+'.join(fams)},agents={spec.agents},exits={spec.exits}"
            + (",hidden_goal=1" if spec.hidden_goal else ""))


def held_out_env(seed: int = 0, num_envs: int = 64, intent: bool = True,
                 overrides: dict[str, str] | None = None) -> DriveEnv:
    """The benchmark's env on held-out scenes (`held_out_source`: other seeds than training), with the same
    `overrides` as training (so a K = 3 run is evaluated at K = 3)."""
    cfg = apply_overrides(hidden_exit(intent=intent), overrides)
    cfg.env.num_envs = num_envs
    return make_env(cfg.env, held_out_source(cfg), torch.device("cpu"), seed)
