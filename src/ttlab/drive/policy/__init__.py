"""Driving policies: PufferDrive-style encoders and three cores (MLP, LSTM, causal transformer).

Every policy has two entry points:

- `forward_eval(obs (N, D), state, terminals (N,), removed (N,), active=None) -> (logits, value, state)` to step,
  where `active` (N,) bool, when given, names the agents whose outputs the caller uses (the others may be
  skipped: their outputs are then unspecified and, for the transformer, their step stays out of the cache);
- `forward(obs (B, T, D), terminals (B, T), removed (B, T), state=None, pos0=None, needed=None) -> (logits, values, state)`
  to train, where `terminals[:, t]` means obs[:, t] starts a new episode and `needed` (B, T) bool, when
  given, names the tokens whose outputs the caller uses (closed under what they read; see
  `ppo.loss_context`): the policy may skip the others, whose outputs are then unspecified.

plus `initial_state(n, device)`, `context_len` (buffer prefix the rollout carries into each row) and
`memoryless` (True when a step's output depends on its own observation only).
"""

from __future__ import annotations

from torch import nn

from ttlab.drive.config import PolicyConfig
from ttlab.drive.policy.encoders import ObsEncoder, ObsLayout
from ttlab.drive.policy.intent import IntentPolicy
from ttlab.drive.policy.lstm import LSTMPolicy
from ttlab.drive.policy.mlp import MLPPolicy
from ttlab.drive.policy.transformer import KVCache, TransformerPolicy

CORES = ("mlp", "lstm", "transformer")



def build_policy(cfg: PolicyConfig, layout, num_actions: int, continuous: bool = False,
                 horizon: int | None = None) -> nn.Module:
    """Build the policy named by `cfg.core`; `horizon` is used when `cfg.horizon` is 0.

    When the simulator's layout has an exit intent (`EnvConfig.exit_intent`), `num_actions` is the env's
    D * M joint actions: the core gets D + M head outputs and is wrapped in `IntentPolicy`."""
    if getattr(layout, "exit_intent", False):
        M = int(layout.num_goal_candidates)
        if num_actions % M:
            raise ValueError(f"exit intent: {num_actions} actions is not a multiple of the {M} candidates")
        core = _build_core(cfg, ObsLayout.of(layout), num_actions // M + M, continuous, horizon)
        return IntentPolicy(core, M, layout.intent_col, cfg.intent_floor)
    return _build_core(cfg, ObsLayout.of(layout), num_actions, continuous, horizon)


def _build_core(cfg: PolicyConfig, layout: ObsLayout, num_actions: int, continuous: bool,
                horizon: int | None) -> nn.Module:
    if cfg.core == "mlp":
        return MLPPolicy(layout, num_actions, continuous, cfg.embed, cfg.hidden, cfg.task_classes, cfg.partner_encoder)
    if cfg.core == "lstm":
        return LSTMPolicy(layout, num_actions, continuous, cfg.embed, cfg.hidden, cfg.task_classes, cfg.partner_encoder)
    if cfg.core == "transformer":
        h = cfg.horizon or horizon
        if not h:
            raise ValueError("policy.horizon is 0 and the env gave no K x trial_length; set --policy.horizon")
        return TransformerPolicy(layout, num_actions, continuous, cfg.embed, cfg.hidden, cfg.n_layers,
                                 cfg.n_heads, h, cfg.task_classes, cfg.partner_encoder)
    raise ValueError(f"--policy.core {cfg.core!r}: expected one of {', '.join(CORES)}")


__all__ = ["CORES", "IntentPolicy", "KVCache", "LSTMPolicy", "MLPPolicy", "ObsEncoder", "ObsLayout",
           "TransformerPolicy", "build_policy"]
