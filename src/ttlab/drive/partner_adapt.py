"""Train, evaluate and summarise the partner-adaptation figure (`presets.partner_adapt`): what
`benchmarks/drive_partner_adapt.py` wires to flags and prints, and what its tests check.

    policy, curve, facts = train_partner(presets.partner_adapt("lstm", aux=False), seed=0, steps=3_000_000)
    out = evaluate_partner(cfg, policy, HELD_OUT_PARTNERS, seed=100, episodes=4)   # per-partner paired trials
    run = run_arm("partner_adapt", "transformer", False, seed=0, ...)              # one arm and seed, trained + evaluated
    summary = summarise(runs, scripted, cores, auxes, K); partner_targets(summary)  # the figure's claims

The loop is the trainer's (Rollout with the partner population as co-players -> ppo_update), without run
directories, so a benchmark can log every update's per-trial learner metrics as its learning curve.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from ttlab.common.checkpoint import save_checkpoint
from ttlab.common.config import to_dict
from ttlab.drive.adapt import apply_overrides
from ttlab.drive.config import TrainConfig
from ttlab.drive.partner_eval import forgetful_ego, partner_summary, policy_ego, run_paired
from ttlab.drive.partner_scripted import MemoryEgo, TimedEgo
from ttlab.drive.partners import HELD_OUT_PARTNERS, SCRIPTED, build_population
from ttlab.drive.policy import build_policy
from ttlab.drive.ppo import annealed, ppo_update
from ttlab.drive.presets import PARTNER_HELD_OUT, TRAIN_PRESETS
from ttlab.drive.rollout import Rollout
from ttlab.drive.train import env_horizon, make_env


def train_partner(cfg: TrainConfig, seed: int, steps: int | None = None, seconds: float | None = None,
                  log=None) -> tuple[torch.nn.Module, list[dict], dict]:
    """PPO on `cfg` (a `partner_adapt` config) against its partner population for `steps` learner-slot agent-steps
    (rounded up to whole updates; every env slot counts, as in `ttlab drive train`) or `seconds` of wall time.
    Returns (policy in eval mode, learning curve: one dict per update, run facts)."""
    if (steps is None) == (seconds is None):
        raise ValueError("train_partner: give exactly one of steps= or seconds=")
    if not cfg.partners:
        raise ValueError("train_partner: the config has no partner population (TrainConfig.partners)")
    torch.manual_seed(seed)
    env = make_env(cfg.env, cfg.scenarios, torch.device("cpu"), seed)
    pop = build_population(cfg.partners, cfg.partner_weights, env)
    policy = build_policy(cfg.policy, env.layout, env.num_actions, False, horizon=env_horizon(env))
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.ppo.lr, eps=1e-5)
    ro = Rollout(env, policy, cfg.rollout_steps, cfg.ppo.gamma, cfg.ppo.gae_lambda, coplayers=pop)
    ppo = dataclasses.replace(cfg.ppo)
    per_update = ro.N * cfg.rollout_steps
    updates = -(-steps // per_update) if steps is not None else None
    curve: list[dict] = []
    t0 = time.perf_counter()
    u = 0
    while (u < updates) if updates is not None else (time.perf_counter() - t0 < seconds):
        u += 1
        frac = (u - 1) / max(1, updates - 1) if updates is not None else (time.perf_counter() - t0) / seconds
        ppo.ent_coef = annealed(cfg.ppo.ent_coef, cfg.ppo.ent_coef_end, frac)
        for group in opt.param_groups:
            group["lr"] = annealed(cfg.ppo.lr, cfg.ppo.lr_end, frac)
        policy.eval()
        batch = ro.collect()
        policy.train()
        losses = ppo_update(policy, opt, batch, ppo)
        m = env.metrics()  # one host sync per update
        row = {"update": u, "agent_steps": u * per_update, "wall_s": round(time.perf_counter() - t0, 1)}
        row.update({k: round(float(v), 4) for k, v in m.items()
                    if k.startswith(("trial_", "ada_delta_trial_")) and k.endswith(("_score", "_minus_0",
                                                                                     "collision_rate"))})
        row.update({k.split("/")[1]: round(float(losses[k]), 4) for k in ("losses/entropy", "losses/task_accuracy")
                    if k in losses})
        curve.append(row)
        if log is not None and (u % 10 == 0 or u == updates):
            log(f"  {cfg.policy.core} seed {seed} update {u}{'/' + str(updates) if updates else ''} "
                f"{row['wall_s']:.0f}s score t0 {row.get('trial_0_score', 0):.3f} t1 {row.get('trial_1_score', 0):.3f}"
                f" coll t0 {row.get('trial_0_collision_rate', 0):.3f} ent {row.get('entropy', 0):.2f}")
    facts = {"updates": u, "agent_steps": u * per_update, "train_wall_s": round(time.perf_counter() - t0, 1),
             "params": sum(p.numel() for p in policy.parameters())}
    return policy.eval(), curve, facts


def save_policy(stem: str | Path, policy: torch.nn.Module, cfg: TrainConfig, seed: int, facts: dict,
                **extra) -> Path:
    """A `ttlab drive train`-format checkpoint of a policy trained by `train_partner` (what `ttlab drive eval
    --checkpoint` and `--partners <stem>` load), with `extra` JSON fields beside it."""
    save_checkpoint(Path(stem), {
        "policy": policy.state_dict(), "policy_config": to_dict(cfg.policy), "env_config": to_dict(cfg.env),
        "scenarios": cfg.scenarios, "seed": seed, "partners": list(cfg.partners),
        "partner_weights": list(cfg.partner_weights), "horizon": cfg.env.k_trials * cfg.env.trial_length,
        "update": facts["updates"], "agent_steps": facts["agent_steps"], **extra})
    return Path(stem)


def partner_label(spec: str | Path) -> str:
    """A partner's name in result files: a scripted type's name, or a checkpoint stem's last part (no machine path)."""
    return str(spec) if str(spec) in SCRIPTED else Path(spec).name


