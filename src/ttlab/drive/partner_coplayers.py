"""Co-player checkpoints as partners: memoryless drivers trained on the crossing with different reward weights,
cached by config hash, and the profile that shows how they drive as partners.

A co-player is trained as the learner (slot 0) of the crossing benchmark (`presets.partner_adapt`) against the
scripted training partners, with its own reward weights (`CoplayerSpec`), and then drives the partner slot of
another ego's episodes (`partners.build_population` takes its checkpoint stem). The observation is ego-centric
and both slots of a crossing scene are alike (at rest at a stop line, a goal straight past the crossing), so a
driver trained in slot 0 drives slot 1. The core is an MLP: it has no memory, so its type is the same in every
trial of an episode (what a partner type must be); its actions are sampled, so it is a stochastic driver.

    stem = ensure_coplayer(COPLAYERS["cautious"], root)        # trains once, then loads from the cache
    prof = partner_profile(cfg, stem, ego="go_at_once", episodes=2)  # start tick, who passes first, collisions

`partner_profile` measures a partner against a scripted ego (`partner_scripted.TimedEgo`: going at once, or
waiting 1.2 s): the trial tick it starts to move (the tick of the action that first moved it), the share of trials
it reaches the conflict point and the tick it does, the share of trials it crosses it before the ego, the collision
rate, and its goal rate.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ttlab.common.config import to_dict
from ttlab.drive.config import TrainConfig
from ttlab.drive.partner_adapt import held_out_env, save_policy, train_partner
from ttlab.drive.partner_scripted import TimedEgo
from ttlab.drive.partners import build_population
from ttlab.drive.presets import PARTNER_HELD_OUT, TRAIN_PRESETS

CACHE_VERSION = 1  # bump when what a spec trains changes without a config change
MOVING = 0.1  # m/s: a partner faster than this has moved (one tick of the gentlest acceleration: 0.13 m/s)


@dataclass(frozen=True)
class CoplayerSpec:
    """A memoryless co-player: the crossing preset's learner with these reward weights, trained for `steps`."""

    name: str
    """Short name (the checkpoint is `<root>/<name>-<config hash>`)."""
    reward_collision: float = -0.5
    """Reward per tick in collision (the vehicle is removed on it: one tick)."""
    reward_progress: float = 0.3
    """Potential-based shaping per metre closer to the goal."""
    reward_goal: float = 1.0
    """Reward for reaching the goal."""
    reward_conflict: float = 0.0
    """Reward per tick on a collision course (`EnvConfig.reward_conflict`; negative: giving way pays)."""
    core: str = "mlp"
    """Policy core; an MLP keeps the co-player's type the same in every trial."""
    seed: int = 0
    """Training seed of the co-player."""
    steps: int | None = None
    """Learner agent-steps (None: the preset's budget)."""


COPLAYERS: dict[str, CoplayerSpec] = {
    # collision-averse: a collision costs three goals; being on a collision course costs too (giving way pays)
    "cautious": CoplayerSpec("cautious", reward_collision=-3.0, reward_conflict=-0.05, steps=2_000_000),
    # time-greedy: progress pays three times the preset's, a collision costs little
    "hasty": CoplayerSpec("hasty", reward_collision=-0.1, reward_progress=1.0, steps=2_000_000),
    # held out (never a training partner of an ego): between the two
    "moderate": CoplayerSpec("moderate", reward_collision=-1.0, steps=2_000_000),
    # the collision-averse weights with another training seed (how much a co-player's seed changes its driving)
    "cautious_s1": CoplayerSpec("cautious_s1", reward_collision=-3.0, reward_conflict=-0.05, seed=1, steps=2_000_000),
}
TRAIN_COPLAYERS = ("cautious", "hasty")
HELD_OUT_COPLAYERS = ("moderate",)


