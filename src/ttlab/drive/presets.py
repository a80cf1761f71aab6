"""Named training configs (`ttlab drive train --preset NAME`), one function each."""

from __future__ import annotations

from ttlab.common.data import SHARED_PREFIX, shared_data_file
from ttlab.drive.config import EnvConfig, PolicyConfig, PPOConfig, TrainConfig


def default() -> TrainConfig:
    """Goal respawn on procedural scenes, memoryless MLP (the PufferDrive baseline).

    Collisions and offroad remove the agent: offroad is "the box touches a road edge", so with `ignore` a
    policy learns to leave the road once and then sit beyond the edge, penalty-free (seen in a CPU run)."""
    return TrainConfig(
        env=EnvConfig(num_envs=64, max_agents=32, goal_behavior="respawn", episode_length=91,
                      collision_behavior="remove", offroad_behavior="remove"),
        scenarios="procedural:n=256", policy=PolicyConfig(core="mlp"), rollout_steps=64,
        total_agent_steps=50_000_000)


def _adaptive(k: int) -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(num_envs=64, max_agents=32, goal_behavior="trial", k_trials=k, trial_length=91,
                      collision_behavior="remove", offroad_behavior="remove"),
        scenarios="procedural:n=256", policy=PolicyConfig(core="transformer", hidden=128, n_layers=2, n_heads=4),
        rollout_steps=128, total_agent_steps=100_000_000)


def adaptive_k2() -> TrainConfig:
    """Two-trial episodes, transformer with a K x trial_length KV cache."""
    return _adaptive(2)


def adaptive_k4() -> TrainConfig:
    """Four-trial episodes, transformer with a K x trial_length KV cache."""
    return _adaptive(4)


def hidden_goal() -> TrainConfig:
    """Hidden goal among M = 3 exits, K = 2 trials: memory pays from trial 1 on."""
    cfg = _adaptive(2)
    cfg.env.hidden_goal = True
    cfg.env.trial_length = 60
    cfg.scenarios = "procedural:n=128,families=hidden_goal,hidden_goal=1"
    cfg.total_agent_steps = 30_000_000
    return cfg


HIDDEN_EXIT_SCENES = "procedural:n=256,families=t_maze+t_maze_shown,agents=1,exits=2"
HIDDEN_EXIT_INTENT_SCENES = "procedural:n=256,families=t_maze,agents=1,exits=2"
HIDDEN_EXIT_HELD_OUT = "procedural:n=64,seed=1000,families=t_maze,agents=1,exits=2"


def hidden_exit(core: str = "transformer", intent: bool = True) -> TrainConfig:
    """The adaptation benchmark (benchmarks/drive_adapt.py), a driving T-maze: one ego 2-6 m before a T-junction
    on its stem, M = 2 candidate exits (left, right) 20-35 m of path away, one of them true (drawn per episode),
    K = 2 trials of 55 ticks. Reaching an exit is reported in the ego's next 5 observations (exit feedback: it
    waits at the exit, flag shown), so a policy with memory goes straight to the true exit in trial 1; a
    memoryless one cannot do better than in trial 0. Small observations (a 30 m road
    radius, 32 road and 1 partner slots) and a small transformer so it trains in minutes on 2 CPU cores.
    Offroad is penalised per tick, not removed (the road-edge test is strict at junction kerbs).
    Training levers (docs/notes/drive-adapt2.md): half the training scenes are `t_maze_shown` (the same T-mazes
    with their one exit shown, either side, so the policy learns to turn both ways; the held-out test is
    t_maze only) and a task-inference head trained to predict the true exit (`aux_task_coef`, a training
    target only).
    `intent` (the default, docs/notes/drive-adapt3.md): the action also picks the candidate exit to head for at
    each trial's first tick (`EnvConfig.exit_intent`, `policy.intent`), shaping is progress toward that pick,
    and training runs on hidden T-mazes only (the shown companions are not needed to learn both turns).
    intent=False is the previous benchmark (steering only, shaping toward the nearest exit, t_maze_shown mix)."""
    if intent:
        return TrainConfig(
            env=EnvConfig(num_envs=128, max_agents=1, goal_behavior="trial", k_trials=2, trial_length=55,
                          hidden_goal=True, exit_feedback=True, report_steps=5, goal_radius=3.0,
                          collision_behavior="remove", offroad_behavior="ignore", reward_offroad=-0.01,
                          reward_progress=0.05, progress_target="intent", exit_intent=True, partner_slots=1,
                          road_slots=32, road_radius=30.0),
            scenarios=HIDDEN_EXIT_INTENT_SCENES,
            policy=PolicyConfig(core=core, embed=32, hidden=64, n_layers=1, n_heads=4, task_classes=2,
                                intent_floor=0.2),
            ppo=PPOConfig(lr=1e-3, update_epochs=4, num_minibatches=4, ent_coef=0.01, gamma=0.99, gae_lambda=0.95,
                          aux_task_coef=1.0),
            rollout_steps=100, total_agent_steps=1_500_000, device="cpu")
    return TrainConfig(
        env=EnvConfig(num_envs=128, max_agents=1, goal_behavior="trial", k_trials=2, trial_length=55,
                      hidden_goal=True, exit_feedback=True, report_steps=5, goal_radius=3.0, collision_behavior="remove",
                      offroad_behavior="ignore", reward_offroad=-0.01, reward_progress=0.05,
                      progress_target="nearest_exit", partner_slots=1, road_slots=32, road_radius=30.0),
        scenarios=HIDDEN_EXIT_SCENES,
        policy=PolicyConfig(core=core, embed=32, hidden=64, n_layers=1, n_heads=4, task_classes=2),
        ppo=PPOConfig(lr=1e-3, update_epochs=4, num_minibatches=4, ent_coef=0.01, gamma=0.99, gae_lambda=0.95,
                      aux_task_coef=1.0),
        rollout_steps=100, total_agent_steps=1_500_000, device="cpu")


