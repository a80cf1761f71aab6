"""`ttlab demo` drive stage (about 6 minutes on 2 idle CPU cores):

1. the simulator: a procedural scene and the CARLA Town02 scene with replayed logs, the shipped self-play
   driver among Town02's logs, multi-trial episodes with random actions, the simulator's speed;
2. adaptation from shipped weights: the hidden-exit T-maze transformer (KV cache kept across trials) and the
   memoryless MLP that trained with the same budget (`pretrained:tmaze_transformer`, `pretrained:tmaze_mlp`),
   each evaluated here on held-out scenes with paired trials: trial-1 minus trial-0 goal rate and its
   standard error;
3. learning live: the transformer trained from scratch here for `TTLAB_DEMO_ADAPT_SECONDS` (default 120 s),
   its learning curve (goal rate per trial of the training rollouts) and its held-out gap. Two minutes is
   far short of the 1.5M agent-steps at which the gap appears (`benchmarks/drive_adapt.py`); the curve shows
   the goal rate rising, the gap from live training is reported as measured.

The CARLA sample is read from the shared data folder (`ttlab.common.data`: $TTLAB_SHARED_DATA, else
../shared/data beside the repo); without it that render is skipped with a line saying so.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from PIL import Image, ImageDraw

from ttlab.common.checkpoint import load_checkpoint
from ttlab.common.data import shared_data_file
from ttlab.common.device import resolve_device
from ttlab.common.heartbeat import step
from ttlab.common.stage_report import StageReport, picture, rel
from ttlab.drive.adapt import held_out_env, train_hidden_exit
from ttlab.drive.adapt_eval import run_policy
from ttlab.drive.config import EnvConfig
from ttlab.drive.evaluate import EvalConfig, evaluate
from ttlab.drive.policy_io import load_policy
from ttlab.drive.pretrained import available, resolve
from ttlab.drive.render import Recorder, rollout_frames, write_video
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.sources import json_scene, procedural_scenes, to_pool

CARLA_FILE = "carla_town02_womd.json"
BUDGET_S = 360.0
"""The stage's budget on 2 idle cores (the heartbeat's ETA)."""
LIVE_SECONDS = float(os.environ.get("TTLAB_DEMO_ADAPT_SECONDS", 120))
SHIPPED = {"transformer": "tmaze_transformer", "mlp": "tmaze_mlp"}
"""core -> the shipped T-maze policy (src/ttlab/drive/pretrained/<name>.safetensors + .json)."""
PRESETS = {"transformer": "hidden_exit", "mlp": "hidden_exit_mlp"}
LABELS = {"transformer": "KV cache across trials", "mlp": "memoryless"}
EVAL_EPISODES = 8
"""Episodes per held-out env (64 envs): 512 paired episodes per policy."""
HELD_OUT_SEED = 1


def simulator(out_dir: Path, summary_dir: Path, dev: torch.device) -> list[str]:
    """Renders and the speed figure: markdown lines."""
    lines = []
    scenes, source = procedural_scenes(8, seed=0)
    pool = to_pool(scenes, dev)
    step("rendering a procedural scene with replayed logs", 0.02)
    env = DriveEnv(EnvConfig(num_envs=1, max_agents=128, control_mode="replay", episode_length=91), pool, dev)
    p = write_video(rollout_frames(env, 80, "replay", size=384), out_dir / "procedural_replay.mp4")
    lines.append(f"- {picture(p, summary_dir, 'procedural scene, logs replayed')}: {source} scene "
                 f"`{pool.names[int(env.scene[0])]}`, every agent replaying its recorded log for 80 ticks.")

    carla = shared_data_file(CARLA_FILE, required=False)
    if carla is None:
        lines.append(f"- CARLA Town02 renders skipped: {CARLA_FILE} is not in the shared data folder "
                     "(set $TTLAB_SHARED_DATA).")
    else:
        step("rendering CARLA Town02 with replayed logs", 0.05)
        cpool = to_pool([json_scene(carla)], dev)
        env = DriveEnv(EnvConfig(num_envs=1, max_agents=128, control_mode="replay", episode_length=91), cpool, dev)
        p = write_video(rollout_frames(env, 80, "replay", size=512), out_dir / "carla_town02_replay.mp4")
        lines.append(f"- {picture(p, summary_dir, 'CARLA Town02, logs replayed')}: CARLA Town02 in Waymo format "
                     f"({int(cpool.num_segments[0])} road segments, {int(cpool.exists[0].sum())} agents), logs "
                     "replayed for 80 ticks.")
        step("the shipped self-play driver in CARLA Town02", 0.1)
        p = out_dir / "carla_town02_pretrained.gif"
        m = evaluate(EvalConfig(checkpoint="pretrained:selfplay", mode="human_replay", scenarios=str(carla),
                                num_envs=1, episodes=1, k_trials=2, device=str(dev), out=p.with_suffix(".json"),
                                video=p))
        lines.append(f"- the shipped `pretrained:selfplay` driver as the ego of CARLA Town02, every other vehicle "
                     f"replaying its log, 2 trials: trial-0 score {m['trial_0_score']:.2f}, trial-1 "
                     f"{m['trial_1_score']:.2f} (one episode; `benchmarks/drive_human_replay.py` has every ego).\n\n"
                     f"  {picture(p, summary_dir, 'pretrained self-play driver in Town02')}")

    step("multi-trial episodes with random actions", 0.15)
    env = DriveEnv(EnvConfig(num_envs=4, max_agents=32, goal_behavior="trial", k_trials=2, trial_length=30,
                             collision_behavior="remove", offroad_behavior="remove"), pool, dev, seed=1)
    p = write_video(rollout_frames(env, 60, "random", size=384), out_dir / "trials_random.gif")
    lines.append(f"- 2-trial episodes with random actions (overlay `Trial k / K`; every entity is put back at "
                 f"each trial start):\n\n  {picture(p, summary_dir, 'random actions, 2 trials')}")

    step("timing the simulator", 0.18)
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
                 f"(full observations, random actions, under this machine's load; `benchmarks/drive_sim.py` has "
                 "the full table).")
    return lines


def paired_row(name: str, ev: dict) -> str:
    """One markdown table row of a held-out paired evaluation."""
    d, se = ev["ada_delta_trial_1_minus_0"], ev["ada_delta_trial_1_minus_0_se"]
    ratio = d / se if se > 0 else float("inf") if d else 0.0
    return (f"| {name} | {ev['trial_0_goal_rate']:.3f} | {ev['trial_1_goal_rate']:.3f} | **{d:+.3f} +- {se:.3f}** | "
            f"{ratio:.1f} | {ev['trial_1_goal_rate_after_wrong_0']:.3f} | {int(ev['ego_episodes'])} |")


TABLE_HEAD = ("| policy | trial-0 goal rate | trial-1 goal rate | gap (trial 1 - trial 0) +- SE | gap / SE | "
              "trial-1 goal rate after a wrong first exit | paired episodes |\n|---|---|---|---|---|---|---|")


def shipped(out_dir: Path, summary_dir: Path) -> tuple[list[str], dict]:
    """The shipped T-maze policies on held-out scenes (paired trials) and a GIF of the transformer. A policy this
    checkout does not ship is named as missing, with the command that makes it."""
    have = {core: name for core, name in SHIPPED.items() if name in available()}
    missing = [f"`pretrained:{name}` (`ttlab drive train --preset {PRESETS[core]} --seed 0`, then "
               "`python -m ttlab.drive.pretrained export`)" for core, name in SHIPPED.items() if core not in have]
    if not have:
        return [f"**Adaptation from shipped weights: not available** in this checkout: {'; '.join(missing)}."], {}
    results, rows, commands, gif = {}, [], [], None
    for i, (core, name) in enumerate(have.items()):
        step(f"evaluating shipped pretrained:{name} on held-out T-mazes", 0.22 + 0.04 * i)
        stem = resolve(f"pretrained:{name}")
        prov = load_checkpoint(stem, "cpu").get("provenance", {})
        commands.append(f"`{prov.get('command', '(command not recorded)')}`")
        env = held_out_env(seed=HELD_OUT_SEED)
        policy = load_policy(stem, env, torch.device("cpu")).eval()
        rec = Recorder(env, 0, 384) if core == "transformer" else None

        def capture(_t: int, env=env, rec=rec) -> None:
            if rec is not None and int(env.episode[0]) < 2:  # env 0's first two episodes (2 x K trials)
                rec.capture()

        results[core] = run_policy(env, policy, EVAL_EPISODES, on_step=capture)
        rows.append(paired_row(f"`pretrained:{name}` ({LABELS[core]})", results[core]))
        if rec is not None:
            gif = write_video(rec.frames, out_dir / "tmaze_shipped_transformer.gif")
    lines = [
        "**Adaptation, from shipped weights (trained before this demo, evaluated here).** The hidden-exit T-maze: "
        "one ego before a T-junction, one of its 2 exits is the true goal (drawn per episode), K = 2 trials of 55 "
        "ticks; reaching an exit is shown to the ego, so a policy with memory goes straight to the true exit in "
        "trial 1 and a memoryless one cannot do better than in trial 0. Held-out scenes (other seeds than "
        f"training), {EVAL_EPISODES} episodes x 64 envs, trial 1 paired with trial 0 in each episode:",
        "", TABLE_HEAD, *rows, ""]
    if "transformer" in results:
        tr = results["transformer"]
        beyond = tr["ada_delta_trial_1_minus_0"] > 2 * tr["ada_delta_trial_1_minus_0_se"]
        lines.append(f"The transformer's gap is {'**beyond**' if beyond else '**not beyond**'} twice its standard "
                     "error.")
    if missing:
        lines.append(f"Not shipped in this checkout: {'; '.join(missing)}.")
    lines.append(f"The shipped weights were trained with {' and '.join(commands)} (the `hidden_exit` preset: 1.5M "
                 "agent-steps, a few CPU minutes on an idle core; its training uses a privileged auxiliary head that "
                 "predicts the true exit, `ppo.aux_task_coef = 1`, a training target only: the policy never sees "
                 "the label).")
    if gif is not None:
        lines.append("Memory of the first trial, on held-out T-mazes (green = true exit, grey = the other):\n\n"
                     f"{picture(gif, summary_dir, 'shipped T-maze transformer, 2 episodes')}")
    return lines, results


def plot_curve(curve: list[dict], path: Path) -> Path:
    """Goal rate of the training rollouts per update: trial 0 dashed, trial 1 solid, gap below (PIL)."""
    img = Image.new("RGB", (720, 340), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    x0, y0, x1, y1 = 60, 30, 700, 290
    xmax = max((c["agent_steps"] for c in curve), default=1)
    draw.rectangle((x0, y0, x1, y1), outline=(0, 0, 0))

    def px(x: float, y: float) -> tuple[float, float]:  # y in [-0.25, 1]
        return x0 + (x1 - x0) * x / max(xmax, 1), y1 - (y1 - y0) * (min(max(y, -0.25), 1.0) + 0.25) / 1.25

    for v in (-0.25, 0.0, 0.25, 0.5, 0.75, 1.0):
        draw.line([px(0, v), px(xmax, v)], fill=(150, 150, 150) if v == 0 else (228, 228, 228))
        draw.text((x0 - 42, px(0, v)[1] - 6), f"{v:+.2f}", fill=(0, 0, 0))
    xs = [c["agent_steps"] for c in curve]
    g0 = [c.get("trial_0_goal_rate", 0.0) for c in curve]
    g1 = [c.get("trial_1_goal_rate", 0.0) for c in curve]
    for ys, rgb, dashed in ((g0, (31, 119, 180), True), (g1, (31, 119, 180), False),
                            ([b - a for a, b in zip(g0, g1, strict=True)], (214, 39, 40), False)):
        pts = [px(x, y) for x, y in zip(xs, ys, strict=True)]
        for i, (a, b) in enumerate(zip(pts, pts[1:], strict=False)):
            if not dashed or i % 2 == 0:
                draw.line([a, b], fill=rgb, width=2)
    draw.text((x0, 8), "live training, hidden-exit T-maze: goal rate of the training rollouts, trial 0 dashed, "
              "trial 1 solid; red: trial 1 - trial 0", fill=(0, 0, 0))
    draw.text((x1 - 190, y1 + 8), f"agent-steps (max {xmax / 1e3:.0f}K)", fill=(0, 0, 0))
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def live(out_dir: Path, summary_dir: Path, seconds: float) -> tuple[list[str], dict]:
    """Train the transformer from scratch for `seconds`, plot its curve, evaluate it on the held-out T-mazes."""
    t_start = time.perf_counter()

    def log(msg: str) -> None:  # every 10 updates; the heartbeat prints it
        step(f"live training ({msg.strip()})", 0.3 + 0.6 * min(1.0, (time.perf_counter() - t_start) / seconds),
             show=False)

    step(f"live training of the transformer for {seconds:.0f} s", 0.3)
    policy, curve, facts = train_hidden_exit("transformer", seed=0, seconds=seconds, log=log)
    png = plot_curve(curve, out_dir / "tmaze_live_curve.png")
    step("evaluating the live transformer on held-out T-mazes", 0.92)
    ev = run_policy(held_out_env(seed=HELD_OUT_SEED), policy, EVAL_EPISODES)
    first = curve[0] if curve else {}
    k = max(1, len(curve) // 5)  # the last fifth of the updates, to smooth the rollout noise
    tail = curve[-k:] if curve else []
    mean = lambda key: sum(c.get(key, 0.0) for c in tail) / max(1, len(tail))  # noqa: E731
    lines = [
        f"**Learning live (trained in this demo).** The same transformer trained from scratch here for "
        f"{facts['train_wall_s']:.0f} s ({facts['agent_steps']:,} agent-steps, {facts['updates']} PPO updates; "
        f"the shipped weights had 1.5M). Training-rollout goal rate, trial 0 / trial 1: "
        f"{first.get('trial_0_goal_rate', 0):.3f} / {first.get('trial_1_goal_rate', 0):.3f} at the first update, "
        f"{mean('trial_0_goal_rate'):.3f} / {mean('trial_1_goal_rate'):.3f} over the last {len(tail)}. Held-out, "
        "paired:",
        "",
        TABLE_HEAD,
        paired_row("transformer trained live", ev),
        "",
        "A gap this short a run does not show (in `benchmarks/drive_adapt.py` it appears after about 1.2M "
        "agent-steps, when the driving itself is learned); the curve shows the driving being learned:\n\n"
        f"{picture(png, summary_dir, 'live learning curve')}",
    ]
    return lines, {"eval": ev, "facts": facts, "curve_png": rel(png, summary_dir)}


def run(out_dir: Path, device: str = "auto") -> StageReport:
    dev = resolve_device(device)
    out_dir = Path(out_dir)
    summary_dir = out_dir.parent
    t0 = time.perf_counter()
    sim_lines = simulator(out_dir, summary_dir, dev)
    t_sim = time.perf_counter() - t0
    shipped_lines, res = shipped(out_dir, summary_dir)
    live_lines, lv = live(out_dir, summary_dir, LIVE_SECONDS)
    gap = lambda ev: f"{ev['ada_delta_trial_1_minus_0']:+.3f} +- {ev['ada_delta_trial_1_minus_0_se']:.3f}"  # noqa: E731
    figure = "held-out T-maze gap (trial 1 - trial 0 goal rate +- SE): "
    figure += "".join(f"shipped {core} {gap(ev)}; " for core, ev in res.items()) or "no shipped weights; "
    figure += f"transformer trained live {lv['facts']['train_wall_s']:.0f} s: {gap(lv['eval'])}"
    body = "\n".join(["### Simulator", "", *sim_lines, f"\n(simulator part: {t_sim:.0f} s)", "",
                      "### Adaptation across trials", "", *shipped_lines, "", *live_lines])
    return StageReport(shows="a driver adapting across trials (T-maze, memory vs memoryless), the simulator",
                       figure=figure, body=body)