def held_out_env(cfg: TrainConfig, seed: int, num_envs: int = 64, scenes: str = PARTNER_HELD_OUT):
    """The config's env (overrides included) on held-out scenes (other seeds than training)."""
    env_cfg = dataclasses.replace(cfg.env, num_envs=num_envs)
    return make_env(env_cfg, scenes, torch.device("cpu"), seed)


def evaluate_partner(cfg: TrainConfig, policy_or_ego, partners, seed: int, episodes: int, num_envs: int = 64,
                     scenes: str = PARTNER_HELD_OUT) -> dict:
    """Paired trials on held-out scenes against `partners` (uniform), overall and per partner (keyed by
    `partner_label`). `policy_or_ego`: a policy (sampled, as in training) or a callable `ego(env) -> ego` (a scripted
    ego, `drive.partner_scripted`)."""
    env = held_out_env(cfg, seed, num_envs, scenes)
    pop = build_population([str(p) for p in partners], None, env)
    ego = policy_ego(policy_or_ego) if isinstance(policy_or_ego, torch.nn.Module) else policy_or_ego(env)
    return partner_summary(*run_paired(env, ego, pop, episodes), [partner_label(p) for p in pop.names])


WHERE = ("train_partners", "held_out_partners")  # the training partners, and partners never seen in training


def arm_config(preset: str, core: str, aux: bool, overrides: dict | None,
               partners: tuple[str, ...] | None = None) -> TrainConfig:
    """The preset with `core` and the privileged auxiliary loss (predict the partner's type) on or off, then the
    `section.field=value` overrides (`adapt.apply_overrides`; an unknown key raises ValueError). `partners`: a
    training population instead of the preset's (uniform weights)."""
    cfg = TRAIN_PRESETS[preset]()
    if partners:
        cfg.partners, cfg.partner_weights = tuple(str(p) for p in partners), ()
    cfg.policy.core = core
    cfg.policy.task_classes = len(cfg.partners) if aux else 0
    cfg.ppo.aux_task_coef = 1.0 if aux else 0.0
    return apply_overrides(cfg, overrides)