def hidden_exit_mlp() -> TrainConfig:
    """`hidden_exit` with the memoryless MLP (the baseline that cannot adapt)."""
    return hidden_exit("mlp")


def hidden_exit_steer() -> TrainConfig:
    """`hidden_exit` without the exit intent (steering only; the previous benchmark, docs/notes/drive-adapt2.md)."""
    return hidden_exit("transformer", intent=False)


def fast_k2() -> TrainConfig:
    """The adaptation benchmark's scale, fitted to 2 CPU cores: K = 2 trials of 40 ticks, 32 envs x 8 agents,
    observations fitted to the scene (8 partner and 64 road slots: the scenes hold <= 8 vehicles, and the 64
    nearest road segments cover the junction), a d_model = 64 core (embed 32), 1 epoch x 2 minibatches (as
    PufferLib), the transformer's context prefix as the stop-gradient keys/values the rollout computed
    (`PPOConfig.context = "stored"`: no prefill).
    `benchmarks/drive_train.py --preset fast_k2` measures it."""
    return TrainConfig(
        env=EnvConfig(num_envs=32, max_agents=8, goal_behavior="trial", k_trials=2, trial_length=40,
                      collision_behavior="remove", offroad_behavior="remove", partner_slots=8, road_slots=64),
        scenarios="procedural:n=128,agents=8",
        policy=PolicyConfig(core="transformer", embed=32, hidden=64, n_layers=2, n_heads=4),
        ppo=PPOConfig(update_epochs=1, num_minibatches=2, context="stored"), rollout_steps=32,
        total_agent_steps=20_000_000)


def debug() -> TrainConfig:
    """Tiny: 2 envs x 4 agents, 2 trials of 8 ticks, 1-layer transformer, 3 updates (seconds on CPU)."""
    return TrainConfig(
        env=EnvConfig(num_envs=2, max_agents=4, goal_behavior="trial", k_trials=2, trial_length=8,
                      collision_behavior="remove", offroad_behavior="remove", partner_slots=8, road_slots=32),
        scenarios="procedural:n=4,agents=4",
        policy=PolicyConfig(core="transformer", embed=16, hidden=32, n_layers=1, n_heads=2),
        ppo=PPOConfig(update_epochs=2, num_minibatches=2), rollout_steps=16, total_agent_steps=3 * 2 * 4 * 16,
        device="cpu", checkpoint_every=2, show_progress=False)


