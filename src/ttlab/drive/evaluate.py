"""`ttlab drive eval`: evaluate a trained policy checkpoint on exactly N episodes per env, trials paired.

Modes:
- self_play: every controlled agent is driven by the policy (the training setting), one trial per episode;
- trial: multi-trial episodes (goal_behavior = trial, K trials) in the training setting; reports
  `trial_{k}_score`, `trial_{k}_goal_rate` and `ada_delta_trial_{k}_minus_0` for every k;
- human_replay: trial mode with only the ego (the first controllable vehicle of each scene) driven by the
  policy; every other logged agent replays its (main, human) log, rewound to `init_steps` at every trial
  start with everything else, so all K trials face the same traffic and differ only by what the ego does
  (and remembers). Every logged agent of the scene is present (`--max-agents` defaults to all of them);
  one not valid at `init_steps` enters when its valid window starts and leaves when it ends. Same
  `trial_{k}_*` and paired `ada_delta_trial_{k}_minus_0` metrics, over the egos.

Counting. Every env runs until it has finished exactly `episodes` episodes (of K trials) and only those
are counted: an env that finishes early keeps stepping (the batch steps together) but its later trials
are not recorded, so a fast env weighs as much as a slow one. Every finished trial's per-agent outcomes
(goal, collision, offroad, and any other per-agent outcome the env's trial metrics receive) are recorded
per (env, episode, trial, agent), and trial k is paired with trial 0 of the same episode and agent:
`ada_delta_trial_{k}_minus_0_{name}` is the mean of the paired differences, with its standard error
(`..._stderr`) and the number of pairs.

Population play (`--partners`, default the checkpoint's training population): slot 0 is the policy's ego and every
other slot is driven by a partner drawn per episode (`drive.partners`); the same paired metrics are reported
overall and per partner, with time to goal (`drive.partner_eval`).

Env settings come from the checkpoint (training stores its EnvConfig and scenario source); a flag given
here overrides one, with a warning naming the difference. The scenes are the training source's with a
held-out procedural seed (training seed + 1000) unless --scenarios is given.

Writes the metrics as JSON (`--out`) and, with `--video`, a rendered rollout of env 0.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from ttlab.common.checkpoint import atomic_write_text, load_checkpoint
from ttlab.common.config import from_dict, parse_config
from ttlab.common.device import resolve_device, seed_everything
from ttlab.common.outdir import writable_parent
from ttlab.drive.config import EnvConfig
from ttlab.drive.paired import PairedTrials
from ttlab.drive.partner_eval import partner_summary, policy_ego, run_paired
from ttlab.drive.partners import build_population
from ttlab.drive.policy.dist import sample
from ttlab.drive.pretrained import resolve as resolve_pretrained
from ttlab.drive.render import Recorder, write_video
from ttlab.drive.rollout import _flat
from ttlab.drive.train import load_policy, make_env

MODES = ("self_play", "human_replay", "trial")


@dataclass
class EvalConfig:
    """Evaluate a drive policy checkpoint."""

    checkpoint: str = ""
    """Checkpoint stem, e.g. runs/drive/<run>/checkpoints/latest."""
    mode: Literal["self_play", "human_replay", "trial"] = "self_play"
    """self_play | human_replay | trial."""
    scenarios: str | None = None
    """Scene source (default: the training source with a held-out procedural seed, training seed + 1000)."""
    num_envs: int = 32
    """Parallel envs."""
    max_agents: int | None = None
    """Agent slots per env (default: the checkpoint's in trial mode; self_play and human_replay: every agent of the
    scene)."""
    k_trials: int | None = None
    """Trials per episode (trial and human_replay modes; default: the checkpoint's, else 2)."""
    trial_length: int | None = None
    """Ticks per trial (trial, human_replay) / per episode (self_play); default: the checkpoint's, else 91."""
    hidden_goal: bool | None = None
    """Hidden-goal scenes (trial mode: default the checkpoint's; human_replay: default off)."""
    episodes: int = 2
    """Episodes (of K trials in trial mode) counted per env: exactly this many, every env."""
    partner_slots: int | None = None
    """Partner slots (must match training; default: the checkpoint's)."""
    road_slots: int | None = None
    """Road slots (must match training; default: the checkpoint's)."""
    scene_order: Literal["random", "cycle"] = "random"
    """random: each env's episodes draw scenes from the pool at random, with replacement | cycle: env e's k-th
    episode plays scene (e + k * num_envs) mod pool size, so num_envs x episodes episodes play a pool of that
    size exactly once (`EnvConfig.scene_order`)."""
    greedy: bool = False
    """Take the most likely action instead of sampling."""
    partners: tuple[str, ...] | None = None
    """Population play (`drive.partners`): slot 0 is the policy's ego, every other slot is driven by a partner drawn
    per episode (scripted type name or checkpoint stem); metrics are reported overall and per partner (trial mode).
    Default: the checkpoint's training population, if it had one (pass --partners with no names for none)."""
    partner_weights: tuple[float, ...] = ()
    """Sampling weights of `partners` (empty = uniform; with the checkpoint's population, its weights)."""
    seed: int = 0
    """Seed."""
    device: str = "auto"
    """auto | cpu | cuda."""
    out: Path = Path("runs/drive/eval.json")
    """Metrics JSON."""
    video: Path | None = None
    """Optional video (.mp4/.gif) of env 0."""


OVERRIDES = ("max_agents", "k_trials", "trial_length", "hidden_goal", "partner_slots", "road_slots")
ALL_LOGGED = 1 << 20  # human_replay's default max_agents: every agent of the scene (the env takes min with the pool)
FALLBACK = {"max_agents": 32, "k_trials": 2, "trial_length": 91, "hidden_goal": False, "partner_slots": 63,
            "road_slots": 200}  # for checkpoints that predate stored env configs


def held_out(scenarios: str, train_seed: int) -> str:
    """The training scene source with procedural seed train_seed + 1000 (other sources are returned as is; of a
    mixed source "a;b", its procedural parts only: the others were trained on)."""
    if ";" in scenarios:
        parts = [held_out(p.strip(), train_seed) for p in scenarios.split(";") if p.strip().startswith("procedural")]
        if not parts:
            raise ValueError(f"held_out({scenarios!r}): no procedural part to hold out; give the held-out scenes")
        return ";".join(parts)
    head, _, rest = scenarios.partition(":")
    if head not in ("procedural", "crossing"):
        return scenarios
    parts = [p for p in rest.split(",") if p and not p.startswith("seed=")]
    return f"{head}:" + ",".join([*parts, f"seed={train_seed + 1000}"])


def env_config(cfg: EvalConfig, trained: EnvConfig | None = None) -> EnvConfig:
    """The eval env: the checkpoint's EnvConfig (`trained`) with the mode's settings and any flag given
    here on top; a flag that differs from the checkpoint's value is applied with a warning naming both."""
    if cfg.mode not in MODES:
        raise ValueError(f"--mode {cfg.mode!r}: expected one of {', '.join(MODES)}")
    base = trained if trained is not None else EnvConfig(**FALLBACK)
    if trained is None:
        warnings.warn("checkpoint has no env config (trained before it was stored): using the eval defaults "
                      + ", ".join(f"{k}={getattr(base, k)}" for k in FALLBACK), stacklevel=2)
    if trained is not None and trained.goal_behavior != "trial":  # its episode length is the trial length here
        base = dataclasses.replace(base, trial_length=trained.episode_length)
    changes = {}
    for k in OVERRIDES:
        v = getattr(cfg, k)
        if v is not None and v != getattr(base, k):
            if trained is not None:
                warnings.warn(f"--{k.replace('_', '-')} {v} overrides the checkpoint's {k}={getattr(base, k)}",
                              stacklevel=2)
            changes[k] = v
    env = dataclasses.replace(base, num_envs=cfg.num_envs, goal_behavior="trial", reuse_obs=False,
                              scene_order=cfg.scene_order, **changes)
    if cfg.mode == "self_play":
        # every vehicle of the scene drives (a real scene cut to the training preset's slot count would silently
        # drop the rest of its vehicles: they would be neither egos nor obstacles)
        env = dataclasses.replace(env, k_trials=1, hidden_goal=False, control_mode="all",
                                  max_agents=cfg.max_agents or ALL_LOGGED)
    elif cfg.mode == "human_replay":  # the ego among every logged agent replaying the human log
        if base.hidden_goal and cfg.hidden_goal is None:
            raise ValueError("--mode human_replay: the checkpoint was trained with hidden_goal=True (its observations "
                             "hold candidate exits, which logged scenes lack); pass --hidden-goal True with scenes "
                             "that have goal candidates, or evaluate a checkpoint trained without hidden goals")
        env = dataclasses.replace(env, control_mode="ego_only", partner_style=False, hidden_goal=bool(cfg.hidden_goal),
                                  max_agents=cfg.max_agents or ALL_LOGGED)
    return env


@torch.no_grad()
def evaluate(cfg: EvalConfig, on_step=None) -> dict[str, float]:
    """Run the evaluation `cfg` describes; returns (and writes to `cfg.out`) its metrics.

    on_step(env, before): optional, called after every env step with the `SimState` from before it (each
    step builds a new state, so `before` stays as it was): diagnostics such as `benchmarks/drive_collisions.py`.
    """

    if not cfg.checkpoint:
        raise ValueError("--checkpoint is required (a stem like runs/drive/<run>/checkpoints/latest)")
    if cfg.episodes < 1:
        raise ValueError(f"--episodes {cfg.episodes}: expected >= 1")
    writable_parent("--out", cfg.out)
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    cfg = dataclasses.replace(cfg, checkpoint=resolve_pretrained(cfg.checkpoint))  # pretrained:<name> -> its stem
    ck = load_checkpoint(cfg.checkpoint, "cpu")
    trained = from_dict(EnvConfig, ck["env_config"]) if "env_config" in ck else None
    env_cfg = env_config(cfg, trained)
    scenarios = cfg.scenarios or held_out(ck.get("scenarios", "procedural:n=64"), int(ck.get("seed", 0)))
    env = make_env(env_cfg, scenarios, device, cfg.seed)
    policy = load_policy(cfg.checkpoint, env, device).eval()
    pool_size = env.view.P
    if cfg.scene_order == "cycle" and (env.num_envs * cfg.episodes) % pool_size:
        warnings.warn(f"--scene-order cycle: {env.num_envs} envs x {cfg.episodes} episodes = "
                      f"{env.num_envs * cfg.episodes} episodes do not cover the {pool_size} scenes of {scenarios} "
                      "evenly (some play once more than others)", stacklevel=2)
    partners = cfg.partners if cfg.partners is not None else tuple(ck.get("partners", ()))
    if partners:  # population play: per-partner paired trials (`drive.partner_eval`)
        return _evaluate_partners(cfg, env, policy, partners, scenarios, ck)
    K = env_cfg.k_trials
    paired = PairedTrials(env.trial_metrics, env.num_envs, env.num_agents, K, cfg.episodes, device)
    env.trial_metrics = paired
    recorder = None
    if cfg.video is not None:
        recorder = Recorder(env, 0, 384)
    N = env.num_envs * env.num_agents
    obs = _flat(env.reset()).float()
    state = policy.initial_state(N, device)
    term = torch.ones(N, dtype=torch.bool, device=device)
    removed = torch.zeros(N, dtype=torch.bool, device=device)
    max_steps = cfg.episodes * K * env_cfg.trial_length  # an episode lasts at most K x trial_length ticks
    skip = device.type == "cpu"  # computing only the egos costs a host sync: CPU only (the others' outputs are unused)
    if recorder is not None:
        recorder.capture()
    steps = 0
    while not paired.complete():
        if steps >= max_steps:
            raise RuntimeError(f"{steps} steps ran but {int((paired.episodes_done < cfg.episodes).sum())} envs have "
                               f"not finished {cfg.episodes} episodes (an episode should end within K x trial_length)")
        active = _flat(env.controlled) & ~removed if skip else None  # the egos in play: only they are computed
        logits, _, state = policy.forward_eval(obs, state, term, removed, active=active)
        action = logits.argmax(-1) if cfg.greedy and not policy.continuous else sample(logits, policy.continuous)
        before = env.state
        res = env.step(action.reshape(env.num_envs, env.num_agents, *action.shape[1:]))
        steps += 1
        if on_step is not None:
            on_step(env, before)
        obs = _flat(res.obs).float()
        term = (env.ep_step == 0).unsqueeze(1).expand(env.num_envs, env.num_agents).reshape(-1)
        removed = _flat(env.state.removed | env.state.stopped) & _flat(res.controlled)
        if recorder is not None and paired.episodes_done[0] < cfg.episodes:
            recorder.capture()
    out = {"mode": cfg.mode, "checkpoint": cfg.checkpoint, "scenarios": scenarios, "k_trials": K,
           "trial_length": env_cfg.trial_length, "control_mode": env_cfg.control_mode, "num_envs": env.num_envs,
           "agents_per_env": env.num_agents, "scene_order": cfg.scene_order, "pool_scenes": pool_size, "env_steps": steps,
           **paired.summary()}
    if recorder is not None:
        out["video"] = str(write_video(recorder.frames, cfg.video))
    atomic_write_text(cfg.out, json.dumps(out, indent=2) + "\n")
    return out


def _evaluate_partners(cfg: EvalConfig, env, policy, partners, scenarios: str, ck: dict) -> dict:
    """`evaluate` with a partner population: overall and per-partner paired trials, written to `cfg.out`."""

    if cfg.video is not None:
        raise ValueError("--video is not supported with --partners")
    weights = cfg.partner_weights or (tuple(ck.get("partner_weights", ())) if cfg.partners is None else ())
    pop = build_population(partners, weights, env)
    paired, who = run_paired(env, policy_ego(policy, cfg.greedy), pop, cfg.episodes)
    out = {"mode": cfg.mode, "checkpoint": cfg.checkpoint, "scenarios": scenarios, "k_trials": env.k,
           "trial_length": env.cfg.trial_length, "num_envs": env.num_envs, "partners": list(pop.names),
           "partner_weights": pop.weights.tolist(), **partner_summary(paired, who, pop.names)}
    atomic_write_text(cfg.out, json.dumps(out, indent=2) + "\n")
    return out


def main(argv: list[str]) -> int:
    cfg = parse_config(EvalConfig, None, argv, prog="ttlab drive eval")
    out = evaluate(cfg)  # bad input raises before anything is written; the CLI boundary prints it on one line
    short = ("_score", "_goal_rate", "_minus_0", "_goal_rate_stderr", "_pairs")
    keys = [k for k in out if k.startswith(("trial_", "ada_delta_trial_")) and k.endswith(short)]
    print(json.dumps({k: out[k] for k in ["scenarios", "episodes", *keys]}, indent=1))
    for name, m in out.get("per_partner", {}).items():  # population play: one line per partner
        print(f"partner {name}: episodes {m['episodes']} " + " ".join(
            f"{k}={m[k]:.3f}" for k in m if k.startswith(("trial_", "ada_delta_trial_")) and k.endswith(
                ("_score", "_minus_0", "_time_to_goal"))))
    print(f"wrote {cfg.out}")
    return 0
