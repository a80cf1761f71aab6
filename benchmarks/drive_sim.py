"""Simulator throughput: agent-steps/s with full observations, random actions, and envs resetting onto
scenes drawn from a pool of >= 100 procedural scenes (as in training; short episodes of 10 ticks, and
trials of 3 ticks, so resets happen inside the timed window). Prints ONE JSON line last.

    python benchmarks/drive_sim.py [--device auto] [--steps 50] [--scenes 128] [--out FILE.json]

Rows: (envs x agents) = 16x64, 256x64 (+ 1024x64 and 4096x64 on CUDA), and a trial-mode row (K=4).
agent_steps/s counts every agent slot of every env per step (E * A per step), padding included;
vehicle_steps/s counts the vehicles that exist and are on the map (any role: policy, log replay, parked),
and in_play_agent_steps/s the policy-controlled ones in play (what PufferLib's SPS counts: its envs hold
real agents only, no padded slots). Peak memory per 1000
agents is CUDA max-allocated memory, or on CPU the growth of peak RSS from just before the env is built to
the end of the row (each CPU row runs in a fresh process), less the scene pool and road grid, which are
per pool, not per agent (reported apart as pool_and_grid_mb).
agent_steps_per_cpu_s divides by the process's CPU time (all threads): on a shared, loaded machine it
is the contention-free figure (with --threads 1 it is the single-core speed).
The env writes its observations into one reused buffer (EnvConfig.reuse_obs, as the trainer runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import time

import torch
import torch.multiprocessing as mp

from ttlab.common.device import resolve_device
from ttlab.common.result_file import emit_result
from ttlab.drive.config import EnvConfig
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.state import ABSENT, POLICY


def scene_pool(n: int, agents: int, device: torch.device):
    """A pool of `n` procedural scenes (all road families) with up to `agents` vehicles each, padded to
    `agents` slots (a crowded road may hold fewer vehicles; padded slots still count as agent slots)."""
    from ttlab.drive.scenarios import build_pool, generate_pool_scenarios

    scenes = generate_pool_scenarios(n, seed=0, num_agents=agents)
    return build_pool(scenes, device=device, max_agents=agents), "procedural"


def bench_row(pool, device, E: int, A: int, steps: int, trial: bool, warmup: int = 5, compile: bool = False,
              backend: str = "auto", threads: int = 0) -> dict:
    if threads:
        torch.set_num_threads(threads)
    rss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # CPU rows run in a fresh process: before the env
    cfg = EnvConfig(num_envs=E, max_agents=A, episode_length=10, collision_behavior="remove",
                    offroad_behavior="remove", compile=compile, backend=backend, reuse_obs=True)
    if trial:
        cfg.goal_behavior, cfg.k_trials, cfg.trial_length = "trial", 4, 3
    env = DriveEnv(cfg, pool, device=device, seed=0)
    env.reset()
    g = torch.Generator(device=device).manual_seed(0)
    acts = torch.randint(0, env.num_actions, (steps + warmup, E, env.num_agents), device=device, generator=g)
    for i in range(warmup):
        env.step(acts[i])
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    vehicles = torch.zeros((), dtype=torch.long, device=device)  # vehicle-steps of vehicles that exist (not padding)
    in_play = torch.zeros((), dtype=torch.long, device=device)  # ... that are policy-controlled and in play
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(steps):
        st = env.state  # the vehicles this step moves
        out = st.removed | st.stopped
        vehicles += ((st.role != ABSENT) & ~st.removed).sum()
        in_play += ((st.role == POLICY) & ~out).sum()
        env.step(acts[warmup + i])
    if device.type == "cuda":
        torch.cuda.synchronize()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = env.metrics()
    episodes = float(m["episodes"])
    if device.type == "cuda":
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak_mb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_start, 0) / 1024
    n = E * env.num_agents
    static_mb = sum(t.nbytes for t in [*vars(env.grid).values(), *vars(env.pool).values()]
                    if isinstance(t, torch.Tensor)) / 2**20  # scene pool + road grid: per pool, not per agent
    return {"envs": E, "agents": env.num_agents, "mode": "trial_k4" if trial else "respawn", "backend": env.backend,
            "compile": compile,
            "agent_steps_per_s": round(n * steps / dt), "ms_per_step": round(1000 * dt / steps, 2),
            "vehicle_steps_per_s": round(int(vehicles) / dt), "in_play_agent_steps_per_s": round(int(in_play) / dt),
            "vehicles_per_env": round(int(vehicles) / (steps * E), 2),
            "agent_steps_per_cpu_s": round(n * steps / max(cpu, 1e-9)),
            "in_play_agent_steps_per_cpu_s": round(int(in_play) / max(cpu, 1e-9)),
            "episodes_finished": episodes, "peak_mem_mb": round(peak_mb, 1), "pool_and_grid_mb": round(static_mb, 1),
            "peak_mem_mb_per_1000_agents": round(max(peak_mb - static_mb, 0) * 1000 / n, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--scenes", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    ap.add_argument("--compile", action="store_true", help="also run every row with EnvConfig.compile=True")
    ap.add_argument("--backend", default="auto", choices=["auto", "native", "torch"],
                    help="observation builder (EnvConfig.backend): native C kernel on CPU, or the torch reference")
    ap.add_argument("--out", default="", help="also write the JSON here (e.g. benchmarks/results/drive_sim/drive_sim.json)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    pool, source = scene_pool(args.scenes, 64, device)
    rows = [(16, 64, False), (256, 64, False)]
    if device.type == "cuda":
        rows += [(1024, 64, False), (4096, 64, False), (16384, 64, False)]
    rows.append((256 if device.type == "cpu" else 4096, 64, True))
    results = []
    for comp in (False, True) if args.compile else (False,):
        for E, A, trial in rows:
            kw = dict(compile=comp, backend=args.backend, threads=args.threads)
            if device.type == "cpu":  # a fresh process per row, so its peak RSS growth is this row's own memory
                with mp.get_context("spawn").Pool(1) as workers:
                    r = workers.apply(bench_row, (pool, device, E, A, args.steps, trial), kw)
            else:
                r = bench_row(pool, device, E, A, args.steps, trial, **kw)
            results.append(r)
            print(json.dumps(r), flush=True)
    base = {(r["envs"], r["mode"], r["compile"]): r for r in results}
    t = next(r for r in results if r["mode"] == "trial_k4" and not r["compile"])
    ratio = t["agent_steps_per_s"] / base[(t["envs"], "respawn", False)]["agent_steps_per_s"]
    emit_result({
        "benchmark": "drive_sim", "nproc": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(), "device": str(device), "torch_threads": torch.get_num_threads(),
        "scene_source": source, "pool_scenes": pool.size, "rows": results,
        "trial_vs_nontrial_speed": round(ratio, 3),
    }, args.out, indent=None)


if __name__ == "__main__":
    main()