def short_metrics(m: dict, K: int) -> dict:
    """The per-trial scores, collision rates, times to goal and paired deltas of an evaluation, rounded, overall
    and per partner."""
    keep = [f"trial_{k}_{n}" for k in range(K) for n in ("score", "collision_rate", "time_to_goal")]
    keep += [f"ada_delta_trial_{k}_minus_0{s}" for k in range(1, K) for s in ("", "_score_stderr")]
    out = {k: round(m[k], 4) for k in keep if k in m}
    out["ego_trials"] = m.get("ego_trials")
    out["per_partner"] = {n: {k: round(v[k], 4) for k in keep if k in v} for n, v in m.get("per_partner", {}).items()}
    return out


def run_arm(preset: str, core: str, aux: bool, seed: int, steps: int | None, minutes: float | None, eval_envs: int,
            eval_episodes: int, threads: int, t_start: float, overrides: dict, partners: tuple[str, ...] | None = None,
            held_out: tuple[str, ...] = HELD_OUT_PARTNERS, save_dir: str | None = None) -> dict:
    """Train one arm and seed, then evaluate it on held-out scenes with the training and the held-out partners
    (`partners`: a training population instead of the preset's; `save_dir`: save the trained ego there as
    `<core>[_aux]_seed<seed>`, a `ttlab drive eval` checkpoint)."""
    torch.set_num_threads(threads)

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.0f}s] {msg}", flush=True)

    cfg = arm_config(preset, core, aux, overrides, partners)
    log(f"train {core} aux={aux} seed {seed}")
    policy, curve, facts = train_partner(cfg, seed, steps=steps, seconds=None if steps else 60 * minutes, log=log)
    if save_dir is not None:
        save_policy(Path(save_dir) / f"{core}{'_aux' if aux else ''}_seed{seed}", policy, cfg, seed, facts)
    t0 = time.perf_counter()
    K = cfg.env.k_trials
    ev = {"train_partners": short_metrics(evaluate_partner(cfg, policy, cfg.partners, 100 + seed, eval_episodes,
                                                           eval_envs), K),
          "held_out_partners": short_metrics(evaluate_partner(cfg, policy, held_out, 100 + seed,
                                                              eval_episodes, eval_envs), K)}
    # what carries the memory: trial 1 again with what the ego saw in trial 0 wiped (transformer: the clock kept;
    # LSTM: everything), and (transformer) with what it saw kept but the clock told trial 0 ran its full length
    for wipe in ("content", "clock") if core == "transformer" else ("content",) if core == "lstm" else ():
        ev[f"train_partners_wipe_{wipe}"] = short_metrics(evaluate_partner(
            cfg, forgetful_ego(policy, wipe), cfg.partners, 100 + seed, eval_episodes, eval_envs), K)
    facts["eval_wall_s"] = round(time.perf_counter() - t0, 1)
    log(f"eval {core} aux={aux} seed {seed}: Δ held-out scenes {ev['train_partners'].get('ada_delta_trial_1_minus_0')}"
        f", held-out partners {ev['held_out_partners'].get('ada_delta_trial_1_minus_0')}")
    return {"core": core, "aux": aux, "seed": seed, **facts, "eval": ev, "curve": curve}


def scripted_references(base: TrainConfig, episodes: int, num_envs: int, log=None,
                        held_out: tuple[str, ...] = HELD_OUT_PARTNERS) -> dict:
    """The scripted egos on the held-out scenes: one with memory, and the best memoryless start times of the test
    grid (go at once, wait 1.2 s), against the training and the held-out partners."""
    scripted = {}
    K = base.env.k_trials
    for name, ego in (("memory", lambda e: MemoryEgo(e, 12)), ("go_at_once", lambda e: TimedEgo(e, 0, 6)),
                      ("wait_1.2s", lambda e: TimedEgo(e, 12, 6))):
        scripted[name] = {p: short_metrics(evaluate_partner(base, ego, partners, 0, episodes, num_envs), K)
                          for p, partners in (("train_partners", base.partners), ("held_out_partners", held_out))}
        if log is not None:
            log(f"scripted {name}: Δ {scripted[name]['train_partners'].get('ada_delta_trial_1_minus_0')} "
                f"t1 {scripted[name]['train_partners'].get('trial_1_score')}")
    return scripted