TRAIN_PRESETS = {"default": default, "adaptive_k2": adaptive_k2, "adaptive_k4": adaptive_k4,
                 "hidden_goal": hidden_goal, "hidden_exit": hidden_exit, "hidden_exit_mlp": hidden_exit_mlp,
                 "hidden_exit_steer": hidden_exit_steer,
                 "fast_k2": fast_k2, "debug": debug}


def selfplay() -> TrainConfig:
    """A self-play agent that drives: every vehicle of procedural scenes (<= 8 per scene) is a learner
    agent; aimed at >= 0.95 goal rate with collision + offroad <= 0.03 on held-out scenes within 60 minutes on 2
    CPU cores (`benchmarks/drive_selfplay.py`). One trial per episode (an ego that reaches its goal leaves the
    map; the episode ends when every ego has left or after 91 ticks, then a new scene), which is exactly what
    `ttlab drive eval --mode self_play` measures; collisions and offroad remove the agent; potential-based
    progress shaping toward the goal (0.05 per metre: in 4-minute probes it learnt faster per step than 0.02;
    collision / offroad penalties of -1 instead of -0.5 held the goal rate near 0 for 1.2M steps); the memoryless MLP (the
    fastest learner on CPU) on observations fitted to the scenes (8 partner, 64 road slots); 2 epochs x 4
    minibatches (1 x 2 and 4 x 4 did worse per minute in the probes; docs/notes/drive-pop.md)."""
    return TrainConfig(
        env=EnvConfig(num_envs=64, max_agents=8, goal_behavior="trial", k_trials=1, trial_length=91,
                      collision_behavior="remove", offroad_behavior="remove", reward_progress=0.05,
                      partner_slots=8, road_slots=64),
        scenarios="procedural:n=256,agents=8", policy=PolicyConfig(core="mlp", embed=64, hidden=128),
        ppo=PPOConfig(lr=1e-3, update_epochs=2, num_minibatches=4), rollout_steps=64,
        total_agent_steps=60_000_000, time_limit="60m", device="cpu")


TRAIN_PRESETS["selfplay"] = selfplay


def selfplay_yield() -> TrainConfig:
    """`selfplay` with what the self-play tuning found (docs/notes/drive-selfplay2.md): 2048 training scenes (no
    generalisation gap), the lr annealed linearly to 0, a nonlinear partner encoder that also reads each partner's
    constant-velocity closest approach (`policy.partner_encoder = "kinematic"`), and a penalty of 0.05 per tick on
    a collision course (`env.reward_conflict`), the dense signal for giving way that a collision penalty alone
    gives only when it is too late. 59 minutes: generating the scenes takes the rest of the hour."""
    cfg = selfplay()
    cfg.scenarios = "procedural:n=2048,agents=8"
    cfg.ppo.lr_end = 0.0
    cfg.policy.partner_encoder = "kinematic"
    cfg.env.reward_conflict = -0.05
    cfg.time_limit = "59m"
    return cfg


TRAIN_PRESETS["selfplay_yield"] = selfplay_yield


# The real scene we have (CARLA Town02, Waymo-format JSON), split by vehicle: even-numbered vehicles are trained on
# (one scene per ego, cropped to it and its 7 nearest others, which replay their logs), odd-numbered ones are held
# out: never an ego in training (they appear there only as logged partners).
REAL_SCENE = "carla_town02_womd.json"  # in the shared data folder (ttlab.common.data)
REAL_TRAIN = "egos=even&split=each&view=8&repeat=16"
REAL_HELD_OUT = "egos=odd"  # the whole town, the held-out vehicles drive, the others replay their logs
REAL_HELD_OUT_EACH = "egos=odd&split=each"  # one held-out ego per scene, everyone else replays the log


def real_scene(selection: str) -> str:
    """The scene source of the real scene with an ego selection (`REAL_TRAIN`, ...); a one-line error when the
    shared data folder does not hold it."""
    shared_data_file(REAL_SCENE)  # a one-line error now when the shared data folder lacks it
    return f"{SHARED_PREFIX}{REAL_SCENE}?{selection}"


