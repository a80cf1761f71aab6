"""`ttlab demo` drive stage: render a procedural scene and the CARLA Town02 scene with replayed logs,
a short multi-trial rollout with random actions, time the simulator, then train the transformer on the
hidden-exit adaptation benchmark for about 3 minutes and report its trial-0 vs trial-1 goal rates on
held-out scenes, with a video (about 4-5 minutes in all on 2 CPU cores).

The CARLA sample is read from the shared data folder (`ttlab.common.data`: $TTLAB_SHARED_DATA, else
../shared/data beside the repo)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from ttlab.common.data import shared_data_file
from ttlab.common.device import resolve_device

CARLA_FILE = "carla_town02_womd.json"
ADAPT_SECONDS = float(os.environ.get("TTLAB_DEMO_ADAPT_SECONDS", 180))


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
    try:
        cpool = to_pool([json_scene(shared_data_file(CARLA_FILE))], dev)
        env = DriveEnv(EnvConfig(num_envs=1, max_agents=128, control_mode="replay", episode_length=91), cpool, dev)
        p = write_video(rollout_frames(env, 80, "replay", size=512), out_dir / "carla_town02_replay.mp4")
        lines.append(f"- `{p}`: CARLA Town02 ({int(cpool.num_segments[0])} road segments, "
                     f"{int(cpool.exists[0].sum())} agents), logs replayed for 80 ticks.")
    except (RuntimeError, FileNotFoundError) as e:
        lines.append(f"- CARLA render skipped: {e}")

    # 2b. the pretrained driver that ships with the package, as the ego of Town02 among the replayed logs
    carla = shared_data_file(CARLA_FILE, required=False)
    if carla is not None:
        from ttlab.drive.evaluate import EvalConfig, evaluate

        p = out_dir / "carla_town02_pretrained.gif"
        m = evaluate(EvalConfig(checkpoint="pretrained:selfplay", mode="human_replay", scenarios=str(carla),
                                num_envs=1, episodes=1, k_trials=2, device=str(dev), out=p.with_suffix(".json"),
                                video=p))
        lines.append(f"- `{p}`: the shipped `pretrained:selfplay` driver as the ego of CARLA Town02, every other "
                     f"vehicle replaying its log, 2 trials: trial-0 score {m['trial_0_score']:.2f}, trial-1 "
                     f"{m['trial_1_score']:.2f} (`benchmarks/drive_human_replay.py` has every ego).")

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

    # 5. adaptation: the transformer on the hidden-exit benchmark for ~3 minutes, then held-out paired trials
    from ttlab.drive.adapt import held_out_env, train_hidden_exit
    from ttlab.drive.adapt_eval import run_policy
    from ttlab.drive.render import Recorder

    t0 = time.perf_counter()
    policy, curve, facts = train_hidden_exit("transformer", seed=0, seconds=ADAPT_SECONDS)
    env = held_out_env(seed=1)
    rec = Recorder(env, 0, 384)

    def capture(_t: int) -> None:
        if int(env.episode[0]) < 2:  # env 0's first two episodes (2 x K trials)
            rec.capture()

    ev = run_policy(env, policy, episodes=2, on_step=capture)
    p = write_video(rec.frames, out_dir / "drive_adapt.gif")
    g0, g1 = ev["trial_0_goal_rate"], ev["trial_1_goal_rate"]
    lines.append(
        f"- adaptation (hidden exit, M = 2 exits, K = 2 trials): transformer trained {facts['train_wall_s']:.0f} s "
        f"({facts['agent_steps']:,} agent-steps, {facts['updates']} updates); held-out scenes, "
        f"{int(ev['ego_episodes'])} paired episodes: trial-0 goal rate {g0:.3f}, trial-1 {g1:.3f} "
        f"(delta {ev['ada_delta_trial_1_minus_0']:+.3f} +- {ev['ada_delta_trial_1_minus_0_se']:.3f}; exit rate "
        f"{ev['trial_0_exit_rate']:.3f} / {ev['trial_1_exit_rate']:.3f}, wrong exit {ev['trial_0_wrong_exit_rate']:.3f}"
        f" / {ev['trial_1_wrong_exit_rate']:.3f}; trial-1 goal rate after a wrong first exit "
        f"{ev['trial_1_goal_rate_after_wrong_0']:.3f}, a driver that switches gets 1). A 3-minute run is short: `benchmarks/drive_adapt.py` has the "
        f"full-budget figures. Video `{p}` (overlay `Trial k / K`, exits: green = true, grey = other; "
        f"{time.perf_counter() - t0:.0f} s for this step).")
    return "Driving simulator:\n\n" + "\n".join(lines)
