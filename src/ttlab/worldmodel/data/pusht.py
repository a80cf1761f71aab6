"""PushT episodes from the real gym-pusht simulator, driven by a scripted pusher (`ttlab wm data pusht`).

Two pushers (`--pusher`):
  - `smooth` (default): moves like a human demonstration. The PD target (the action) glides at a bounded
    speed towards a waypoint, so the agent travels a few pixels per model frame at 64x64; it walks round
    the T to a point behind it, then pushes through (or beside, to turn it) towards the goal pose, and
    repeats. See `motion_stats` and docs/notes/wm_pusht_motion.md for the measured per-frame motion.
  - `scripted`: the earlier pusher. It jumps its target behind the T, pushes through its centre in a
    random direction, and adds Gaussian noise to every target: about 22 px of agent and 15 px of T
    motion per 5-step model frame at 64x64, too fast to read velocity from.
Unlike a random walk both move the T in every episode, which is what a world model has to learn.
Episodes are rendered offscreen and written in DINO-WM's PushT layout (so `DinoWMSource` reads them):

    obses/episode_XXX.mp4  rendered frames, resolution x resolution, 10 fps
    states.pth             (N, T, 5) agent x, y, block x, y, block angle (world units, 0..512)
    abs_actions.pth        (N, T, 2) PD target of the agent
    rel_actions.pth        (N, T, 2) target minus the agent position at that step
    velocities.pth         (N, T, 2) agent velocity
    seq_lengths.pkl        list of N ints (a pickle because the upstream layout is one; ints only)
    ttlab_pusht.json       how the data was made

Episode i uses seed (seed, i) whatever the number of workers, so the output is reproducible.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ttlab.common.checkpoint import atomic_write_text
from ttlab.common.logging import progress
from ttlab.worldmodel.data.video import write_mp4

TEE_CENTRE = np.array([0.0, 45.0])  # centre of gravity of the T in its body frame


def tee_centre(block_pose: np.ndarray) -> np.ndarray:
    """World position of the T's centre from its (x, y, angle) pose."""
    c, s = np.cos(block_pose[2]), np.sin(block_pose[2])
    return block_pose[:2] + np.array([c * TEE_CENTRE[0] - s * TEE_CENTRE[1], s * TEE_CENTRE[0] + c * TEE_CENTRE[1]])


class ScriptedPusher:
    """Approach a point behind the T (opposite a random push direction), then push through its centre."""

    def __init__(self, rng: np.random.Generator, noise: float = 8.0):
        self.rng, self.noise = rng, noise
        self._new_push()

    def _new_push(self) -> None:
        a = self.rng.uniform(0, 2 * np.pi)
        self.dir = np.array([np.cos(a), np.sin(a)])
        self.phase, self.steps = "approach", 0
        self.push_steps = int(self.rng.integers(6, 16))

    def act(self, agent: np.ndarray, block_pose: np.ndarray) -> np.ndarray:
        centre = tee_centre(block_pose)
        if self.phase == "approach":
            target = centre - 110.0 * self.dir
            if np.linalg.norm(agent - target) < 25.0 or self.steps >= 12:
                self.phase, self.steps = "push", 0
        if self.phase == "push":
            target = centre + 60.0 * self.dir
            if self.steps >= self.push_steps:
                self._new_push()
        self.steps += 1
        return np.clip(target + self.rng.normal(0.0, self.noise, 2), 15.0, 497.0)


GOAL_CENTRE = np.array([256.0, 256.0]) + np.array([-np.sin(np.pi / 4), np.cos(np.pi / 4)]) * TEE_CENTRE[1]
"""Where the T's centre sits at gym-pusht's goal pose (256, 256, pi/4)."""


