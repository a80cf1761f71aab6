"""DriveEnv: the batched driving simulator (E envs x A agent slots), all on one torch device.

    env = DriveEnv(EnvConfig(num_envs=16), pool, device="cpu", seed=0)
    obs = env.reset()                       # (E, A, obs_dim) float32
    res = env.step(actions)                 # actions (E, A) long in [0, 91) or (E, A, 2) float in [-1, 1]
    res.obs, res.reward, res.terminals, res.truncations, res.removed, res.trial_ended   # (E, A)
    env.metrics()                           # dict of 0-dim device tensors (reading them is the sync)

`step` has no Python loop over envs or agents and no host sync. Per step: policy agents move by the
dynamics, log-replay agents take their logged pose, then collisions (oriented-box SAT among the few
nearest others), offroad (box vs nearby road-edge segments from the grid), goals, rewards, the
per-event behaviours, episode / trial ends and resets, and observations of the post-reset state.

Signals (all (E, A), for the egos that acted this step; zero elsewhere):
  reward        float32.
  terminals     bool: non-trial: the ego left play for good (stop/remove event, goal with "stop");
                trial mode: the K-th trial of its env ended.
  truncations   bool: non-trial: the episode hit `episode_length` with the ego still in play;
                trial mode: its env's trial ended (including the K-th).
  removed       bool: the ego was out of play during this step (removed from the map, or stopped).
  trial_ended   bool: its env's trial ended this step (trial mode only).
  controlled    bool: policy-controlled slots of the returned obs (a new scene may change them).
Finished envs start a new episode in the same step on a scene drawn from the pool by a counter-based
hash of (seed, env, episode number), identical on CPU and CUDA.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ttlab.drive.config import EnvConfig
from ttlab.drive.scenarios.types import ScenarioPool
from ttlab.drive.sim import native, rng
from ttlab.drive.sim.contact import contacts
from ttlab.drive.sim.dynamics import (
    NUM_DISCRETE,
    action_tables,
    bicycle_step,
    decode_actions,
    jerk_step,
)
from ttlab.drive.sim.events import leave_play, report_step
from ttlab.drive.sim.grid import build_grid
from ttlab.drive.sim.metrics import EpisodeMetrics
from ttlab.drive.sim.observe import POS_SCALE, ObsInputs, ObsLayout, ObsSettings, make_layout, observe
from ttlab.drive.sim.reward import (
    candidate_reached,
    conflict,
    draw_weights,
    goal_reached,
    nearest_candidate_progress,
    progress_to_goal,
    step_reward,
)
from ttlab.drive.sim.state import EXPERT, POLICY, PoolView, SimState
from ttlab.drive.trials import TrialMetrics, trial_end_flags


@dataclass
class StepResult:
    obs: torch.Tensor  # (E, A, obs_dim) float32
    reward: torch.Tensor  # (E, A) float32
    terminals: torch.Tensor  # (E, A) bool
    truncations: torch.Tensor  # (E, A) bool
    removed: torch.Tensor  # (E, A) bool
    trial_ended: torch.Tensor  # (E, A) bool
    controlled: torch.Tensor  # (E, A) bool


class Who(NamedTuple):
    """Which slots act this tick, (E, A) bool each."""

    ego: torch.Tensor  # policy-controlled
    reporting: torch.Tensor  # in an exit report step: off the map, its action does nothing
    in_play: torch.Tensor  # moves by its action and can have events
    out_before: torch.Tensor  # out of play during this tick (StepResult.removed)


class Motion(NamedTuple):
    """Every slot after the tick's motion, (E, A) each: egos in play driven, log-replay agents at their logged pose."""

    x: torch.Tensor
    y: torch.Tensor
    heading: torch.Tensor
    speed: torch.Tensor
    accel: torch.Tensor
    steer: torch.Tensor
    visible: torch.Tensor  # bool: on the map for the others (collisions, conflicts)
    log_valid: torch.Tensor  # bool: the replay log is valid at the new log time


