"""`ttlab drive train`: PPO on the batched driving simulator (self-play, optional frozen co-players).

    ttlab drive train --preset debug                # seconds, CPU
    ttlab drive train --preset adaptive_k2 --device cuda
    ttlab drive train --preset adaptive_k2 --run-name my_run --resume   # continue from checkpoints/latest

Logs to TensorBoard under runs/drive/<run>/ (cleanrl names: charts/SPS, losses/*, env/*; `charts/SPS` counts
learner agent-steps with the agent in play, `charts/slot_SPS` every agent slot including padding and limbo), saves
`checkpoints/latest` atomically every `checkpoint_every` updates and at the end.
"""

from __future__ import annotations

import dataclasses
import math
import time

import torch

from ttlab.common.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from ttlab.common.config import to_dict
from ttlab.common.device import resolve_device, seed_everything
from ttlab.common.duration import parse_duration
from ttlab.common.logging import Logger, console, progress
from ttlab.common.runs import make_run_dir
from ttlab.drive.bc import cat, clone, collect
from ttlab.drive.config import EnvConfig, TrainConfig
from ttlab.drive.flags import check_train
from ttlab.drive.partners import build_population
from ttlab.drive.policy import build_policy
from ttlab.drive.policy_io import env_horizon, is_continuous, load_policy  # noqa: F401 (re-exported)
from ttlab.drive.ppo import annealed, ppo_update, schedule_progress
from ttlab.drive.rollout import CoPlayers, Rollout
from ttlab.drive.scenarios.pool import load_pool
from ttlab.drive.sim.env import DriveEnv


def make_env(env_cfg: EnvConfig, scenarios: str, device: torch.device, seed: int) -> DriveEnv:
    fams = ("hidden_goal", "hidden_exit", "t_maze")  # procedural families (or flag) that give goal candidates
    if env_cfg.hidden_goal and scenarios.startswith("procedural") and not any(f in scenarios for f in fams):
        scenarios += (":" if ":" not in scenarios else ",") + "families=hidden_goal,hidden_goal=1"
    pool = load_pool(scenarios, device)
    # the rollout copies each observation into its buffer before the next step, so one reused obs tensor is safe
    return DriveEnv(dataclasses.replace(env_cfg, reuse_obs=True), pool, device, seed)


def collision_penalty(cfg: TrainConfig, frac: float) -> float:
    """The collision penalty at training progress `frac` in [0, 1] (see TrainConfig.reward_collision_end)."""
    start = cfg.reward_schedule_start
    f = 0.0 if frac <= start else (frac - start) / max(1.0 - start, 1e-9)
    return annealed(cfg.env.reward_collision, cfg.reward_collision_end, f)


def coplayer_assignment(E: int, A: int, n_policies: int, fraction: float, device: torch.device) -> torch.Tensor:
    """(E*A,) long: co-player index per agent slot, -1 = learner. In the first round(fraction*E) envs every
    agent but slot 0 is a co-player (policy e % n_policies); elsewhere all are learners."""
    assign = torch.full((E, A), -1, dtype=torch.long, device=device)
    n_env = round(fraction * E) if n_policies else 0
    if n_env:
        e = torch.arange(n_env, device=device)
        assign[:n_env, 1:] = (e % n_policies).unsqueeze(1)
    return assign.reshape(-1)


def _save(run, policy, opt, cfg: TrainConfig, horizon: int, update: int, agent_steps: int,
          name: str = "latest") -> None:
    save_checkpoint(run.checkpoints / name, {
        "policy": policy.state_dict(), "optimizer": opt.state_dict(), "policy_config": to_dict(cfg.policy),
        "env_config": to_dict(cfg.env), "scenarios": cfg.scenarios, "seed": cfg.seed,  # `ttlab drive eval` uses them
        "partners": list(cfg.partners), "partner_weights": list(cfg.partner_weights),
        "horizon": horizon, "update": update, "agent_steps": agent_steps, "rng": rng_state(),
    })


def _warm_start(cfg: TrainConfig, env, policy) -> dict[str, float]:
    """Behaviour-cloning warm start (`drive.bc`); returns its metrics under bc/ (expert rates, fit, time)."""

    t0 = time.perf_counter()
    data = collect(env, cfg.bc_ticks, cfg.ppo.gamma)
    out = {f"bc/{k}": v for k, v in clone(policy, data, epochs=cfg.bc_epochs, lr=cfg.ppo.lr).items()}
    out.update({f"bc/expert_{k}": v for k, v in data.metrics.items() if k.endswith("_rate")})
    for r in range(cfg.bc_dagger):
        policy.eval()
        new = collect(env, cfg.bc_ticks, cfg.ppo.gamma, policy=policy)  # the policy drives, the expert labels
        out.update({f"bc/dagger{r}_{k}": v for k, v in new.metrics.items() if k.endswith("_rate")})
        console.print(f"DAgger round {r}: the policy drove " + " ".join(
            f"{k}={v:.3f}" for k, v in new.metrics.items() if k.endswith("_rate")))
        data = cat([data, new])
        out.update({f"bc/{k}": v for k, v in clone(policy, data, epochs=cfg.bc_epochs, lr=cfg.ppo.lr).items()})
    out["bc/samples"] = float(data.obs.shape[0])
    out["bc/wall_s"] = time.perf_counter() - t0
    env.metrics()  # the expert's episodes are not the learner's
    console.print("behaviour-cloning warm start: " + " ".join(f"{k}={v:.4g}" for k, v in out.items()))
    return out