class SmoothPusher:
    """A goal-directed pusher whose PD target moves smoothly, at human speed.

    The target `c` moves at most `speed` world units per step towards the current waypoint (512 units =
    64 px at 64x64, so 8 units/step = 5 px per 5-step model frame), with slowly varying (Ornstein-Uhlenbeck)
    jitter. Each push: pick a direction towards the goal (noise ~0.5 rad) and a lateral offset (off-centre
    pushes turn the T); go round the T to a point `standoff` behind it, then push through for a drawn
    number of steps; repeat.
    """

    def __init__(self, rng: np.random.Generator, speed: tuple[float, float] = (7.0, 11.0),
                 push_speed: tuple[float, float] = (4.0, 7.0), standoff: float = 70.0):
        self.rng, self.standoff = rng, standoff
        self.speed = float(rng.uniform(*speed))
        self.push_speed_range = push_speed
        self.c: np.ndarray | None = None
        self.jitter = np.zeros(2)
        self._new_push(None)

    def _new_push(self, block_pose: np.ndarray | None) -> None:
        centre = tee_centre(block_pose) if block_pose is not None else GOAL_CENTRE
        to_goal = GOAL_CENTRE - centre
        base = np.arctan2(to_goal[1], to_goal[0]) if np.linalg.norm(to_goal) > 20 else self.rng.uniform(0, 2 * np.pi)
        a = base + self.rng.normal(0.0, 0.5)
        self.dir = np.array([np.cos(a), np.sin(a)])
        self.offset = float(self.rng.uniform(-35.0, 35.0))  # lateral contact offset: turns the T
        self.push_speed = float(self.rng.uniform(*self.push_speed_range))
        self.phase, self.steps = "approach", 0
        self.push_steps = int(self.rng.integers(20, 45))

    def _waypoint(self, agent: np.ndarray, centre: np.ndarray) -> np.ndarray:
        side = np.array([-self.dir[1], self.dir[0]])
        behind = centre - self.standoff * self.dir + self.offset * side
        if self.phase == "push":
            return centre + 80.0 * self.dir + self.offset * side
        # walk round the T: from in front of it (push-wise), first to a point beside it, then behind it
        rel = agent - centre
        if rel @ self.dir > -30.0 and abs(rel @ side) < 95.0:
            s = np.sign(rel @ side) or 1.0
            return centre + 110.0 * s * side - 50.0 * self.dir
        return behind

    def act(self, agent: np.ndarray, block_pose: np.ndarray) -> np.ndarray:
        centre = tee_centre(block_pose)
        if self.c is None:
            self.c = agent.copy()
        if self.phase == "approach":
            behind = centre - self.standoff * self.dir + self.offset * np.array([-self.dir[1], self.dir[0]])
            if np.linalg.norm(agent - behind) < 15.0 or self.steps >= 60:
                self.phase, self.steps = "push", 0
        elif self.steps >= self.push_steps:
            self._new_push(block_pose)
        self.steps += 1
        w = self._waypoint(agent, centre)
        v = self.push_speed if self.phase == "push" else self.speed
        d = w - self.c
        n = np.linalg.norm(d)
        self.c = self.c + (d if n <= v else d / n * v)
        self.jitter = 0.85 * self.jitter + self.rng.normal(0.0, 1.0, 2)  # OU: smooth, std ~1.9 units
        self.c = np.clip(self.c, 20.0, 492.0)
        return np.clip(self.c + self.jitter, 15.0, 497.0)


PUSHERS = ("smooth", "scripted")


def make_pusher(name: str, rng: np.random.Generator):
    if name == "smooth":
        return SmoothPusher(rng)
    if name == "scripted":
        return ScriptedPusher(rng)
    raise ValueError(f"pusher {name!r}: expected one of {', '.join(PUSHERS)}")


def motion_stats(states: np.ndarray, lengths: list[int], interval: int, resolution: int = 64) -> dict[str, float]:
    """Per-model-frame displacement (pixels at `resolution`) of the agent and of the T's centre, and the T's
    turn (degrees), over frames `interval` raw steps apart: mean, median and 90th percentile, plus the
    fraction of model frames in which the T moves by more than half a pixel."""
    px = resolution / 512.0
    agent, tee, turn = [], [], []
    for s, n in zip(states, lengths, strict=True):
        s = np.asarray(s[:n], np.float64)[::interval]  # (T', 5) at the model's frame rate
        if len(s) < 2:
            continue
        centres = np.stack([tee_centre(b) for b in s[:, 2:5]])
        agent.append(np.linalg.norm(np.diff(s[:, :2], axis=0), axis=1) * px)
        tee.append(np.linalg.norm(np.diff(centres, axis=0), axis=1) * px)
        dth = np.diff(s[:, 4])
        turn.append(np.degrees(np.abs((dth + np.pi) % (2 * np.pi) - np.pi)))
    if not agent:
        raise ValueError(f"motion_stats: no episode has two frames {interval} steps apart")
    a, t, r = np.concatenate(agent), np.concatenate(tee), np.concatenate(turn)
    q = lambda x, k: float(np.percentile(x, k))  # noqa: E731
    return {"interval": interval, "resolution": resolution,
            "agent_px_mean": float(a.mean()), "agent_px_median": q(a, 50), "agent_px_p90": q(a, 90),
            "tee_px_mean": float(t.mean()), "tee_px_median": q(t, 50), "tee_px_p90": q(t, 90),
            "tee_deg_mean": float(r.mean()), "tee_moving_fraction": float((t > 0.5).mean())}


def _headless() -> None:
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


