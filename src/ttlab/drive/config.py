"""Every configuration of `ttlab.drive`: the simulator (EnvConfig), the policy, PPO, and a training run.

Presets (`drive.presets`), the trainer (`drive.train`), the simulator (`drive.sim.env`) and the policy builder
(`drive.policy`) import their config from here; nothing here imports them. One `@dataclass` per concern, a
docstring line per field, parsed by tyro (`ttlab drive train --env.k-trials 4 --ppo.lr 1e-4`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from ttlab.common.errors import UserError
from ttlab.common.flags import above, at_least, one_of
from ttlab.drive.sim.dynamics import DynamicsLimits

EventBehaviour = Literal["ignore", "stop", "remove"]
GoalBehaviour = Literal["respawn", "new_goal", "stop", "trial"]
EVENT_BEHAVIOURS: tuple[str, ...] = get_args(EventBehaviour)
GOAL_BEHAVIOURS: tuple[str, ...] = get_args(GoalBehaviour)


@dataclass
class EnvConfig:
    """Simulator settings."""

    num_envs: int = 16
    """E: parallel envs (scenes)."""
    max_agents: int = 64
    """A: agent slots per env (the first A agents of each scene)."""
    dynamics: Literal["classic", "jerk"] = "classic"
    """classic (kinematic bicycle) | jerk (jerk-limited bicycle)."""
    action: Literal["discrete", "continuous"] = "discrete"
    """discrete (91 = 7 longitudinal x 13 steering) | continuous (2 in [-1, 1])."""
    goal_behavior: GoalBehaviour = "respawn"
    """respawn | new_goal | stop | trial."""
    k_trials: int = 2
    """Trial mode: trials per episode (K)."""
    trial_length: int = 91
    """Trial mode: ticks per trial before a timeout ends it."""
    episode_length: int = 91
    """Non-trial modes: ticks per episode."""
    init_steps: int = 0
    """Log step the episode starts from (log-replay agents play from here)."""
    goal_radius: float = 2.0
    """A goal is reached within this many metres ..."""
    goal_speed: float = 100.0
    """... at a speed of at most this (m/s)."""
    new_goal_distance: float = 20.0
    """new_goal: the next goal is this many metres further along the route."""
    collision_behavior: EventBehaviour = "ignore"
    """ignore | stop | remove, on a vehicle-vehicle collision."""
    offroad_behavior: EventBehaviour = "ignore"
    """ignore | stop | remove, on touching a road edge."""
    reward_goal: float = 1.0
    """Reward for reaching the goal."""
    reward_collision: float = -0.5
    """Reward per tick in collision."""
    reward_offroad: float = -0.5
    """Reward per tick offroad."""
    reward_conflict: float = 0.0
    """Reward per tick on a collision course (`reward.conflict`: another vehicle's constant-velocity closest
    approach within `conflict_radius` m in the next `conflict_horizon` s), for each ego in play. A dense signal
    for what a collision penalty rewards only when it is too late: giving way. 0 = off. Read from the tick's new
    positions and speeds, before this tick's goal / collision removals take effect, so a vehicle leaving on this
    tick still counts as a partner for it (one tick of signal; by design simple, not a collision model)."""
    conflict_horizon: float = 2.0
    """Seconds ahead a collision course is looked for."""
    conflict_radius: float = 3.0
    """Centre-to-centre metres that count as a collision course (cars in adjacent lanes pass 3.4-3.9 m apart)."""
    reward_progress: float = 0.0
    """Potential-based shaping: this times the metres the ego got closer to its `progress_target` this tick
    (Ng et al. 1999: a potential difference, so it leaves the optimal policy unchanged for gamma -> 1). 0 = off."""
    progress_target: Literal["goal", "nearest_exit", "intent"] = "goal"
    """goal (the ego's goal; refused with hidden_goal, it would give the hidden goal away) | nearest_exit (the
    nearest hidden-goal candidate: the same in every world that differs only in the true exit) | intent (the
    candidate the ego picked with `exit_intent`: its own choice, the same in every such world)."""
    reward_conditioning: bool = False
    """Draw per-agent (goal, collision, offroad) weights per episode in [rc_lb, rc_ub]; show them in obs."""
    rc_lb: tuple[float, float, float] = (0.5, -1.0, -1.0)
    """Lower bounds of the conditioned weights (goal, collision, offroad)."""
    rc_ub: tuple[float, float, float] = (1.5, 0.0, 0.0)
    """Upper bounds of the conditioned weights."""
    control_mode: Literal["all", "ego_only", "replay"] = "all"
    """all (every non-expert moving vehicle) | ego_only (first such vehicle; the rest replay logs) | replay (none)."""
    hidden_goal: bool = False
    """Hidden-goal mode: the true goal is one of the scene's goal_candidates, drawn per episode."""
    exit_feedback: bool = True
    """Hidden-goal trial mode: reaching any candidate exit ends the ego's attempt with a report step: the ego leaves
    the map for the others at once, gets one more observation (its action there does nothing) whose ego features
    carry the last reward and an exit flag (+1 true / -1 wrong), and is removed after it (`report_steps`
    observations). So the outcome lands in tokens the ego's memory keeps. An exit counts only with
    `report_steps` ticks of the trial left to report it. False: a
    wrong exit removes the ego at once and nothing tells it apart from the true one (no policy can adapt)."""
    report_steps: int = 1
    """Exit feedback: report steps (the ego waits at the exit, flag shown, for this many observations)."""
    exit_intent: bool = False
    """Hidden-goal trial mode, discrete actions: the action also names the candidate exit the ego heads for
    (D * M actions, a = candidate * D + driving action; see `policy.intent`). It is read at the first tick of
    each trial only (the observation's "intent open" flag is 1 there) and held for the trial; the ego's goal
    features then show the picked candidate (they are 0 otherwise in hidden-goal mode). The agent's own choice,
    never the true exit: the route becomes one sampled action instead of a steering habit."""
    partner_style: bool = False
    """Replay partners from one of the pool's style logs, drawn per episode (kept across trials)."""
    partner_radius: float = 50.0
    """Partners within this radius (m) are observed."""
    road_radius: float = 50.0
    """Road segments within this radius (m) are observed."""
    partner_slots: int = 63
    """Partner slots in the observation."""
    partner_controls: bool = False
    """Each observed partner also shows its last applied command (accel, steer over their bounds): what brake
    lights and a turn signal tell a human driver, which one frame of positions and speeds does not. 0 for a
    partner replaying its log."""
    scene_order: Literal["random", "cycle"] = "random"
    """Which pool scene an env's next episode plays: random (drawn with replacement, a pure function of seed, env and
    episode; training's default) | cycle (env e's k-th episode plays scene (e + k * num_envs) mod pool size, so
    num_envs x k episodes cover a pool of that size exactly once: an evaluation over a fixed scene set)."""
    priority: bool = False
    """Right-of-way token: every vehicle draws a number in [0, 1) per episode (a pure function of seed, env,
    episode and slot), shown in its own ego features and in every partner row that shows it, so that two copies of
    one policy meeting in mirror-image situations have something to break the tie with (a V2V-style convention
    the policy may learn, e.g. the lower token yields)."""
    road_slots: int = 200
    """Road-segment slots in the observation (and candidates per grid cell)."""
    grid_cell: float = 5.0
    """Grid cell size (m) of the precomputed road candidate lists."""
    edge_slots: int = 16
    """Road-edge candidates per grid cell for offroad tests."""
    collision_candidates: int = 8
    """Nearest others tested for collision (SAT) per agent."""
    box_scale: float = 0.7
    """Collision and offroad tests use every vehicle's box with length and width scaled by this, as GPUDrive
    (`consts::vehicleLengthScale`) and PufferDrive (`should_control_agent`) do: logged boxes of real scenes touch
    each other and the kerb where the real vehicles did not (a dataset artefact, in GPUDrive's words). Observations
    show the true size. 1.0 = full boxes (what this simulator used before it matched upstream)."""
    min_goal_distance: float = 2.0
    """A vehicle is controllable only if it starts at least this far (m) from its goal (PufferDrive's
    MIN_DISTANCE_TO_GOAL); a closer one replays its log."""
    limits: DynamicsLimits = field(default_factory=DynamicsLimits)
    """Dynamics bounds."""
    backend: Literal["auto", "native", "torch"] = "auto"
    """Observations and contact tests: native (C kernels, CPU only; built on first use with the system compiler) |
    torch (the reference, any device) | auto (native on CPU when it builds, torch otherwise)."""
    reuse_obs: bool = False
    """step/reset write into one persistent obs tensor that the next step overwrites (PufferLib-style; saves
    faulting in a fresh E x A x obs_dim buffer every step). Copy what you keep; the trainer does."""
    compile: bool = False
    """torch.compile the torch observation builder and contact tests (first steps pay the compile)."""

    def validate(self) -> None:
        """Every field in range; errors name the CLI flag (`--env.num-envs 0: must be >= 1`)."""
        pre = "env."
        one_of(self, "dynamics", ("classic", "jerk"), pre)
        one_of(self, "scene_order", ("random", "cycle"), pre)
        one_of(self, "action", ("discrete", "continuous"), pre)
        one_of(self, "goal_behavior", GOAL_BEHAVIOURS, pre)
        one_of(self, "collision_behavior", EVENT_BEHAVIOURS, pre)
        one_of(self, "offroad_behavior", EVENT_BEHAVIOURS, pre)
        one_of(self, "control_mode", ("all", "ego_only", "replay"), pre)
        if not 0.0 < self.box_scale <= 1.0:
            raise UserError(f"--env.box-scale {self.box_scale}: must be in (0, 1]")
        one_of(self, "backend", ("auto", "native", "torch"), pre)
        one_of(self, "progress_target", ("goal", "nearest_exit", "intent"), pre)
        if self.exit_intent and not (self.hidden_goal and self.goal_behavior == "trial" and self.action == "discrete"):
            raise UserError("--env.exit-intent needs hidden_goal=True, goal_behavior='trial' and discrete "
                            f"actions (got hidden_goal={self.hidden_goal}, goal_behavior={self.goal_behavior!r}, "
                            f"action={self.action!r})")
        if self.progress_target == "intent" and not self.exit_intent:
            raise UserError("--env.progress-target: progress_target='intent' needs exit_intent=True")
        if self.hidden_goal and self.reward_progress and self.progress_target == "goal":
            raise UserError("--env.reward-progress with progress_target='goal' is refused with hidden_goal=True: "
                            "shaping toward the true goal would reveal it (use progress_target='nearest_exit')")
        if self.progress_target == "nearest_exit" and not self.hidden_goal:
            raise UserError("--env.progress-target: progress_target='nearest_exit' needs hidden_goal=True "
                            "(candidate exits)")
        at_least(self, ("num_envs", "max_agents", "k_trials", "trial_length", "episode_length", "report_steps"), 1, pre)
        at_least(self, ("init_steps", "road_slots", "partner_slots", "edge_slots", "collision_candidates"), 0, pre)
        above(self, ("conflict_horizon", "conflict_radius", "goal_radius", "grid_cell"), 0, pre)


