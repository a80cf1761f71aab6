"""`ttlab demo` drive stage: render a procedural scene and the CARLA Town02 scene with replayed logs,
plus a short multi-trial rollout with random actions, and time the simulator (under about a minute)."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ttlab.common.device import resolve_device

CARLA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "carla_town02_womd.json"
SHARED_CARLA = Path("/work/shared/data/carla_town02_womd.json")


def run(out_dir: Path, device: str = "auto") -> str:
    from ttlab.drive.render import rollout_frames, write_video
    from ttlab.drive.sim.env import DriveEnv, EnvConfig
    from ttlab.drive.sim.sources import json_scene, procedural_scenes, to_pool

    dev = resolve_device(device)
    out_dir = Path(out_dir)
    lines = []
    scenes, source = procedural_scenes(8, seed=0)
    pool = to_pool(scenes, dev)

    # 1. a procedural scene with every agent replaying its recorded log
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=128, control_mode="replay", episode_length=91), pool, dev)
    p = write_video(rollout_frames(env, 80, "replay", size=384), out_dir / "procedural_replay.mp4")
    lines.append(f"- `{p}`: {source} scene `{pool.names[int(env.scene[0])]}`, logs replayed for 80 ticks.")

    # 2. the CARLA town in Waymo format, logs replayed
    carla = CARLA if CARLA.is_file() else SHARED_CARLA
    try:
        cpool = to_pool([json_scene(carla)], dev)
        env = DriveEnv(EnvConfig(num_envs=1, max_agents=128, control_mode="replay", episode_length=91), cpool, dev)
        p = write_video(rollout_frames(env, 80, "replay", size=512), out_dir / "carla_town02_replay.mp4")
        lines.append(f"- `{p}`: CARLA Town02 ({int(cpool.num_segments[0])} road segments, "
                     f"{int(cpool.exists[0].sum())} agents), logs replayed for 80 ticks.")
    except (RuntimeError, FileNotFoundError) as e:
        lines.append(f"- CARLA render skipped: {e}")

    # 3. multi-trial episodes (K=2) with random actions, "Trial k / K" overlay
    env = DriveEnv(EnvConfig(num_envs=4, max_agents=32, goal_behavior="trial", k_trials=2, trial_length=30,
                             collision_behavior="remove", offroad_behavior="remove"), pool, dev, seed=1)
    p = write_video(rollout_frames(env, 60, "random", size=384), out_dir / "trials_random.gif")
    m = {k: round(float(v), 3) for k, v in env.metrics().items() if k in ("trial_0_goal_rate", "n_trials_completed")}
    lines.append(f"- `{p}`: 2-trial episodes, random actions, overlay `Trial k / K`; metrics {m}.")

    # 4. a quick speed figure on this device
    env = DriveEnv(EnvConfig(num_envs=16, max_agents=64, episode_length=20), pool, dev)
    env.reset()
    acts = torch.randint(0, 91, (30, 16, env.num_agents), device=dev)
    for i in range(5):
        env.step(acts[i])
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(5, 30):
        env.step(acts[i])
    if dev.type == "cuda":
        torch.cuda.synchronize()
    sps = 16 * env.num_agents * 25 / (time.perf_counter() - t0)
    lines.append(f"- simulator speed on {dev}: {sps:,.0f} agent-steps/s at 16 envs x {env.num_agents} agents "
                 f"(full observations, random actions; `benchmarks/drive_sim.py` has the full table).")

    # 5. PPO: the debug preset (2-trial episodes, KV-cache transformer), then a trial evaluation + video
    from ttlab.drive.evaluate import debug as eval_debug
    from ttlab.drive.evaluate import evaluate
    from ttlab.drive.presets import debug as train_debug
    from ttlab.drive.train import train

    tcfg = train_debug()
    tcfg.root, tcfg.run_name, tcfg.device = str(out_dir / "runs"), "drive_debug", str(dev)
    tcfg.total_agent_steps = 12 * 2 * 4 * 16  # 12 updates
    t0 = time.perf_counter()
    tout = train(tcfg)
    ecfg = eval_debug()
    ecfg.checkpoint = f"{tout['run_dir']}/checkpoints/latest"
    ecfg.out, ecfg.video, ecfg.device = out_dir / "drive_eval.json", out_dir / "drive_policy.gif", str(dev)
    ev = evaluate(ecfg)
    lines.append(f"- PPO `--preset debug`: {tout['update']} updates in {time.perf_counter() - t0:.1f} s "
                 f"({tout.get('charts/SPS', float('nan')):,.0f} agent-steps/s), run `{tout['run_dir']}`; trial eval "
                 f"`{ecfg.out}`: trial_0_score {ev.get('trial_0_score', float('nan')):.3f}, ada_delta_trial_1_minus_0 "
                 f"{ev.get('ada_delta_trial_1_minus_0', float('nan')):+.3f}; video `{ev.get('video')}`.")
    return "Driving simulator:\n\n" + "\n".join(lines)