def rollout_episode(seed: int, resolution: int = 96, max_steps: int = 100,
                    pusher: str = "smooth") -> dict[str, np.ndarray]:
    """One episode of `max_steps` steps: frames uint8 (T, r, r, 3), states (T, 5), abs_actions, rel_actions,
    velocities (T, 2); frame t is the scene before action t."""
    _headless()
    # deferred on purpose: an optional extra, and pygame reads the SDL_* variables set above when imported
    from gym_pusht.envs import PushTEnv

    env = PushTEnv(obs_type="pixels_agent_pos", render_mode="rgb_array", observation_width=resolution,
                   observation_height=resolution)
    rng = np.random.default_rng(seed)
    policy = make_pusher(pusher, rng)
    obs, info = env.reset(seed=int(seed) % 2**32)
    frames, states, acts, vels = [], [], [], []
    for _ in range(max_steps):
        agent, block = np.asarray(info["pos_agent"], np.float64), np.asarray(info["block_pose"], np.float64)
        action = policy.act(agent, block)
        frames.append(obs["pixels"])
        states.append([agent[0], agent[1], block[0], block[1], block[2] % (2 * np.pi)])
        acts.append(action)
        vels.append(np.asarray(info["vel_agent"], np.float64))
        obs, _, _, _, info = env.step(action)
    env.close()
    states_ = np.asarray(states, np.float64)
    acts_ = np.asarray(acts, np.float64)
    return {"frames": np.stack(frames).astype(np.uint8), "states": states_.astype(np.float32),
            "abs_actions": acts_.astype(np.float32), "rel_actions": (acts_ - states_[:, :2]).astype(np.float32),
            "velocities": np.asarray(vels, np.float32)}


def block_travel(states: np.ndarray) -> float:
    """Summed |dx| + |dy| of the T over an episode (world units)."""
    return float(np.abs(np.diff(states[:, 2:4], axis=0)).sum())


def _episode_job(i: int, seed: int, resolution: int, max_steps: int, out: str, crf: int,
                 pusher: str) -> dict[str, Any]:
    ep = rollout_episode(seed, resolution, max_steps, pusher)
    write_mp4(Path(out) / "obses" / f"episode_{i:03d}.mp4", ep.pop("frames"), fps=10, crf=crf)
    return {"i": i, **ep}


def episode_seed(seed: int, i: int) -> int:
    return int(np.random.SeedSequence([seed, i]).generate_state(1)[0])


def generate_pusht(out: str | Path, num_episodes: int = 100, resolution: int = 64, max_steps: int = 100,
                   workers: int = 2, seed: int = 0, show_progress: bool | None = None, crf: int = 18,
                   overwrite: bool = False, pusher: str = "smooth") -> dict[str, Any]:
    """Roll out `num_episodes` episodes in `workers` processes and write them to `out`; returns a summary."""
    out = Path(out)
    if num_episodes < 1 or max_steps < 1:
        raise ValueError(f"need episodes >= 1 and max_steps >= 1, got {num_episodes}, {max_steps}")
    if pusher not in PUSHERS:
        raise ValueError(f"pusher {pusher!r}: expected one of {', '.join(PUSHERS)}")
    if resolution < 16 or resolution % 2:
        raise ValueError(f"resolution must be even and >= 16 (H.264), got {resolution}")
    if (out / "states.pth").exists() and not overwrite:
        raise FileExistsError(f"{out} already holds a dataset; pass --overwrite to replace it")
    (out / "states.pth").unlink(missing_ok=True)
    (out / "obses").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    jobs = [(i, episode_seed(seed, i), resolution, max_steps, str(out), crf, pusher) for i in range(num_episodes)]
    results: list[dict[str, Any]] = [{}] * num_episodes
    with progress(num_episodes, "pusht episodes", disable=None if show_progress is None else not show_progress) as bar:
        if workers <= 1:
            for job in jobs:
                r = _episode_job(*job)
                results[r["i"]] = r
                bar.advance(1)
        else:
            with ProcessPoolExecutor(min(workers, num_episodes), mp_context=get_context("spawn")) as pool:
                for fut in as_completed([pool.submit(_episode_job, *job) for job in jobs]):
                    r = fut.result()
                    results[r["i"]] = r
                    bar.advance(1)
    lengths = [len(r["states"]) for r in results]
    t_max = max(lengths)

    def padded(key: str) -> torch.Tensor:
        x = np.zeros((num_episodes, t_max, results[0][key].shape[1]), np.float32)  # (N, T, D)
        for i, r in enumerate(results):
            x[i, : len(r[key])] = r[key]
        return torch.from_numpy(x)

    for key in ("abs_actions", "rel_actions", "velocities"):
        torch.save(padded(key), out / f"{key}.pth")
    with open(out / "seq_lengths.pkl", "wb") as f:
        pickle.dump([int(t) for t in lengths], f)
    secs = time.perf_counter() - t0
    travel = [block_travel(r["states"]) for r in results]
    summary = {"out": str(out), "episodes": num_episodes, "frames": int(sum(lengths)), "resolution": resolution,
               "max_steps": max_steps, "workers": workers, "seed": seed, "seconds": secs,
               "frames_per_s": sum(lengths) / max(secs, 1e-9), "mean_block_travel": float(np.mean(travel)),
               "min_block_travel": float(np.min(travel)), "pusher": pusher,
               "motion_interval5": motion_stats([r["states"] for r in results], lengths, 5, resolution)}
    atomic_write_text(out / "ttlab_pusht.json", json.dumps(summary, indent=2) + "\n")
    torch.save(padded("states"), out / "states.pth")  # last: its presence marks a complete dataset
    return summary