def coplayer_config(spec: CoplayerSpec, preset: str = "partner_adapt") -> TrainConfig:
    """The preset's config with the co-player's core, reward weights and budget (no privileged loss)."""
    cfg = TRAIN_PRESETS[preset]()
    cfg.policy.core, cfg.policy.task_classes, cfg.ppo.aux_task_coef = spec.core, 0, 0.0
    cfg.env = dataclasses.replace(cfg.env, reward_collision=spec.reward_collision, reward_goal=spec.reward_goal,
                                  reward_progress=spec.reward_progress, reward_conflict=spec.reward_conflict)
    if spec.steps is not None:
        cfg.total_agent_steps = spec.steps
    cfg.seed = spec.seed
    return cfg


def config_hash(cfg: TrainConfig) -> str:
    """10 hex digits of SHA-256 over the config (and the cache version): the cache key of a co-player."""
    text = json.dumps({"v": CACHE_VERSION, "cfg": to_dict(cfg)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def coplayer_stem(spec: CoplayerSpec, root: str | Path, preset: str = "partner_adapt") -> Path:
    return Path(root) / f"{spec.name}-{config_hash(coplayer_config(spec, preset))}"


def ensure_coplayer(spec: CoplayerSpec, root: str | Path, preset: str = "partner_adapt", log=None) -> Path:
    """The co-player's checkpoint stem under `root`, training and saving it first unless that exact config is
    cached there already. Returns the stem (a `--partners` entry)."""
    cfg = coplayer_config(spec, preset)
    stem = coplayer_stem(spec, root, preset)
    if Path(str(stem) + ".json").is_file():
        if log is not None:
            log(f"co-player {spec.name}: cached ({stem.name})")
        return stem
    if log is not None:
        log(f"co-player {spec.name}: training {cfg.policy.core} for {cfg.total_agent_steps} steps, seed {spec.seed}")
    policy, curve, facts = train_partner(cfg, spec.seed, steps=cfg.total_agent_steps, log=log)
    last = curve[-10:]
    return save_policy(stem, policy, cfg, spec.seed, facts, coplayer=dataclasses.asdict(spec),
                       train_wall_s=facts["train_wall_s"],
                       train_score_last10=round(sum(r.get("trial_0_score", 0.0) for r in last) / max(1, len(last)), 4))


@torch.no_grad()
def profile_run(env, ego, population, episodes: int) -> dict[str, float]:
    """Step exactly `episodes` episodes per env (ego in slot 0, the population's partner in slot 1) and measure
    the partner per trial: start tick (first tick faster than `MOVING`), crossing the conflict point (where the
    two start headings meet) before the ego, collision (the ego's), and the partner's goal."""
    E, A = env.num_envs, env.num_agents
    N = E * A
    obs = env.reset().reshape(N, -1).float()
    env.set_learner(population.learner.view(E, A))
    new_ep = torch.ones(N, dtype=torch.bool)
    removed = torch.zeros(N, dtype=torch.bool)
    cx = torch.zeros(E)
    cy = torch.zeros(E)
    start = torch.full((E,), -1)
    passed = torch.full((E, 2), -1)
    coll = torch.zeros(E, dtype=torch.bool)
    goal = torch.zeros(E, dtype=torch.bool)
    rows: list[torch.Tensor] = []  # (n, 5) per finished trial: start, partner first, collision, partner goal, crossing

    def close(mask: torch.Tensor) -> None:
        first = (passed[:, 1] >= 0) & ((passed[:, 0] < 0) | (passed[:, 1] < passed[:, 0]))
        rows.append(torch.stack([start.float(), first.float(), coll.float(), goal.float(), passed[:, 1].float()],
                                1)[mask])

    for _ in range(episodes * env.k * env.cfg.trial_length + 1):
        live = env.episode < episodes  # (E,)
        if not live.any():
            break
        st, t = env.state, env.trial_step
        fresh = t == 0  # (E,) a trial's first tick: its start state; the conflict point from the start headings
        if fresh.any():
            x0, y0, x1, y1 = st.x[:, 0], st.y[:, 0], st.x[:, 1], st.y[:, 1]
            d0 = torch.stack([torch.cos(st.heading[:, 0]), torch.sin(st.heading[:, 0])], 1)  # (E, 2)
            d1 = torch.stack([torch.cos(st.heading[:, 1]), torch.sin(st.heading[:, 1])], 1)
            den = d0[:, 0] * d1[:, 1] - d0[:, 1] * d1[:, 0]
            s = ((x1 - x0) * d1[:, 1] - (y1 - y0) * d1[:, 0]) / den.where(den.abs() > 1e-6, torch.ones_like(den))
            cx, cy = torch.where(fresh, x0 + s * d0[:, 0], cx), torch.where(fresh, y0 + s * d0[:, 1], cy)
            start, coll, goal = start.where(~fresh, -1), coll & ~fresh, goal & ~fresh
            passed = passed.where(~fresh.unsqueeze(1), -1)
        on = ~st.removed  # (E, A)
        along = (st.x - cx.unsqueeze(1)) * torch.cos(st.heading) + (st.y - cy.unsqueeze(1)) * torch.sin(st.heading)
        passed = torch.where((passed < 0) & on & (along > 0), t.unsqueeze(1), passed)
        start = torch.where((start < 0) & on[:, 1] & (st.speed[:, 1] > MOVING), t - 1, start)  # the tick it went
        active = env.controlled.reshape(-1) & ~removed & population.learner
        action = ego(obs, new_ep, removed, active)
        action = population.act(obs, new_ep, removed, action, env.controlled.reshape(-1) & ~removed)
        trial_before = env.trial.clone()
        episode_before = env.episode.clone()
        res = env.step(action.reshape(E, A))
        ev = env.last_events  # (E, A) each, this tick's events before any trial reset
        coll |= ev["collision"].any(1)
        goal |= ev["goal"][:, 1]
        ended = ((env.trial != trial_before) | (env.episode != episode_before)) & (episode_before < episodes)
        if ended.any():
            close(ended)
        obs = res.obs.reshape(N, -1).float()
        new_ep = (env.ep_step == 0).unsqueeze(1).expand(E, A).reshape(-1)
        removed = ((env.state.removed | env.state.stopped) & res.controlled).reshape(-1)
    r = torch.cat(rows) if rows else torch.zeros(0, 5)
    started, crossed = r[:, 0] >= 0, r[:, 4] >= 0
    return {"trials": int(r.shape[0]), "start_rate": float(started.float().mean()) if len(r) else math.nan,
            "start_tick_mean": float(r[started, 0].mean()) if started.any() else math.nan,
            "start_tick_sd": float(r[started, 0].std()) if started.sum() > 1 else math.nan,
            "cross_rate": float(crossed.float().mean()) if len(r) else math.nan,
            "cross_tick_mean": float(r[crossed, 4].mean()) if crossed.any() else math.nan,
            "partner_first_rate": float(r[:, 1].mean()) if len(r) else math.nan,
            "collision_rate": float(r[:, 2].mean()) if len(r) else math.nan,
            "partner_goal_rate": float(r[:, 3].mean()) if len(r) else math.nan}


PROFILE_EGOS = {"go_at_once": (0, 6), "wait_1.2s": (12, 6)}


def partner_profile(cfg: TrainConfig, partner: str | Path, ego: str, episodes: int, num_envs: int = 64,
                    seed: int = 0, scenes: str = PARTNER_HELD_OUT) -> dict[str, float]:
    """How `partner` (scripted name or checkpoint stem) drives against a scripted ego (`PROFILE_EGOS`) on
    held-out scenes: `profile_run`'s rates, rounded."""
    if ego not in PROFILE_EGOS:
        raise ValueError(f"partner_profile: ego {ego!r}; known: {', '.join(PROFILE_EGOS)}")
    env = held_out_env(cfg, seed, num_envs, scenes)
    pop = build_population([str(partner)], None, env)
    out = profile_run(env, TimedEgo(env, *PROFILE_EGOS[ego]), pop, episodes)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}