def train(cfg: TrainConfig, env=None, on_log=None) -> dict[str, float]:
    """Train; returns the last logged metrics (plus `update`, `agent_steps`, `run_dir`).

    `on_log(update, metrics)`, when given, is called with every logged metrics dict (benchmarks keep curves)."""
    check_train(cfg)  # every flag in range before a scene is loaded or a run directory made
    limit_s = parse_duration(cfg.time_limit)
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    env = env if env is not None else make_env(cfg.env, cfg.scenarios, device, cfg.seed)
    horizon = env_horizon(env)
    policy = build_policy(cfg.policy, env.layout, env.num_actions, is_continuous(env), horizon=horizon).to(device)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.ppo.lr, eps=1e-5, foreach=True)
    run = make_run_dir("drive", cfg, cfg.run_name, cfg.root, cfg.resume)
    update, agent_steps = 0, 0
    if cfg.resume and run.latest is not None:
        ck = load_checkpoint(run.latest, "cpu")
        policy.load_state_dict(ck["policy"])
        opt.load_state_dict(ck["optimizer"])
        update, agent_steps = int(ck["update"]), int(ck["agent_steps"])
        set_rng_state(ck["rng"])
        console.print(f"resumed {run.path} at update {update} ({agent_steps} agent-steps)")
    co = None
    if cfg.partners:
        co = build_population(cfg.partners, cfg.partner_weights, env, device)
    if cfg.coplayers:
        pols = [load_policy(s, env, device) for s in cfg.coplayers]
        co = CoPlayers(pols, coplayer_assignment(env.num_envs, env.num_agents, len(pols), cfg.coplayer_envs, device))
    t_begin = time.perf_counter()
    bc: dict[str, float] = {}
    if cfg.bc_ticks > 0 and update == 0:  # a resumed run has its warm start in its weights already
        bc = _warm_start(cfg, env, policy)
    rollout = Rollout(env, policy, cfg.rollout_steps, cfg.ppo.gamma, cfg.ppo.gae_lambda, co,
                      stored_context=cfg.ppo.context == "stored", explore_steer=cfg.ppo.explore_steer,
                      explore_start=cfg.ppo.explore_start, explore_start_prob=cfg.ppo.explore_start_prob)
    per_update = rollout.N * cfg.rollout_steps
    total = max(1, math.ceil(cfg.total_agent_steps / per_update))
    forward = None
    if cfg.compile and device.type == "cuda":
        forward = torch.compile(policy.forward, dynamic=False)
    logger = Logger(run.path, wandb=cfg.wandb, config=cfg)
    if bc:
        logger.scalars(bc, 0)
    last: dict[str, float] = {}
    ppo_cfg = dataclasses.replace(cfg.ppo)  # its ent_coef follows the schedule (ent_coef -> ent_coef_end)
    t_log, steps_log, in_play_log = time.perf_counter(), agent_steps, rollout.in_play_steps.clone()
    t_start = t_begin
    try:
        with progress(total, "drive train", disable=None if cfg.show_progress else True) as bar:
            bar.set(completed=update)
            while update < total:
                policy.eval()
                batch = rollout.collect()
                policy.train()
                frac = schedule_progress(update, total, time.perf_counter() - t_start, limit_s)
                ppo_cfg.ent_coef = annealed(cfg.ppo.ent_coef, cfg.ppo.ent_coef_end, frac)
                if cfg.reward_collision_end is not None:
                    env.set_reward_weights(cfg.env.reward_goal, collision_penalty(cfg, frac), cfg.env.reward_offroad)
                lr_now = annealed(cfg.ppo.lr, cfg.ppo.lr_end, frac)
                for group in opt.param_groups:
                    group["lr"] = lr_now
                metrics = ppo_update(policy, opt, batch, ppo_cfg, autocast_bf16=cfg.bf16, forward=forward)
                update += 1
                agent_steps += per_update
                bar.advance(1)
                out_of_time = limit_s > 0 and time.perf_counter() - t_start > limit_s
                if update % cfg.log_every == 0 or update == total or out_of_time:
                    now = time.perf_counter()
                    dt = max(now - t_log, 1e-9)
                    metrics["charts/SPS"] = (rollout.in_play_steps - in_play_log) / dt  # agents in play, as PufferLib
                    metrics["charts/slot_SPS"] = (agent_steps - steps_log) / dt  # every agent slot, padding too
                    metrics["charts/agent_steps"] = agent_steps
                    metrics["charts/in_play_steps"] = rollout.in_play_steps.clone()
                    metrics["charts/learning_rate"] = lr_now
                    metrics["charts/ent_coef"] = ppo_cfg.ent_coef
                    metrics["charts/reward_collision"] = collision_penalty(cfg, frac)  # the schedule (no device read)
                    metrics.update({f"env/{k}": v for k, v in env.metrics().items()})
                    last = logger.scalars(metrics, agent_steps)
                    t_log, steps_log, in_play_log = time.perf_counter(), agent_steps, rollout.in_play_steps.clone()
                    bar.set(text=f"SPS {last['charts/SPS']:.0f} score {last.get('env/score', float('nan')):.3f}")
                    if on_log is not None:
                        on_log(update, last)
                if update % cfg.checkpoint_every == 0 or update == total or out_of_time:
                    _save(run, policy, opt, cfg, horizon, update, agent_steps)
                if cfg.keep_every > 0 and update % cfg.keep_every == 0:
                    _save(run, policy, opt, cfg, horizon, update, agent_steps, f"update_{update:06d}")
                if out_of_time:
                    console.print(f"time limit {cfg.time_limit} reached at update {update}/{total}")
                    break
    finally:
        logger.close()
    return {**last, "update": update, "agent_steps": agent_steps, "run_dir": str(run.path)}