@dataclass
class PushTConfig:
    """Generate PushT episodes with the real gym-pusht simulator and a scripted pusher (DINO-WM layout)."""

    out: Path = Path("runs/data/pusht64")
    """output directory"""
    episodes: int = 200
    """number of episodes"""
    resolution: int = 64
    """frame side in pixels (64, 96, 224, ...; even)"""
    max_steps: int = 100
    """steps (frames) per episode"""
    workers: int = 2
    """parallel worker processes (1 = in this process)"""
    seed: int = 0
    """base seed; episode i uses (seed, i)"""
    crf: int = 18
    """H.264 quality (lower = better, bigger files)"""
    overwrite: bool = False
    """replace an existing dataset at --out"""
    pusher: str = "smooth"
    """smooth (human-like speed, goal-directed) | scripted (the earlier fast, noisy pusher)"""


def branch_clips(seed: int, start: int = 20, branches: int = 4, num_frames: int = 5, n_ctx: int = 2,
                 frame_interval: int = 5, speed: float = 9.0, resolution: int = 64,
                 angle: float = 0.0) -> dict[str, np.ndarray]:
    """Clips that share their context and differ only in the actions after it: an action-identifiability probe.

    The smooth pusher drives episode `seed` for `start` raw steps plus the context's; then each branch b moves
    the PD target from the agent's position in direction `angle` + 2 pi b / branches (radians) at `speed` world
    units per step for the rest of the clip. The simulator is deterministic, so every branch's context frames are bit-identical
    and only the actions tell the futures apart: a model that ignores its actions can at best draw their mean.
    Returns frames uint8 (branches, num_frames, r, r, 3), raw rel_actions and abs_actions (branches, n_raw, 2)
    over the clip's raw steps (n_raw = (num_frames - 1) * frame_interval), states (branches, num_frames, 5)."""
    _headless()
    # deferred on purpose: an optional extra, and pygame reads the SDL_* variables set above when imported
    from gym_pusht.envs import PushTEnv

    if not 1 <= n_ctx < num_frames or branches < 2:
        raise ValueError(f"branch_clips: need 1 <= n_ctx < num_frames and branches >= 2, got n_ctx={n_ctx}, "
                         f"num_frames={num_frames}, branches={branches}")
    env = PushTEnv(obs_type="pixels_agent_pos", render_mode="rgb_array", observation_width=resolution,
                   observation_height=resolution)
    shared = start + (n_ctx - 1) * frame_interval  # raw steps before the first branched action
    n_raw = (num_frames - 1) * frame_interval
    policy = make_pusher("smooth", np.random.default_rng(seed))
    obs, info = env.reset(seed=int(seed) % 2**32)
    prefix = []
    for _ in range(shared):
        a = policy.act(np.asarray(info["pos_agent"], np.float64), np.asarray(info["block_pose"], np.float64))
        prefix.append(a)
        obs, _, _, _, info = env.step(a)
    frames, rel, absolute, states = [], [], [], []
    for b in range(branches):
        obs, info = env.reset(seed=int(seed) % 2**32)
        fr, ra, aa, st = [], [], [], []
        th = angle + 2 * np.pi * b / branches
        direction = np.array([np.cos(th), np.sin(th)])
        target = None
        for t in range(start + n_raw + 1):
            agent, block = np.asarray(info["pos_agent"], np.float64), np.asarray(info["block_pose"], np.float64)
            if t >= start and (t - start) % frame_interval == 0:
                fr.append(obs["pixels"])
                st.append([agent[0], agent[1], block[0], block[1], block[2] % (2 * np.pi)])
            if t == start + n_raw:
                break
            if t < shared:
                a = prefix[t]
            else:
                target = agent.copy() if target is None else target
                target = np.clip(target + speed * direction, 15.0, 497.0)
                a = target
            if t >= start:
                ra.append(np.asarray(a, np.float64) - agent)
                aa.append(np.asarray(a, np.float64))
            obs, _, _, _, info = env.step(a)
        frames.append(np.stack(fr))
        rel.append(np.stack(ra))
        absolute.append(np.stack(aa))
        states.append(np.asarray(st))
    env.close()
    return {"frames": np.stack(frames).astype(np.uint8), "rel_actions": np.stack(rel).astype(np.float32),
            "abs_actions": np.stack(absolute).astype(np.float32), "states": np.stack(states).astype(np.float32)}
