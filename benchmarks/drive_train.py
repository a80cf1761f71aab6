"""End-to-end PPO training throughput: agent-steps of experience per second (rollout + update).

Rows: MLP (goal respawn) and transformer (trial mode, K = 2, KV cache over K x trial_length), on CPU
and, when present, CUDA. Agent-steps = agent slots x env steps per update (what `charts/SPS` counts).
Prints one line per row, then ONE JSON line last.

    python benchmarks/drive_train.py [--device cpu|cuda|all] [--updates 3] [--envs E] [--agents A]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from ttlab.drive.policy import PolicyConfig
from ttlab.drive.ppo import PPOConfig
from ttlab.drive.sim.env import EnvConfig
from ttlab.drive.train import TrainConfig, build_policy, env_horizon, is_continuous, make_env


def one(core: str, device: torch.device, envs: int, agents: int, T: int, updates: int, trial_length: int) -> dict:
    from ttlab.drive.ppo import ppo_update
    from ttlab.drive.rollout import Rollout

    trial = core == "transformer"
    env_cfg = EnvConfig(num_envs=envs, max_agents=agents, goal_behavior="trial" if trial else "respawn",
                        k_trials=2, trial_length=trial_length, episode_length=trial_length,
                        collision_behavior="remove", offroad_behavior="remove")
    cfg = TrainConfig(env=env_cfg, policy=PolicyConfig(core=core), ppo=PPOConfig(), rollout_steps=T)
    env = make_env(env_cfg, f"procedural:n=32,agents={agents}", device, 0)
    policy = build_policy(cfg.policy, env.layout, env.num_actions, is_continuous(env), horizon=env_horizon(env)).to(device)
    opt = torch.optim.Adam(policy.parameters(), lr=3e-4, eps=1e-5, foreach=True)
    ro = Rollout(env, policy, T, 0.99, 0.95)

    def update():
        policy.eval()
        b = ro.collect()
        policy.train()
        m = ppo_update(policy, opt, b, cfg.ppo, autocast_bf16=device.type == "cuda")
        return m["losses/approx_kl"]

    update()  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(updates):
        kl = update()
    float(kl)  # sync
    dt = time.perf_counter() - t0
    steps = updates * ro.N * T
    return {"core": core, "device": device.type, "envs": envs, "agents": env.num_agents, "rollout_steps": T,
            "horizon": env_horizon(env) if trial else 0, "threads": torch.get_num_threads(),
            "agent_steps_per_s": steps / dt}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="auto", help="cpu | cuda | all | auto (cpu, plus cuda when present)")
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--envs", type=int, default=0, help="envs per row (default: 4 on CPU, 512 on CUDA)")
    ap.add_argument("--agents", type=int, default=0, help="agent slots (default: 8 on CPU, 32 on CUDA)")
    ap.add_argument("--trial-length", type=int, default=45)
    a = ap.parse_args()
    devs = ["cpu"] + (["cuda"] if torch.cuda.is_available() else []) if a.device in ("auto", "all") else [a.device]
    rows = []
    for d in devs:
        dev = torch.device(d)
        envs = a.envs or (4 if d == "cpu" else 512)
        T = 16 if d == "cpu" else 64
        for core in ("mlp", "transformer"):
            r = one(core, dev, envs, a.agents or (8 if d == "cpu" else 32), T, a.updates, a.trial_length)
            rows.append(r)
            print(f"{d:5s} {core:12s} envs={envs} agents={r['agents']} T={T}: {r['agent_steps_per_s']:,.0f} agent-steps/s")
    out = {"benchmark": "drive_train", "rows": rows}
    for r in rows:
        out[f"{r['device']}_{r['core']}_agent_steps_per_s"] = round(r["agent_steps_per_s"], 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
