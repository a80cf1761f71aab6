"""End-to-end PPO training throughput (rollout + update) on a training preset, counting agents in play.

Two counts per row: slot-steps (every agent slot of every env per env step, padding and limbo included;
what the budget `total_agent_steps` counts) and in-play steps (learner steps with the agent in play: the
PPO loss mask; what `charts/SPS` reports and what PufferLib counts). Rows: the preset's transformer and
the same config with the MLP core; with --baseline also the pre-speedup settings on the same scenes and
trials (63 partner / 200 road slots, embed 64 / d_model 128, 4 epochs x 4 minibatches, context prefix
re-encoded with gradient: --ppo.context full), and with --levers each of those undone alone. (The code-level
speedups, rollout skipping agents out of play and the key/value-only prefill, are in every row.) Rows are run round-robin, one update each in
turn, so a load spike on the shared machine hits every row alike, and the ratios are from the same run.
Each row also reports its process CPU time per update. Prints one line per row, then ONE JSON line last.

    python benchmarks/drive_train.py [--preset fast_k2] [--updates 3] [--baseline] [--levers] [--threads 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import time

import torch

from ttlab.drive.config import TrainConfig
from ttlab.drive.ppo import ppo_update
from ttlab.drive.presets import TRAIN_PRESETS
from ttlab.drive.rollout import Rollout
from ttlab.drive.train import build_policy, env_horizon, is_continuous, make_env


def old_obs(cfg: TrainConfig) -> TrainConfig:
    """Observation sizes before they were fitted to the scene (the EnvConfig defaults)."""
    return dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, partner_slots=63, road_slots=200))


def old_ppo(cfg: TrainConfig) -> TrainConfig:
    """PPO schedule before: 4 epochs x 4 minibatches."""
    return dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, update_epochs=4, num_minibatches=4))


def full_context(cfg: TrainConfig) -> TrainConfig:
    """Context prefix re-encoded with gradient in every minibatch (the old exact-gradient path)."""
    return dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, context="full"))


def old_model(cfg: TrainConfig) -> TrainConfig:
    """Policy width before: embed 64, d_model 128 (the PolicyConfig defaults)."""
    return dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, embed=64, hidden=128))


def with_core(cfg: TrainConfig, core: str) -> TrainConfig:
    return dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, core=core))


class Row:
    """One training setup, stepped one update at a time."""

    def __init__(self, name: str, cfg: TrainConfig, device: torch.device):
        self.name, self.cfg = name, cfg
        env = make_env(cfg.env, cfg.scenarios, device, cfg.seed)
        self.policy = build_policy(cfg.policy, env.layout, env.num_actions, is_continuous(env),
                                   horizon=env_horizon(env)).to(device)
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=cfg.ppo.lr, eps=1e-5, foreach=True)
        self.ro = Rollout(env, self.policy, cfg.rollout_steps, cfg.ppo.gamma, cfg.ppo.gae_lambda,
                          stored_context=cfg.ppo.context == "stored")
        self.env = env
        self.wall = {"rollout": 0.0, "update": 0.0}
        self.cpu = 0.0
        self.slot_steps = self.in_play = self.updates = 0

    def step(self, timed: bool) -> None:
        c0, t0 = time.process_time(), time.perf_counter()
        self.policy.eval()
        b = self.ro.collect()
        in_play = int(b.in_play)  # sync
        t1 = time.perf_counter()
        self.policy.train()
        m = ppo_update(self.policy, self.opt, b, self.cfg.ppo)
        float(m["losses/approx_kl"])  # sync
        t2, c2 = time.perf_counter(), time.process_time()
        if timed:
            self.wall["rollout"] += t1 - t0
            self.wall["update"] += t2 - t1
            self.cpu += c2 - c0
            self.slot_steps += self.ro.N * self.cfg.rollout_steps
            self.in_play += in_play
            self.updates += 1

    def result(self) -> dict:
        wall = self.wall["rollout"] + self.wall["update"]
        c, e = self.cfg, self.cfg.env
        return {"row": self.name, "core": c.policy.core, "envs": e.num_envs, "agents": self.env.num_agents,
                "rollout_steps": c.rollout_steps, "k_trials": e.k_trials, "trial_length": e.trial_length,
                "partner_slots": e.partner_slots, "road_slots": e.road_slots, "epochs": c.ppo.update_epochs,
                "minibatches": c.ppo.num_minibatches, "context": c.ppo.context if c.policy.core == "transformer" else "-",
                "horizon": env_horizon(self.env) if c.policy.core == "transformer" else 0, "updates": self.updates,
                "slot_steps_per_s": round(self.slot_steps / wall, 1),
                "in_play_steps_per_s": round(self.in_play / wall, 1),
                "in_play_fraction": round(self.in_play / max(self.slot_steps, 1), 3),
                "in_play_steps_per_cpu_s": round(self.in_play / max(self.cpu, 1e-9), 1),
                "rollout_s_per_update": round(self.wall["rollout"] / self.updates, 3),
                "update_s_per_update": round(self.wall["update"] / self.updates, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="fast_k2", help=f"training preset: {', '.join(TRAIN_PRESETS)}")
    ap.add_argument("--updates", type=int, default=3, help="timed updates per row (after one warm-up)")
    ap.add_argument("--baseline", action="store_true", help="also run the pre-speedup settings (old_obs+old_ppo+full_context)")
    ap.add_argument("--levers", action="store_true", help="also run the transformer with each speedup undone alone")
    ap.add_argument("--cores", default="transformer,mlp")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    if a.preset not in TRAIN_PRESETS:
        raise SystemExit(f"--preset {a.preset!r}: expected one of {', '.join(TRAIN_PRESETS)}")
    if a.threads:
        torch.set_num_threads(a.threads)
    t_start, load0 = time.perf_counter(), os.getloadavg()
    device = torch.device(a.device)
    base = TRAIN_PRESETS[a.preset]()
    base = dataclasses.replace(base, device=a.device, show_progress=False)
    setups = []
    for core in a.cores.split(","):
        cfg = with_core(base, core)
        setups.append((core, cfg))
        if a.baseline:
            setups.append((f"{core}_before", full_context(old_model(old_ppo(old_obs(cfg))))))
        if a.levers and core == "transformer":
            setups += [(f"{core}_obs_63_200", old_obs(cfg)), (f"{core}_ppo_4x4", old_ppo(cfg)),
                       (f"{core}_context_full", full_context(cfg)), (f"{core}_d128", old_model(cfg))]
    rows = [Row(name, cfg, device) for name, cfg in setups]
    for r in rows:
        r.step(timed=False)  # warm-up (also fills the transformer's context prefix)
    for _ in range(a.updates):
        for r in rows:
            r.step(timed=True)
    results = [r.result() for r in rows]
    for r in results:
        print(f"{r['row']:28s} slot-steps/s {r['slot_steps_per_s']:9,.0f}  in-play steps/s {r['in_play_steps_per_s']:9,.0f}"
              f"  (in-play fraction {r['in_play_fraction']:.2f}; rollout {r['rollout_s_per_update']:.2f}s"
              f" + update {r['update_s_per_update']:.2f}s per update)", flush=True)
    by = {r["row"]: r for r in results}
    out = {"benchmark": "drive_train", "preset": a.preset, "device": a.device, "threads": torch.get_num_threads(),
           "nproc": os.cpu_count(), "loadavg_start": [round(x, 2) for x in load0],
           "loadavg_end": [round(x, 2) for x in os.getloadavg()],
           "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "wall_s": round(time.perf_counter() - t_start, 1), "rows": results}
    for r in results:
        out[f"{r['row']}_in_play_steps_per_s"] = r["in_play_steps_per_s"]
        out[f"{r['row']}_slot_steps_per_s"] = r["slot_steps_per_s"]
        if f"{r['row']}_before" in by:
            b = by[f"{r['row']}_before"]
            out[f"{r['row']}_speedup_vs_before"] = round(r["in_play_steps_per_s"] / b["in_play_steps_per_s"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
