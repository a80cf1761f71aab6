"""Range checks of `ttlab drive train`'s flags, run before a scene is loaded or a run directory made.

    check_train(cfg)    # raises UserError("--ppo.update-epochs 0: must be >= 1")

The simulator's own fields are checked by `EnvConfig.validate` (also run by every env); this adds the run's, PPO's
and the policy's, and the flag combinations the trainer refuses.
"""

from __future__ import annotations

from ttlab.common.errors import UserError
from ttlab.common.flags import above, at_least, one_of, within
from ttlab.drive.config import CONTEXTS, PolicyConfig, PPOConfig, TrainConfig
from ttlab.drive.policy import CORES


def check_ppo(p: PPOConfig) -> None:
    pre = "ppo."
    above(p, ("lr", "clip_coef", "max_grad_norm"), 0, pre)
    at_least(p, ("update_epochs", "num_minibatches"), 1, pre)
    at_least(p, ("vf_coef", "ent_coef", "aux_task_coef", "explore_steer", "explore_start"), 0, pre)
    for n in ("gamma", "gae_lambda", "explore_start_prob"):
        within(p, n, 0, 1, prefix=pre)
    for n in ("lr_end", "ent_coef_end"):
        if getattr(p, n) is not None:
            at_least(p, (n,), 0, pre)
    if p.target_kl is not None:
        above(p, ("target_kl",), 0, pre)
    one_of(p, "context", CONTEXTS, pre)


def check_policy(p: PolicyConfig) -> None:
    pre = "policy."
    one_of(p, "core", CORES, pre)
    at_least(p, ("embed", "hidden", "n_layers", "n_heads"), 1, pre)
    at_least(p, ("horizon", "task_classes"), 0, pre)
    within(p, "intent_floor", 0, 1, prefix=pre)
    if p.core == "transformer" and p.hidden % p.n_heads:
        raise UserError(f"--policy.hidden {p.hidden}: must be a multiple of --policy.n-heads {p.n_heads}")


def check_train(cfg: TrainConfig) -> None:
    cfg.env.validate()
    check_ppo(cfg.ppo)
    check_policy(cfg.policy)
    at_least(cfg, ("total_agent_steps", "rollout_steps", "checkpoint_every", "log_every", "bc_epochs"), 1)
    at_least(cfg, ("keep_every", "bc_ticks", "bc_dagger"), 0)
    within(cfg, "coplayer_envs", 0, 1)
    within(cfg, "reward_schedule_start", 0, 1, hi_open=True)
    if cfg.reward_collision_end is not None and cfg.env.reward_conditioning:
        raise UserError("--reward-collision-end: env.reward_conditioning draws its own weights per episode")
    if cfg.partners and cfg.coplayers:
        raise UserError("--partners and --coplayers are exclusive (a population, or co-players in some envs)")
    if cfg.partner_weights and len(cfg.partner_weights) != len(cfg.partners):
        raise UserError(f"--partner-weights: {len(cfg.partner_weights)} weights for {len(cfg.partners)} partners")
    if any(not w >= 0 for w in cfg.partner_weights) or (cfg.partner_weights and not sum(cfg.partner_weights) > 0):
        raise UserError(f"--partner-weights {list(cfg.partner_weights)}: must be >= 0 with a positive sum")