def selfplay_real() -> TrainConfig:
    """`selfplay_yield` on procedural scenes plus the real scene (`REAL_TRAIN`: 16 copies of each training ego's
    view of Town02, about 8% of the episodes), budgeted in agent-steps with the learning rate annealed linearly
    to 0 over those steps (no wall-time limit, so a slower machine takes longer and learns the same). Held out:
    `REAL_HELD_OUT` / `REAL_HELD_OUT_EACH` (Town02's other vehicles as egos) and the procedural pool of seed + 1000
    (`benchmarks/drive_selfplay.py --preset selfplay_real`). The budget: 13M agent-steps took about 45 minutes of one CPU thread on a loaded 2-core machine
    (load average 7; about 5k agent-steps per second, plus 4 minutes generating the scenes)."""
    cfg = selfplay_yield()
    cfg.scenarios = f"procedural:n=2048,agents=8;{real_scene(REAL_TRAIN)}"
    cfg.time_limit = ""
    cfg.total_agent_steps = 13_000_000
    return cfg


TRAIN_PRESETS["selfplay_real"] = selfplay_real


PARTNER_SCENES = "crossing:n=256,seed=0"
PARTNER_HELD_OUT = "crossing:n=64,seed=1000"


def partner_adapt(core: str = "transformer", aux: bool = False) -> TrainConfig:
    """The partner-adaptation benchmark (`benchmarks/drive_partner_adapt.py`): the blind all-way-stop crossing
    (`scenarios.crossing`), one ego (slot 0, the learner) and one partner drawn per episode from the scripted
    population {never_yield, yield} (`drive.partners`) and kept for K = 2 trials of 50 ticks. The partner's type is
    what the ego must learn by interacting: against never_yield it must let the partner through first, against
    yield it must go at once; both look alike until it is too late to choose, so a memoryless ego scores at most
    about 0.5 and an ego that remembers trial 0 can score 1 in trial 1 (scripted, tests/drive/test_partner_adapt.py).
    Offroad and collisions remove the ego; potential-based progress shaping toward the goal (visible; not a hint
    of the type), 0.3 per metre: the ego starts at rest, and at 0.05 (the T-maze's, whose ego starts moving) an MLP
    had not reached its goal once after 170 updates, while at 0.3 it scored 0.5 against `yield` after 30
    (docs/notes/drive-partner.md). `aux`: the privileged auxiliary loss, a task head trained to predict the
    partner's type. The lr decays linearly to 0 (cleanrl's `anneal_lr`): at a constant 1e-3 one transformer seed
    of three learned to adapt and lost it in the last quarter of training."""
    return TrainConfig(
        env=EnvConfig(num_envs=64, max_agents=2, goal_behavior="trial", k_trials=2, trial_length=50,
                      collision_behavior="remove", offroad_behavior="remove", goal_radius=2.0, reward_progress=0.3,
                      partner_slots=1, partner_radius=6.0, road_slots=32, road_radius=30.0,
                      box_scale=1.0),  # full-size boxes: the crossing's timings are set so that hesitating collides
        scenarios=PARTNER_SCENES, partners=("never_yield", "yield"), partner_weights=(0.5, 0.5),
        policy=PolicyConfig(core=core, embed=32, hidden=64, n_layers=1, n_heads=4, task_classes=2 if aux else 0),
        ppo=PPOConfig(lr=1e-3, lr_end=0.0, update_epochs=4, num_minibatches=4, ent_coef=0.01, gamma=0.99,
                      gae_lambda=0.95, aux_task_coef=1.0 if aux else 0.0),
        rollout_steps=100, total_agent_steps=3_000_000, device="cpu")


def partner_adapt_debug() -> TrainConfig:
    """Tiny `partner_adapt` (tests, smoke runs): 4 envs, 8 scenes, a 1-layer transformer, 2 updates."""
    cfg = partner_adapt()
    cfg.env.num_envs = 4
    cfg.scenarios = "crossing:n=8,seed=0"
    cfg.policy = PolicyConfig(core="transformer", embed=16, hidden=32, n_layers=1, n_heads=2)
    cfg.ppo.update_epochs, cfg.ppo.num_minibatches = 1, 2
    cfg.rollout_steps, cfg.total_agent_steps = 20, 2 * 4 * 2 * 20
    cfg.checkpoint_every, cfg.show_progress = 1, False
    return cfg


TRAIN_PRESETS["partner_adapt"] = partner_adapt
TRAIN_PRESETS["partner_adapt_debug"] = partner_adapt_debug
