"""Log replay fidelity: drive every ego with the log-tracking expert through the simulator's own dynamics and
measure, per tick, how far its pose is from the logged pose at the same log step, and which events it meets.

    out = track_log(env, episodes=1)     # env: trial mode, one trial, classic discrete dynamics
    out["pos_err"]                       # (N,) metres, one entry per (ego, tick) in play with a valid log
    out["goal_rate"], out["collision_rate"], out["offroad_rate"]
    replay_fidelity(trained_env, scenes, envs=8, episodes=1, anchor="time")   # the same, rounded, as a table row
    expert_rates(trained_env, "procedural:n=64,seed=1000", envs=8, episodes=2)  # the expert on a self-play protocol

The expert (`bc.tracking_actions`) reads the log's next state and picks the one of the 91 discrete actions whose
bicycle tick lands closest to it, so the pose error is what the dynamics and the action grid cost against the log
(stop-and-go logs and sharp turns cost most), and the event rates are what the scenes allow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from ttlab.drive.bc import tracking_actions
from ttlab.drive.config import EnvConfig
from ttlab.drive.evaluate import EvalConfig, env_config
from ttlab.drive.paired import PairedTrials
from ttlab.drive.scenarios.pool import build_pool
from ttlab.drive.sim.dynamics import bicycle_step, wrap_angle
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.state import POLICY
from ttlab.drive.train import make_env


@torch.no_grad()
def track_log(env, episodes: int = 1, anchor: str = "path") -> dict:
    """Exactly `episodes` one-trial episodes per env with the tracking expert. Returns the per-(ego, tick) pose
    errors against the log at the same log step (`pos_err` m, `heading_err` rad, `tick` of each, all (N,)), the
    goal / collision / offroad rates over ego episodes (as `ttlab drive eval --mode self_play` counts them) and
    the number of ego episodes."""
    cfg = env.cfg
    if cfg.goal_behavior != "trial" or cfg.k_trials != 1:
        raise ValueError("track_log needs a one-trial env (goal_behavior='trial', k_trials=1)")
    paired = PairedTrials(env.trial_metrics, env.num_envs, env.num_agents, 1, episodes, env.device)
    env.trial_metrics = paired
    env.reset()
    pos_err, head_err, ticks = [], [], []
    steps, max_steps = 0, episodes * cfg.trial_length + 1
    while not paired.complete():
        if steps >= max_steps:
            raise RuntimeError(f"{steps} steps ran and some envs have not finished {episodes} episodes")
        st = env.state
        live = (st.role == POLICY) & ~st.removed & ~st.stopped  # (E, A) egos acting this tick
        first = env.episode < episodes  # (E,) envs still in their recorded episodes
        act = tracking_actions(env, anchor)  # (E, A)
        # the pose this tick's dynamics give each ego (what env.step computes, read before any reset moves it),
        # against the log at the step the clock reaches
        nx, ny, nh, _ = bicycle_step(st.x, st.y, st.heading, st.speed, env.tables[0][act], env.tables[1][act],
                                     st.length, float(env.pool.dt), cfg.limits.max_speed)  # (E, A) each
        log, ok = env.view.log_at(env.view.main_log, env.scene, torch.zeros_like(env.scene), env.t + 1)  # (E, A, 4)
        keep = live & ok & first.unsqueeze(1)
        pos_err.append(torch.hypot(nx - log[..., 0], ny - log[..., 1])[keep])
        head_err.append(wrap_angle(nh - log[..., 2]).abs()[keep])
        ticks.append((env.trial_step + 1).unsqueeze(1).expand_as(keep)[keep])
        env.step(act)
        steps += 1
    m = paired.summary()
    return {"pos_err": torch.cat(pos_err), "heading_err": torch.cat(head_err), "tick": torch.cat(ticks),
            "goal_rate": m["trial_0_goal_rate"], "collision_rate": m["trial_0_collision_rate"],
            "offroad_rate": m["trial_0_offroad_rate"], "ego_episodes": m["ego_trials"]}


def replay_fidelity(trained: EnvConfig, scenes: list, envs: int, episodes: int, anchor: str) -> dict:
    """`track_log` on `scenes` (a list of Scenario) in the self-play evaluation env of a training config's `trained`
    env, scenes in cycle order: the expert's event rates and its pose errors (mean, p99, max), rounded."""
    cfg = env_config(EvalConfig(mode="self_play", num_envs=envs, episodes=episodes, scene_order="cycle"), trained)
    env = DriveEnv(dataclasses.replace(cfg, num_envs=envs), build_pool(scenes), "cpu", seed=0)
    o = track_log(env, episodes, anchor)
    e, h = o["pos_err"], o["heading_err"]
    return {"anchor": anchor, "goal_rate": round(o["goal_rate"], 4), "collision_rate": round(o["collision_rate"], 4),
            "offroad_rate": round(o["offroad_rate"], 4),
            "collision_plus_offroad": round(o["collision_rate"] + o["offroad_rate"], 4),
            "pos_err_mean_m": round(float(e.mean()), 4), "pos_err_p99_m": round(float(torch.quantile(e, 0.99)), 4),
            "pos_err_max_m": round(float(e.max()), 4), "heading_err_mean_rad": round(float(h.mean()), 4),
            "heading_err_max_rad": round(float(h.max()), 4), "ego_episodes": o["ego_episodes"],
            "ego_ticks": int(e.numel())}


@torch.no_grad()
def expert_rates(trained: EnvConfig, scenes: str, envs: int, episodes: int, scene_order: str, seed: int = 0,
                 actions: Callable[[DriveEnv], torch.Tensor] = tracking_actions) -> dict:
    """The log-tracking expert (or any `actions(env) -> (E, A)`) on the self-play evaluation protocol of a training
    config's `trained` env: exactly `episodes` episodes per env, counted as `ttlab drive eval --mode self_play`
    counts them. Returns the goal / collision / offroad rates over ego episodes."""
    cfg = env_config(EvalConfig(mode="self_play", num_envs=envs, episodes=episodes, scene_order=scene_order),
                     trained)
    env = make_env(cfg, scenes, torch.device("cpu"), seed)
    paired = PairedTrials(env.trial_metrics, env.num_envs, env.num_agents, cfg.k_trials, episodes, "cpu")
    env.trial_metrics = paired
    env.reset()
    steps, max_steps = 0, episodes * cfg.k_trials * cfg.trial_length
    while not paired.complete():
        if steps >= max_steps:
            raise RuntimeError(f"{steps} steps ran and some envs have not finished {episodes} episodes")
        env.step(actions(env))
        steps += 1
    m = paired.summary()
    goal, coll, off = m["trial_0_goal_rate"], m["trial_0_collision_rate"], m["trial_0_offroad_rate"]
    return {"goal_rate": goal, "collision_rate": coll, "offroad_rate": off, "collision_plus_offroad": coll + off,
            "ego_episodes": m["ego_trials"], "scenes": scenes, "scene_order": scene_order}