def memoryless_ceiling(scripted: dict) -> dict:
    """What no memory can beat: the best trial-1 score of the memoryless scripted egos (every one but "memory") on
    the same scenes and partners."""
    return {where: max(scripted[n][where]["trial_1_score"] for n in scripted if n != "memory") for where in WHERE}


def summarise(runs: list[dict], scripted: dict, cores: list[str], auxes: list[bool], K: int) -> dict:
    """Per arm (`core` or `core_aux`): mean and per-seed paired deltas, per-seed trial scores, each later trial's
    score minus the memoryless ceiling, and the trial scores with part of the memory wiped."""
    ceiling = memoryless_ceiling(scripted)
    summary = {}
    for c in cores:
        for a in auxes:
            arm = [r for r in runs if r["core"] == c and r["aux"] == a]
            row = {}
            for where in WHERE:
                for k in range(1, K):
                    d = [r["eval"][where][f"ada_delta_trial_{k}_minus_0"] for r in arm]
                    row[f"{where}_delta_{k}_mean"] = round(sum(d) / len(d), 4)
                    row[f"{where}_delta_{k}_per_seed"] = d
                for k in range(K):
                    row[f"{where}_trial_{k}_score"] = [r["eval"][where][f"trial_{k}_score"] for r in arm]
                # a delta can come from playing trial 0 worse (a policy knows its position in the episode); only a
                # trial-1 score above the memoryless ceiling shows the partner was remembered
                for k in range(1, K):  # a memoryless ego plays every trial alike: one ceiling for every k
                    row[f"{where}_trial_{k}_minus_memoryless_ceiling"] = [round(x - ceiling[where], 4)
                                                                          for x in row[f"{where}_trial_{k}_score"]]
                if arm and all("per_partner" in r["eval"][where] for r in arm):
                    row[f"{where}_per_partner"] = per_partner_rows(arm, where, K)
            for wipe in ("content", "clock"):
                if all(f"train_partners_wipe_{wipe}" in r["eval"] for r in arm):
                    for k in range(1, K):
                        row[f"wipe_{wipe}_trial_{k}_score"] = [r["eval"][f"train_partners_wipe_{wipe}"][f"trial_{k}_score"]
                                                               for r in arm]
            summary[f"{c}{'_aux' if a else ''}"] = row
    return summary


def per_partner_rows(arm: list[dict], where: str, K: int) -> dict:
    """Per partner of `where`, one list entry per seed of the arm: trial scores, times to goal, and the paired
    deltas with their standard errors."""
    out = {}
    for name in arm[0]["eval"][where]["per_partner"]:
        pp = [r["eval"][where]["per_partner"].get(name, {}) for r in arm]
        nan = float("nan")
        row = {f"trial_{k}_{m}": [p.get(f"trial_{k}_{m}", nan) for p in pp]
               for k in range(K) for m in ("score", "time_to_goal")}
        for k in range(1, K):
            row[f"delta_{k}"] = [p.get(f"ada_delta_trial_{k}_minus_0", nan) for p in pp]
            row[f"delta_{k}_se"] = [p.get(f"ada_delta_trial_{k}_minus_0_score_stderr", nan) for p in pp]
        out[name] = row
    return out


def partner_targets(summary: dict) -> dict:
    """The figure's targets, on the arms without the privileged loss: the transformer adapts (mean delta >= 0.15,
    every seed >= 0.10, trial 1 above the memoryless ceiling on every seed); the MLP does not (|delta| <= 0.03)."""
    targets = {}
    tr, ml = summary.get("transformer"), summary.get("mlp")
    if tr:
        targets["transformer_no_aux_mean_delta_ge_0.15"] = tr["train_partners_delta_1_mean"] >= 0.15
        targets["transformer_no_aux_every_seed_ge_0.10"] = all(x >= 0.10 for x in tr["train_partners_delta_1_per_seed"])
        # memory shown, not a clock: trial 1 above what no memory can reach, on every seed
        targets["transformer_no_aux_trial_1_above_memoryless_ceiling_every_seed"] = all(
            x > 0 for x in tr["train_partners_trial_1_minus_memoryless_ceiling"])
    if ml:
        targets["mlp_abs_delta_le_0.03"] = abs(ml["train_partners_delta_1_mean"]) <= 0.03
    return targets