@dataclass
class PolicyConfig:
    """Policy architecture."""

    core: str = "mlp"
    """mlp (memoryless), lstm, or transformer (KV cache)."""
    embed: int = 64
    """Width of each encoder (ego, partner, road) before pooling."""
    hidden: int = 128
    """Width of the core (d_model for the transformer)."""
    n_layers: int = 2
    """Transformer layers."""
    n_heads: int = 4
    """Transformer attention heads."""
    horizon: int = 0
    """Transformer context in steps; 0 = K x trial_length of the env (one whole episode)."""
    task_classes: int = 0
    """Task-inference head (`policy.task_head`): classes it predicts from the core's hidden state (M, the candidate
    exits, for the hidden-exit benchmark); trained by `PPOConfig.aux_task_coef`, never a policy input. 0 = none."""
    partner_encoder: str = "linear"
    """Per-partner encoder before the max-pool: "linear" (PufferDrive's Linear -> LayerNorm -> Linear) or "mlp"
    (nonlinear, and sees the ego's speed) or "kinematic" ("mlp" plus each partner's relative velocity and
    constant-velocity closest approach): `policy.encoders`."""
    intent_floor: float = 0.0
    """Exit intent (`EnvConfig.exit_intent`): every candidate keeps at least this / M probability at a trial's first
    tick (`policy.intent.joint_logits`). 0 = the plain softmax."""


