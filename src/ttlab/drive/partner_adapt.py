"""Train and evaluate on the partner-adaptation benchmark (`presets.partner_adapt`): shared by
`benchmarks/drive_partner_adapt.py` and its smoke test.

    policy, curve, facts = train_partner(presets.partner_adapt("lstm", aux=False), seed=0, steps=3_000_000)
    out = evaluate_partner(cfg, policy, HELD_OUT_PARTNERS, seed=100, episodes=4)   # per-partner paired trials

The loop is the trainer's (Rollout with the partner population as co-players -> ppo_update), without run
directories, so a benchmark can log every update's per-trial learner metrics as its learning curve.
"""

from __future__ import annotations

import dataclasses
import time

import torch

from ttlab.drive.config import TrainConfig
from ttlab.drive.partner_eval import partner_summary, policy_ego, run_paired
from ttlab.drive.partners import build_population
from ttlab.drive.policy import build_policy
from ttlab.drive.ppo import annealed, ppo_update
from ttlab.drive.presets import PARTNER_HELD_OUT
from ttlab.drive.rollout import Rollout
from ttlab.drive.train import env_horizon, make_env


def train_partner(cfg: TrainConfig, seed: int, steps: int | None = None, seconds: float | None = None,
                  log=None) -> tuple[torch.nn.Module, list[dict], dict]:
    """PPO on `cfg` (a `partner_adapt` config) against its partner population for `steps` learner-slot agent-steps
    (rounded up to whole updates; every env slot counts, as in `ttlab drive train`) or `seconds` of wall time.
    Returns (policy in eval mode, learning curve: one dict per update, run facts)."""
    if (steps is None) == (seconds is None):
        raise ValueError("train_partner: give exactly one of steps= or seconds=")
    if not cfg.partners:
        raise ValueError("train_partner: the config has no partner population (TrainConfig.partners)")
    torch.manual_seed(seed)
    env = make_env(cfg.env, cfg.scenarios, torch.device("cpu"), seed)
    pop = build_population(cfg.partners, cfg.partner_weights, env)
    policy = build_policy(cfg.policy, env.layout, env.num_actions, False, horizon=env_horizon(env))
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.ppo.lr, eps=1e-5)
    ro = Rollout(env, policy, cfg.rollout_steps, cfg.ppo.gamma, cfg.ppo.gae_lambda, coplayers=pop)
    ppo = dataclasses.replace(cfg.ppo)
    per_update = ro.N * cfg.rollout_steps
    updates = -(-steps // per_update) if steps is not None else None
    curve: list[dict] = []
    t0 = time.perf_counter()
    u = 0
    while (u < updates) if updates is not None else (time.perf_counter() - t0 < seconds):
        u += 1
        frac = (u - 1) / max(1, updates - 1) if updates is not None else (time.perf_counter() - t0) / seconds
        ppo.ent_coef = annealed(cfg.ppo.ent_coef, cfg.ppo.ent_coef_end, frac)
        for group in opt.param_groups:
            group["lr"] = annealed(cfg.ppo.lr, cfg.ppo.lr_end, frac)
        policy.eval()
        batch = ro.collect()
        policy.train()
        losses = ppo_update(policy, opt, batch, ppo)
        m = env.metrics()  # one host sync per update
        row = {"update": u, "agent_steps": u * per_update, "wall_s": round(time.perf_counter() - t0, 1)}
        row.update({k: round(float(v), 4) for k, v in m.items()
                    if k.startswith(("trial_", "ada_delta_trial_")) and k.endswith(("_score", "_minus_0",
                                                                                     "collision_rate"))})
        row.update({k.split("/")[1]: round(float(losses[k]), 4) for k in ("losses/entropy", "losses/task_accuracy")
                    if k in losses})
        curve.append(row)
        if log is not None and (u % 10 == 0 or u == updates):
            log(f"  {cfg.policy.core} seed {seed} update {u}{'/' + str(updates) if updates else ''} "
                f"{row['wall_s']:.0f}s score t0 {row.get('trial_0_score', 0):.3f} t1 {row.get('trial_1_score', 0):.3f}"
                f" coll t0 {row.get('trial_0_collision_rate', 0):.3f} ent {row.get('entropy', 0):.2f}")
    facts = {"updates": u, "agent_steps": u * per_update, "train_wall_s": round(time.perf_counter() - t0, 1),
             "params": sum(p.numel() for p in policy.parameters())}
    return policy.eval(), curve, facts


def held_out_env(cfg: TrainConfig, seed: int, num_envs: int = 64, scenes: str = PARTNER_HELD_OUT):
    """The config's env (overrides included) on held-out scenes (other seeds than training)."""
    env_cfg = dataclasses.replace(cfg.env, num_envs=num_envs)
    return make_env(env_cfg, scenes, torch.device("cpu"), seed)


def evaluate_partner(cfg: TrainConfig, policy_or_ego, partners, seed: int, episodes: int, num_envs: int = 64,
                     scenes: str = PARTNER_HELD_OUT) -> dict:
    """Paired trials on held-out scenes against `partners` (uniform), overall and per partner. `policy_or_ego`: a
    policy (sampled, as in training) or a callable `ego(env) -> ego` (a scripted ego, `drive.partner_scripted`)."""
    env = held_out_env(cfg, seed, num_envs, scenes)
    pop = build_population(list(partners), None, env)
    ego = policy_ego(policy_or_ego) if isinstance(policy_or_ego, torch.nn.Module) else policy_or_ego(env)
    return partner_summary(*run_paired(env, ego, pop, episodes), pop.names)