class Events(NamedTuple):
    """The tick's outcome before any restart, (E, A) each."""

    state: SimState  # after the tick
    reward: torch.Tensor  # float32
    reached: torch.Tensor  # bool: the true goal, in play
    wrong: torch.Tensor  # bool: a wrong candidate exit, in play (hidden-goal mode)
    collided: torch.Tensor  # bool: collision event, in play
    offroad: torch.Tensor  # bool: offroad event, in play
    out_now: torch.Tensor  # bool: left play this tick (removed or stopped)


class Ends(NamedTuple):
    """Which envs close a trial or an episode this tick ((E,) bool), and the per-ego signals ((E, A) bool)."""

    seg_end: torch.Tensor  # a trial (trial mode) or the episode ends
    trial_end_only: torch.Tensor  # a trial ends and another follows
    ep_end: torch.Tensor  # the episode ends
    terminals: torch.Tensor
    truncations: torch.Tensor
    trial_ended: torch.Tensor


def pool_to(pool: ScenarioPool, device: torch.device) -> ScenarioPool:
    """The same pool with every tensor on `device`."""
    kw = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in vars(pool).items()}
    return ScenarioPool(**kw)


class DriveEnv:
    """Batched multi-agent driving simulator over a ScenarioPool."""

    def __init__(self, cfg: EnvConfig, pool: ScenarioPool, device: str | torch.device = "cpu", seed: int = 0):
        cfg.validate()
        self.cfg = cfg
        self.device = torch.device(device)
        self.pool = pool_to(pool, self.device)
        if cfg.hidden_goal and self.pool.goal_candidates is None:
            raise ValueError("EnvConfig.hidden_goal=True needs a pool with goal_candidates (none in this pool)")
        self.num_envs = E = cfg.num_envs
        self.num_agents = A = min(cfg.max_agents, self.pool.pos.shape[1])
        self.view = PoolView(self.pool, A, cfg.partner_style, min_goal_distance=cfg.min_goal_distance)
        self.grid = build_grid(self.pool, cfg.road_radius, cfg.grid_cell, cfg.road_slots, cfg.edge_slots,
                               pos_scale=POS_SCALE)
        m = self.pool.goal_candidates.shape[2] if cfg.hidden_goal else 0
        self.trial_mode = cfg.goal_behavior == "trial"
        self.feedback = cfg.hidden_goal and cfg.exit_feedback and self.trial_mode
        self.layout: ObsLayout = make_layout(cfg.partner_slots, cfg.road_slots, cfg.reward_conditioning, m,
                                             self.feedback, cfg.exit_intent, cfg.partner_controls, cfg.priority)
        self.obs_dim = self.layout.obs_dim
        self.num_actions = NUM_DISCRETE if cfg.action == "discrete" else 2
        self.num_drive_actions = self.num_actions
        if cfg.exit_intent:
            self.num_actions = NUM_DISCRETE * m
        self.tables = action_tables(cfg.limits, cfg.dynamics, self.device)
        self.env_ids = torch.arange(E, device=self.device)
        self._branch_free = self.device.type != "cpu"  # no data-dependent Python branches where they would sync
        self.seed = seed
        self.k = cfg.k_trials if self.trial_mode else 1
        self.backend = self._pick_backend()
        self._obs_buf = torch.empty(E, A, self.obs_dim, device=self.device) if cfg.reuse_obs else None
        obs_settings = ObsSettings(
            partner_slots=cfg.partner_slots, partner_radius=cfg.partner_radius, road_slots=cfg.road_slots,
            road_radius=cfg.road_radius, max_accel=cfg.limits.max_accel, max_steer=cfg.limits.max_steer,
            hide_goal=cfg.hidden_goal and not cfg.exit_intent, partner_controls=cfg.partner_controls)
        self._obs_fn = functools.partial(native.observe if self.backend == "native" else observe, cfg=obs_settings)
        self._contact_fn = functools.partial(native.contacts if self.backend == "native" else contacts,
                                             candidates=cfg.collision_candidates)
        if cfg.compile and self.backend == "torch":
            self._obs_fn = torch.compile(self._obs_fn, dynamic=False, fullgraph=True)
            self._contact_fn = torch.compile(self._contact_fn, dynamic=False, fullgraph=True)
        self.ep_metrics = EpisodeMetrics(self.device)
        self.trial_metrics = TrialMetrics(self.k, self.device) if self.trial_mode else None
        self.last_events: dict[str, torch.Tensor] = {}
        """The last step's per-vehicle events (goal, collision, offroad), as they happened, before any reset."""
        self.learner: torch.Tensor | None = None  # (E, A) bool: slots the metrics count (None = every ego)
        self.co_ep_metrics: EpisodeMetrics | None = None  # the other egos' (co-players'), when `learner` is set
        self.co_trial_metrics: TrialMetrics | None = None
        self._reward_w: list[float] | None = None  # set_reward_weights' override of the config's rewards
        self.keep_final_obs = False
        """Set True to have `step` keep `final_obs`, the observation of the state each env resets from (one more
        observation pass on the steps where some env ends a trial or episode; the vector env's info["final_obs"])."""
        self.final_obs: torch.Tensor | None = None  # (E, A, obs_dim), rows valid where this step's resets happened
        self.reset(seed)

    def _pick_backend(self) -> str:
        """Which observation builder runs: see EnvConfig.backend."""
        want = self.cfg.backend
        if want == "torch":
            return "torch"
        cfg = self.cfg
        if self.device.type != "cpu" or not native.supports(self.grid, cfg.road_slots, cfg.partner_slots,
                                                            cfg.collision_candidates):
            if want == "native":
                raise ValueError(f"EnvConfig.backend='native' needs a CPU device (got {self.device}), at most "
                                 f"{native.MAX_CANDIDATES} road and partner slots and at most "
                                 f"{native.MAX_COLLISION_CANDIDATES} collision candidates")
            return "torch"
        try:
            native.load()
        except native.NativeUnavailable as e:
            if want == "native":
                raise
            warnings.warn(f"drive sim: native observation kernel unavailable, using torch ({e})", stacklevel=3)
            return "torch"
        return "native"

    def set_reward_weights(self, goal: float, collision: float, offroad: float) -> None:
        """Replace the goal / collision / offroad rewards from now on (a trainer's schedule); the config is not
        touched. Refused under reward conditioning, where every episode draws its own weights."""
        if self.cfg.reward_conditioning:
            raise ValueError("set_reward_weights: reward_conditioning draws the weights per episode")
        self._reward_w = [float(goal), float(collision), float(offroad)]
        w = torch.tensor(self._reward_w, device=self.device)
        self.weights = w.expand(self.num_envs, self.num_agents, 3)

    # ---- per-episode draws: pure functions of (seed, env, episode number) ----
    def _draw(self) -> None:
        ep, ids, s = self.episode, self.env_ids, self.seed
        if self.cfg.scene_order == "cycle":
            self.scene = (ids + ep * self.num_envs) % self.view.P  # (E,)
        else:
            self.scene = rng.randint(self.view.P, ids, ep, s, 0)  # (E,)
        self.style = rng.randint(self.view.replay_log[2], ids, ep, s, 1)  # (E,)
        a = torch.arange(self.num_agents, device=self.device).unsqueeze(0)
        self.true_goal = None
        if self.cfg.hidden_goal:
            M = self.view.candidates.shape[2]
            self.true_goal = rng.randint(M, ids.unsqueeze(1), ep.unsqueeze(1), a, s, 2)  # (E, A)
        self.priority = rng.uniform(ids.unsqueeze(1), ep.unsqueeze(1), a, s, 4) if self.cfg.priority else None  # (E, A)
        if self.cfg.reward_conditioning:
            self.weights = draw_weights(self.cfg.rc_lb, self.cfg.rc_ub, s, ids, ep, self.num_agents, 3)
        else:
            w = torch.tensor(self._reward_w or [self.cfg.reward_goal, self.cfg.reward_collision,
                                                self.cfg.reward_offroad], device=self.device)
            self.weights = w.expand(self.num_envs, self.num_agents, 3)

    def _start_state(self) -> SimState:
        t0 = torch.full_like(self.scene, self.cfg.init_steps)
        return self.view.episode_start(self.scene, t0, self.true_goal, self.cfg.control_mode)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Start every env on a new episode; returns obs (E, A, obs_dim)."""
        if seed is not None:
            self.seed = int(seed)
        E, A, dev = self.num_envs, self.num_agents, self.device
        self.episode = torch.zeros(E, dtype=torch.long, device=dev)
        self._draw()
        self.start = self._start_state()  # this episode's start state per env (trial restarts, respawns)
        self.state = SimState(**{k: v.clone() for k, v in vars(self.start).items()})
        self.t = torch.full((E,), self.cfg.init_steps, dtype=torch.long, device=dev)  # log clock
        self.ep_step = torch.zeros(E, dtype=torch.long, device=dev)
        self.trial = torch.zeros(E, dtype=torch.long, device=dev)
        self.trial_step = torch.zeros(E, dtype=torch.long, device=dev)
        self.intent = torch.zeros(E, A, dtype=torch.long, device=dev)  # exit intent: the candidate picked this trial
        z = torch.zeros(E, A, device=dev)
        # per-ego accumulators: episode return/length, sums over finished trials, flags of the current trial
        self.acc = {k: z.clone() for k in ("ret", "len", "goal", "coll", "off", "score", "t_goal", "t_coll",
                                           "t_off", "t_len", "t_exit", "t_wrong")}
        for m in (self.ep_metrics, self.trial_metrics, self.co_ep_metrics, self.co_trial_metrics):
            if m is not None:
                m.read()
        return self._observe(self.state, self._log_valid())

    @property
    def controlled(self) -> torch.Tensor:
        return self.state.role == POLICY  # (E, A)

    def set_learner(self, learner: torch.Tensor | None) -> None:
        """Population play: count only the egos in `learner` (E, A) bool slots in `metrics()`; the other egos
        (co-players) are counted apart, under `coplayer/<name>`. None: every ego is the learner's."""
        if learner is None:
            self.learner = self.co_ep_metrics = self.co_trial_metrics = None
            return
        if tuple(learner.shape) != (self.num_envs, self.num_agents):
            raise ValueError(f"set_learner: mask of shape {tuple(learner.shape)}, expected (E, A) = "
                             f"({self.num_envs}, {self.num_agents})")
        self.learner = learner.to(self.device, torch.bool)
        self.co_ep_metrics = EpisodeMetrics(self.device)
        self.co_trial_metrics = TrialMetrics(self.k, self.device) if self.trial_mode else None

    def _log_valid(self) -> torch.Tensor:
        """(E, A) bool: the replay log is valid at the current log clock (a replayed agent is on the map)."""
        return self.view.log_at(self.view.replay_log, self.scene, self.style, self.t)[1]

    def visible(self) -> torch.Tensor:
        """(E, A) bool: agents on the map now, as the others observe them and collide with them."""
        return self._visible(self.state, self._log_valid())

    # ---- observation of a state ----
    def _visible(self, st: SimState, log_valid: torch.Tensor | None = None) -> torch.Tensor:
        vis = (st.role != 0) & ~st.removed & (st.exit_flag == 0)  # an ego in its report step is off the map
        if log_valid is not None:
            vis = vis & ((st.role != EXPERT) | log_valid)
        return vis

    def _observe(self, st: SimState, log_valid: torch.Tensor | None = None) -> torch.Tensor:
        cand = self.view.candidates[self.scene] if self.cfg.hidden_goal else None  # (E, A, M, 2)
        kw = {"out": self._obs_buf} if self.backend == "native" and self._obs_buf is not None else {}
        goal_x, goal_y, intent_open = st.goal_x, st.goal_y, None
        if self.cfg.exit_intent:  # the goal shown is the picked candidate; none (the ego itself) while the pick is open
            open_ = (self.trial_step == 0).view(-1, 1).expand_as(st.x)  # (E, A)
            picked = self._picked(cand)  # (E, A, 2)
            goal_x = torch.where(open_, st.x, picked[..., 0])
            goal_y = torch.where(open_, st.y, picked[..., 1])
            intent_open = open_.float()
        inp = ObsInputs(
            x=st.x, y=st.y, heading=st.heading, speed=st.speed, length=st.length, width=st.width, goal_x=goal_x,
            goal_y=goal_y, collided=st.collided, offroad=st.offroad, accel=st.accel, steer=st.steer,
            visible=self._visible(st, log_valid), rc_weights=self.weights if self.cfg.reward_conditioning else None,
            candidates=cand, feedback=torch.stack([st.last_reward, st.exit_flag], -1) if self.feedback else None,
            intent_open=intent_open, priority=self.priority)
        obs = self._obs_fn(self.grid, self.scene, inp, **kw)  # (E, A, obs_dim)
        if self._obs_buf is None or obs is self._obs_buf:
            return obs
        return self._obs_buf.copy_(obs)

    # ---- the step: act, integrate, contact, events, trial clock, restart, observe ----
    def step(self, actions: torch.Tensor) -> StepResult:
        """One tick of every env; actions (E, A) long or (E, A, 2) float. No host sync off CPU."""
        st = self.state
        who = self._who(st)
        lon, lat = self._act(actions)
        mv = self._integrate(st, who, lon, lat)
        collided, offroad = self._contact_fn(self.grid, self.scene, mv.x, mv.y, mv.heading,
                                             st.length * self.cfg.box_scale, st.width * self.cfg.box_scale, mv.visible)
        ev = self._events(st, who, mv, collided, offroad)
        ends = self._trial_clock(who, ev)
        if self.keep_final_obs and (self._branch_free or bool(ends.seg_end.any())):  # before the restarts below
            self.final_obs = self._observe(ev.state, mv.log_valid).clone()  # (E, A, obs_dim)
        self.state = self._restart(ev, ends)
        obs = self._observe(self.state, self._log_valid())  # of the post-restart state
        return StepResult(obs=obs, reward=ev.reward, terminals=ends.terminals, truncations=ends.truncations,
                          removed=who.out_before, trial_ended=ends.trial_ended, controlled=self.state.role == POLICY)

    def _who(self, st: SimState) -> Who:
        """Which egos act this tick."""
        ego = st.role == POLICY  # (E, A) egos of this step
        reporting = ego & (st.exit_flag != 0) & ~st.removed  # report step: off the map, action does nothing
        in_play = ego & ~st.removed & ~st.stopped & ~reporting
        return Who(ego, reporting, in_play, ego & ~in_play & ~reporting)  # the learner's view: a reporter acts

    def _act(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions -> (longitudinal, lateral) commands (E, A); with exit intent the action also picks the
        candidate exit, read at a trial's first tick."""
        actions = actions.to(self.device)
        if self.cfg.exit_intent:
            open_ = (self.trial_step == 0).view(-1, 1)  # (E, 1)
            pick = torch.div(actions, NUM_DISCRETE, rounding_mode="floor").clamp(0, self.num_actions // NUM_DISCRETE - 1)
            self.intent = torch.where(open_, pick, self.intent)  # (E, A)
            actions = actions % NUM_DISCRETE
        return decode_actions(actions, self.tables, self.cfg.limits, self.cfg.dynamics)

    def _integrate(self, st: SimState, who: Who, lon: torch.Tensor, lat: torch.Tensor) -> Motion:
        """One tick: egos in play move by the dynamics, the clocks advance, log-replay agents take their logged
        pose at the new log time, everyone else holds still."""
        cfg, lim, dt = self.cfg, self.cfg.limits, float(self.pool.dt)
        if cfg.dynamics == "classic":
            nx, ny, nh, nv = bicycle_step(st.x, st.y, st.heading, st.speed, lon, lat, st.length, dt, lim.max_speed)
            na, ns = lon, lat
        else:
            nx, ny, nh, nv, na, ns = jerk_step(st.x, st.y, st.heading, st.speed, st.accel, st.steer, lon, lat,
                                               st.length, dt, lim)
        self.t = self.t + 1
        self.ep_step = self.ep_step + 1
        self.trial_step = self.trial_step + 1
        log, log_valid = self.view.log_at(self.view.replay_log, self.scene, self.style, self.t)  # (E, A, 4), (E, A)
        expert, move = st.role == EXPERT, who.in_play

        def pick(new: torch.Tensor, logged: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
            return torch.where(move, new, torch.where(expert, logged, old))

        return Motion(x=pick(nx, log[..., 0], st.x), y=pick(ny, log[..., 1], st.y),
                      heading=pick(nh, log[..., 2], st.heading), speed=pick(nv, log[..., 3], st.speed),
                      accel=torch.where(move, na, st.accel), steer=torch.where(move, ns, st.steer),
                      visible=(st.role != 0) & ~st.removed & ~who.reporting & (~expert | log_valid),
                      log_valid=log_valid)

    def _events(self, st: SimState, who: Who, mv: Motion, collided: torch.Tensor, offroad: torch.Tensor) -> Events:
        """Goals, rewards and what each event does (only egos in play have events): the state after the tick,
        before any trial or episode restart."""
        cfg, in_play = self.cfg, who.in_play
        cand = self.view.candidates[self.scene] if cfg.hidden_goal else None  # (E, A, M, 2)
        if cfg.hidden_goal:
            hits = candidate_reached(mv.x, mv.y, mv.speed, cand, cfg.goal_radius, cfg.goal_speed)  # (E, A, M)
            if self.feedback:  # an exit counts only with a tick of the trial left for its report step
                hits = hits & (self.trial_step <= cfg.trial_length - cfg.report_steps).view(-1, 1, 1)
            true_hit = torch.gather(hits, 2, self.true_goal.unsqueeze(-1)).squeeze(-1)
            wrong = hits.any(-1) & ~true_hit & in_play
        else:
            true_hit = goal_reached(mv.x, mv.y, mv.speed, st.goal_x, st.goal_y, cfg.goal_radius, cfg.goal_speed)
            wrong = torch.zeros_like(in_play)
        reached, coll_ev, off_ev = true_hit & in_play, collided & in_play, offroad & in_play
        self.last_events = {"goal": reached, "collision": coll_ev, "offroad": off_ev}  # (E, A) each, before resets
        reward = step_reward(self.weights, reached, coll_ev, off_ev) * in_play  # (E, A)
        if cfg.reward_progress:
            reward = reward + cfg.reward_progress * self._progress(st, mv, cand) * in_play
        if cfg.reward_conflict:
            danger = conflict(mv.x, mv.y, mv.heading, mv.speed, mv.visible, cfg.conflict_horizon,
                              cfg.conflict_radius)  # (E, A)
            reward = reward + cfg.reward_conflict * (danger & in_play)

        remove_now, stop_now = leave_play(reached, wrong, coll_ev, off_ev, who.reporting, st.report_left,
                                          collision_behavior=cfg.collision_behavior,
                                          offroad_behavior=cfg.offroad_behavior, goal_behavior=cfg.goal_behavior,
                                          feedback=self.feedback)
        out_now = remove_now | stop_now
        gx, gy, route_s = st.goal_x, st.goal_y, st.route_s
        if cfg.goal_behavior == "new_goal":
            ax, ay, ars = self.view.goal_ahead(self.scene, st, cfg.new_goal_distance)
            ng = reached & ~out_now
            gx, gy, route_s = torch.where(ng, ax, gx), torch.where(ng, ay, gy), torch.where(ng, ars, route_s)
        stopped = st.stopped | stop_now
        if self.feedback:
            exit_flag, report_left, speed = report_step(reached, wrong, out_now, who.reporting, remove_now,
                                                        st.exit_flag, st.report_left, mv.speed, cfg.report_steps)
        else:
            exit_flag, report_left, speed = st.exit_flag, st.report_left, mv.speed
        speed = torch.where(stopped, torch.zeros_like(speed), speed)
        new = SimState(role=st.role, x=mv.x, y=mv.y, heading=mv.heading, speed=speed, accel=mv.accel,
                       steer=mv.steer, length=st.length, width=st.width, goal_x=gx, goal_y=gy, route_s=route_s,
                       removed=st.removed | remove_now, stopped=stopped, collided=collided, offroad=offroad,
                       last_reward=reward, exit_flag=exit_flag, report_left=report_left)
        return Events(new, reward, reached, wrong, coll_ev, off_ev, out_now)

    def _progress(self, st: SimState, mv: Motion, cand: torch.Tensor | None) -> torch.Tensor:
        """(E, A) metres gained this tick toward EnvConfig.progress_target (the shaping potential's difference)."""
        if self.cfg.progress_target == "nearest_exit":  # potential: -(distance to the nearest candidate exit)
            return nearest_candidate_progress(st.x, st.y, mv.x, mv.y, cand)
        if self.cfg.progress_target == "intent":  # potential: -(distance to the candidate the ego picked)
            pk = self._picked(cand)  # (E, A, 2)
            return progress_to_goal(st.x, st.y, mv.x, mv.y, pk[..., 0], pk[..., 1])
        return progress_to_goal(st.x, st.y, mv.x, mv.y, st.goal_x, st.goal_y)

    def _picked(self, cand: torch.Tensor) -> torch.Tensor:
        """(E, A, 2) the candidate exit each ego picked this trial (exit intent); cand (E, A, M, 2)."""
        return torch.gather(cand, 2, self.intent.view(*self.intent.shape, 1, 1).expand(-1, -1, 1, 2)).squeeze(2)

    def _trial_clock(self, who: Who, ev: Events) -> Ends:
        """Per-ego accumulators, which trials and episodes end this tick, and their metrics."""
        cfg, acc, ego, in_play = self.cfg, self.acc, who.ego, who.in_play
        acc["ret"] = acc["ret"] + ev.reward
        acc["len"] = acc["len"] + in_play.float()
        acc["t_len"] = acc["t_len"] + in_play.float()
        acc["t_goal"] = torch.maximum(acc["t_goal"], ev.reached.float())
        acc["t_coll"] = torch.maximum(acc["t_coll"], ev.collided.float())
        acc["t_off"] = torch.maximum(acc["t_off"], ev.offroad.float())
        acc["t_exit"] = torch.maximum(acc["t_exit"], (ev.reached | ev.wrong).float())
        acc["t_wrong"] = torch.maximum(acc["t_wrong"], ev.wrong.float())

        # an env whose egos have all left play ends its trial / episode (envs without egos run on the clock)
        any_in_play = (in_play & ~ev.out_now).any(1) | ~ego.any(1)  # (E,)
        if self.feedback:  # an ego with report steps left keeps its trial open
            any_in_play = any_in_play | (ev.state.report_left > 0).any(1)
        if self.trial_mode:
            seg_end, timeout, ep_end = trial_end_flags(self.trial_step, cfg.trial_length, any_in_play,
                                                       self.trial, cfg.k_trials)
            trial_end_only = seg_end & ~ep_end
            truncations = seg_end.unsqueeze(1) & ego
            terminals = ep_end.unsqueeze(1) & ego
            trial_ended = truncations
            trial_out = (acc["t_goal"], acc["t_coll"], acc["t_off"], acc["t_len"], acc["t_exit"], acc["t_wrong"])
            if self.learner is None:
                self.trial_metrics.add(seg_end, timeout, self.trial, ego, *trial_out)
            else:  # population play: the learner's egos and the co-players' apart
                self.trial_metrics.add(seg_end, timeout, self.trial, ego & self.learner, *trial_out)
                self.co_trial_metrics.add(seg_end, timeout, self.trial, ego & ~self.learner, *trial_out)
        else:
            timeout = self.ep_step >= cfg.episode_length
            ep_end = timeout | ~any_in_play
            seg_end, trial_end_only = ep_end, torch.zeros_like(any_in_play)
            terminals = ev.out_now
            truncations = timeout.unsqueeze(1) & ego & ~(ev.state.removed | ev.state.stopped)
            trial_ended = torch.zeros_like(ego)
        close = seg_end.unsqueeze(1)  # (E, 1) this env's trial (or episode) closes
        t_score = acc["t_goal"] * (1 - acc["t_coll"]) * (1 - acc["t_off"])
        for k_sum, k_now in (("goal", "t_goal"), ("coll", "t_coll"), ("off", "t_off")):
            acc[k_sum] = acc[k_sum] + acc[k_now] * close
        acc["score"] = acc["score"] + t_score * close
        done = ep_end.unsqueeze(1) & ego
        ep_out = (acc["ret"], acc["len"], acc["goal"] / self.k, acc["coll"] / self.k, acc["off"] / self.k,
                  acc["score"] / self.k)
        if self.learner is None:
            self.ep_metrics.add(done, *ep_out)
        else:
            self.ep_metrics.add(done & self.learner, *ep_out)
            self.co_ep_metrics.add(done & ~self.learner, *ep_out)
        for k in ("t_goal", "t_coll", "t_off", "t_len", "t_exit", "t_wrong"):
            acc[k] = acc[k] * ~close
        for k in ("ret", "len", "goal", "coll", "off", "score"):
            acc[k] = acc[k] * ~ep_end.unsqueeze(1)
        return Ends(seg_end, trial_end_only, ep_end, terminals, truncations, trial_ended)

    def _restart(self, ev: Events, ends: Ends) -> SimState:
        """Respawns and trial restarts go back to this episode's start; finished episodes draw anew and start
        there; the clocks rewind. (On CPU, where reading a flag costs no device sync, blends and draws that would
        change nothing are skipped; the draws are pure functions of (seed, env, episode), so the result is
        identical.)"""
        new, ep_end = ev.state, ends.ep_end
        respawn = (ev.reached & ~ev.out_now) if self.cfg.goal_behavior == "respawn" else torch.zeros_like(ev.reached)
        back = respawn | ends.trial_end_only.unsqueeze(1)
        if self._branch_free or bool(back.any()):
            new = new.blend(back, self.start)
        self.trial = torch.where(ends.trial_end_only, self.trial + 1, self.trial)
        self.episode = self.episode + ep_end.long()
        if self._branch_free or bool(ep_end.any()):
            self._draw()
            ep_mask = ep_end.unsqueeze(1).expand_as(new.role)
            self.start = self.start.blend(ep_mask, self._start_state())
            new = new.blend(ep_mask, self.start)
        self.trial = torch.where(ep_end, torch.zeros_like(self.trial), self.trial)
        rewind = ends.seg_end  # every trial restart and new episode rewinds the log clock
        self.t = torch.where(rewind, torch.full_like(self.t, self.cfg.init_steps), self.t)
        self.trial_step = torch.where(rewind, torch.zeros_like(self.trial_step), self.trial_step)
        self.ep_step = torch.where(ep_end, torch.zeros_like(self.ep_step), self.ep_step)
        return new

    def metrics(self) -> dict[str, torch.Tensor]:
        """Episode (and trial) metrics since the last call, as 0-dim device tensors; resets the sums."""
        out = self.ep_metrics.read()
        if self.trial_metrics is not None:
            out.update(self.trial_metrics.read())
        if self.co_ep_metrics is not None:  # population play: the co-players' egos, apart from the learner's
            out.update({f"coplayer/{k}": v for k, v in self.co_ep_metrics.read().items()})
            if self.co_trial_metrics is not None:
                out.update({f"coplayer/{k}": v for k, v in self.co_trial_metrics.read().items()})
        return out