CONTEXTS = ("memory", "stored", "full")


@dataclass
class PPOConfig:
    """PPO hyper-parameters."""

    lr: float = 3e-4
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    update_epochs: int = 4
    """Passes over the buffer per update."""
    num_minibatches: int = 4
    """Minibatches per epoch; a minibatch is a set of whole buffer rows (sequences)."""
    clip_coef: float = 0.2
    """Policy ratio clip."""
    vf_clip_coef: float = 0.2
    """Value clip around the rollout value (<= 0 disables)."""
    ent_coef: float = 0.01
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Gradient clipping (global L2 norm)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch over valid steps."""
    target_kl: float | None = None
    """Stop the epoch loop early when approx_kl exceeds this."""
    aux_task_coef: float = 0.0
    """Weight of the task-inference loss: cross-entropy of the policy's task head (`PolicyConfig.task_classes`),
    a linear read-out of the core's hidden state, against the episode's hidden task (the simulator's true
    exit) at every valid step. The label is a training target only; no policy input carries it (tested). Where
    the task is not yet knowable (trial 0 before the first exit report) the best prediction is the prior, so
    the loss shapes the memory to keep what the report says. 0 = off."""
    explore_steer: float = 0.0
    """Trial-level exploration: at each trial start the rollout draws, per agent, a steering bias b in
    {-s, 0, +s} (s = this) and samples the whole trial from logits + b x (each action's steering / the largest),
    so a trial's route (e.g. which exit) varies between trials of one episode, which per-tick sampling almost
    never does. It is the agent's own noise (independent of the world, never a network input); PPO trains the
    same biased distribution that acted (`Batch.steer_bias`). Evaluation runs the network alone (b = 0). 0 = off."""
    explore_start: int = 0
    """Exploring starts: at each trial start, with probability `explore_start_prob` per agent, the rollout drives the
    first L ticks itself (L uniform in 1..explore_start) with a full steering rate to one side (drawn per trial)
    and neutral throttle, then hands over to the policy. The forced steps are the agent's own noise (independent
    of the world; their observations enter the memory like any other) and are masked out of the loss (not
    the policy's actions). So trials start from committed headings to both sides, and the policy learns to
    finish turns either way, which it otherwise never practises. Evaluation runs the policy alone. 0 = off."""
    explore_start_prob: float = 0.5
    """Probability per (agent, trial) of an exploring start (with explore_start > 0)."""
    ent_coef_end: float | None = None
    """Entropy bonus at the last update, annealed linearly from `ent_coef` (None = constant `ent_coef`)."""
    lr_end: float | None = None
    """Learning rate at the end of training, annealed linearly from `lr` (None = constant `lr`; 0 = cleanrl's
    `anneal_lr`). With a time limit the schedule runs on the larger of step and wall-time progress, so it ends
    when the run does (`schedule_progress`)."""
    context: str = "memory"
    """Transformer context prefix in training: memory = its keys/values from the rollout's prefill (current
    weights), reused in every epoch with no gradient (Transformer-XL memory; the prefix is not re-encoded, so
    an update costs T tokens per row instead of C + T) | stored = the same, but the keys/values the previous
    rollout computed as it stepped (no prefill: one update stale, as R2D2's stored state) | full = recomputed
    with gradient in every minibatch (exact gradient, several times slower). Each gives the rollout's
    log-probs at the first minibatch."""


@dataclass
class TrainConfig:
    """PPO training of a driving policy."""

    env: EnvConfig = field(default_factory=EnvConfig)
    """Simulator settings (goal_behavior=trial for multi-trial episodes)."""
    scenarios: str = "procedural:n=64"
    """Scene source: 'procedural[:n=..,seed=..,families=a+b,hidden_goal=1]', a cache dir, a JSON dir or file."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Policy architecture."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO hyper-parameters."""
    total_agent_steps: int = 20_000_000
    """Training budget in agent-steps (agent slots x env steps)."""
    rollout_steps: int = 64
    """Env steps per rollout (T); a buffer row is one agent's T steps (+ the transformer's context prefix)."""
    seed: int = 0
    """Seed of torch, the env's scene draws and the policy."""
    device: str = "auto"
    """auto | cpu | cuda | cuda:N."""
    run_name: str | None = None
    """Run directory name under root/drive/ (default: a timestamp)."""
    root: str = "runs"
    """Root of run directories."""
    resume: bool = False
    """Continue the run in root/drive/run_name from its latest checkpoint."""
    checkpoint_every: int = 50
    """Updates between checkpoints."""
    log_every: int = 1
    """Updates between metric logs (the only host syncs of the loop)."""
    keep_every: int = 0
    """Also keep the checkpoint of every `keep_every`-th update as checkpoints/update_{N:06d} (0: only latest), e.g.
    for choosing one on validation scenes after training."""
    reward_collision_end: float | None = None
    """Collision penalty schedule: env.reward_collision until `reward_schedule_start` of the run, then linear to
    this value at its end (None = constant). A small penalty early lets the agent learn to reach goals; a larger
    one late asks it to give way."""
    reward_schedule_start: float = 0.0
    """Share of the run (steps or wall time, as the lr schedule) after which the collision penalty moves."""
    compile: bool = False
    """torch.compile the training forward (CUDA only; ignored on CPU)."""
    bf16: bool = True
    """bf16 autocast for the PPO update on CUDA (CPU always runs fp32)."""
    wandb: bool = False
    """Mirror metrics to Weights & Biases."""
    coplayers: tuple[str, ...] = ()
    """Population play: checkpoint stems (…/checkpoints/latest) of frozen co-player policies. `env/*` metrics then
    count the learner's agents only; the co-players' are logged apart as `env/coplayer/*`."""
    coplayer_envs: float = 0.0
    """Fraction of envs in which every controlled agent but the first is driven by a co-player."""
    partners: tuple[str, ...] = ()
    """Population play as the seed runs it (`drive.partners`): partners by scripted type name (e.g. never_yield,
    yield) or checkpoint stem; in every env slot 0 is the learner and every other controlled slot is driven by one
    partner drawn per episode (with `partner_weights`) and kept for its K trials. Exclusive with `coplayers`."""
    partner_weights: tuple[float, ...] = ()
    """Sampling weights of `partners` (empty = uniform)."""
    show_progress: bool = True
    """Show a progress bar (on a terminal)."""
    time_limit: str = ""
    """Stop after this much training wall time (e.g. 59m, 1.5h; empty: none), with a checkpoint, even if budget is
    left. The behaviour-cloning warm start (bc_ticks) counts toward it."""
    bc_ticks: int = 0
    """Behaviour-cloning warm start (`drive.bc`, memoryless policies): before PPO, drive the env this many ticks
    with the log-tracking expert and fit the policy (actions) and critic (returns) to it. 0 = none."""
    bc_epochs: int = 4
    """Epochs over the expert data in the warm start."""
    bc_dagger: int = 0
    """DAgger rounds after the first fit: the policy drives `bc_ticks` ticks, the expert labels the states it
    visited, the aggregate is fitted again (`bc_epochs`). 0 = plain behaviour cloning."""

    def __post_init__(self) -> None:
        if isinstance(self.time_limit, (int, float)):  # a config.json from before durations: minutes
            self.time_limit = f"{self.time_limit:g}m" if self.time_limit > 0 else ""
