"""PPO: the clipped losses as pure masked functions, and one update over a rollout buffer.

Every statistic is a mean over *valid* steps only (controlled by the learner and not `removed`); steps
in limbo or belonging to agents the learner does not control contribute exactly zero to losses,
gradients, `approx_kl` and `clipfrac` (masking is done with `torch.where`, so even a NaN there cannot
leak). Advantages are normalised per minibatch over valid steps. Metric names follow cleanrl.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from ttlab.drive.config import CONTEXTS, PPOConfig
from ttlab.drive.policy.dist import entropy as dist_entropy
from ttlab.drive.policy.dist import log_prob as dist_log_prob


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `x` over `mask` (same shape); 0 when the mask is empty."""
    m = mask.to(torch.float32)
    return torch.where(mask, x, torch.zeros_like(x)).float().sum() / m.sum().clamp_min(1.0)


def normalize_advantages(adv: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(adv - mean) / (std + eps) with mean and (unbiased) std over valid steps; masked entries -> 0."""
    m = mask.to(adv.dtype)
    n = m.sum().clamp_min(1.0)
    mean = (adv * m).sum() / n
    var = (((adv - mean) * m) ** 2).sum() / (n - 1).clamp_min(1.0)
    out = (adv - mean) / (var.sqrt() + eps)
    return torch.where(mask, out, torch.zeros_like(out))


def ppo_losses(
    new_logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    advantages: torch.Tensor,
    new_value: torch.Tensor,
    old_value: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    mask: torch.Tensor,
    clip_coef: float = 0.2,
    vf_clip_coef: float | None = 0.2,
    ent_coef: float = 0.01,
    vf_coef: float = 0.5,
) -> dict[str, torch.Tensor]:
    """Clipped surrogate, (optionally clipped) value loss and entropy bonus; all inputs share one shape.

    Returns `loss` (to minimise) and the cleanrl statistics, each a 0-d tensor.
    """
    mask = mask.bool()
    zero = torch.zeros_like(new_logprob)
    logratio = torch.where(mask, new_logprob - old_logprob, zero)
    ratio = logratio.exp()
    pg1 = -advantages * ratio
    pg2 = -advantages * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef)
    policy_loss = masked_mean(torch.maximum(pg1, pg2), mask)
    v_err = (new_value - returns) ** 2
    if vf_clip_coef is not None:
        v_clipped = old_value + (new_value - old_value).clamp(-vf_clip_coef, vf_clip_coef)
        v_err = torch.maximum(v_err, (v_clipped - returns) ** 2)
    value_loss = 0.5 * masked_mean(v_err, mask)
    ent = masked_mean(entropy, mask)
    loss = policy_loss - ent_coef * ent + vf_coef * value_loss
    with torch.no_grad():
        approx_kl = masked_mean((ratio - 1.0) - logratio, mask)
        clipfrac = masked_mean(((ratio - 1.0).abs() > clip_coef).float(), mask)
    return {
        "loss": loss,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": ent,
        "approx_kl": approx_kl,
        "clipfrac": clipfrac,
    }


def task_loss(task_logits: torch.Tensor, task: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked cross-entropy of the task head and its accuracy: task_logits (B, T, M), task (B, T) long, mask (B, T)."""
    ce = nn.functional.cross_entropy(task_logits.float().flatten(0, 1), task.flatten(), reduction="none").view_as(task)
    with torch.no_grad():
        acc = masked_mean((task_logits.argmax(-1) == task).float(), mask.bool())
    return masked_mean(ce, mask.bool()), acc


def annealed(start: float, end: float | None, frac: float) -> float:
    """Linear schedule: `start` at frac 0, `end` at frac 1 (constant `start` when end is None)."""
    if end is None:
        return start
    f = min(max(frac, 0.0), 1.0)
    return start + (end - start) * f


def schedule_progress(update: int, total: int, elapsed_s: float = 0.0, time_limit_s: float = 0.0) -> float:
    """How far training is, in [0, 1], for the lr / entropy schedules: the update count over the budget, or, with a
    wall-time limit, the elapsed share of it when that is further along (a time-limited run stops long before
    its step budget, and a schedule on steps alone would then never reach its end value)."""
    frac = update / max(1, total - 1)
    if time_limit_s > 0:
        frac = max(frac, elapsed_s / time_limit_s)
    return min(max(frac, 0.0), 1.0)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """1 - Var[R - V] / Var[R] over valid steps (NaN when Var[R] is 0, as cleanrl)."""
    r_mean = masked_mean(returns, mask)
    var_r = masked_mean((returns - r_mean) ** 2, mask)
    d = returns - values
    d_mean = masked_mean(d, mask)
    var_d = masked_mean((d - d_mean) ** 2, mask)
    return torch.where(var_r > 0, 1.0 - var_d / var_r.clamp_min(1e-12), torch.full_like(var_r, float("nan")))


def loss_context(mask: torch.Tensor, terminals: torch.Tensor, removed: torch.Tensor, memoryless: bool) -> torch.Tensor:
    """(B, T) bool: the tokens that can reach a loss step, i.e. the ones training must compute.

    mask (B, T): loss steps; terminals, removed (B, T) over the same columns. A memoryless policy reads only
    the loss steps themselves. A memory policy also reads every step that is not removed in an episode
    holding a loss step: neither attention nor the LSTM crosses an episode start or reads a removed step
    (but its own), so the other tokens (earlier episodes in the context prefix, limbo, co-player rows)
    cannot change any loss, value or gradient.
    """
    mask = mask.bool()
    if memoryless:
        return mask
    B, T = mask.shape
    ep = terminals.long().cumsum(dim=1)  # (B, T) episode index within the row
    loss_steps = torch.zeros(B, T + 1, device=mask.device).scatter_add_(1, ep, mask.float())  # (B, T+1) per episode
    return mask | (~removed.bool() & (loss_steps.gather(1, ep) > 0))



def ppo_update(
    policy: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch,
    cfg: PPOConfig,
    generator: torch.Generator | None = None,
    autocast_bf16: bool = False,
    forward=None,
) -> dict[str, torch.Tensor]:
    """One PPO update over a `rollout.Batch`; returns the metrics (0-d tensors; no host sync here).

    `forward` (default `policy.forward`) may be a compiled version of it.
    """
    forward = forward or policy.forward
    if cfg.context not in CONTEXTS:
        raise ValueError(f"--ppo.context {cfg.context!r}: expected one of {', '.join(CONTEXTS)}")
    n_rows, T = batch.actions.shape[:2]
    C = batch.obs.shape[1] - T  # context prefix (transformer) carried from the previous rollout
    mb_rows = max(1, n_rows // max(1, cfg.num_minibatches))
    device = batch.obs.device
    stats: dict[str, list[torch.Tensor]] = {k: [] for k in ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")}
    aux = cfg.aux_task_coef > 0
    if aux:
        head = getattr(policy, "task_head", None)
        if head is None or head.classes == 0:
            raise ValueError("--ppo.aux-task-coef > 0 needs a policy with a task head (--policy.task-classes M)")
        if batch.task is None:
            raise ValueError("--ppo.aux-task-coef > 0 needs an env with a hidden task (hidden_goal=True)")
        stats.update(task_loss=[], task_accuracy=[])
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if autocast_bf16 and device.type == "cuda" else contextlib.nullcontext()
    vf_clip = cfg.vf_clip_coef if cfg.vf_clip_coef and cfg.vf_clip_coef > 0 else None
    stop_early = False
    needed = None  # on CPU, skip the tokens no loss can read (a data-dependent shape: a host sync, free there)
    if device.type == "cpu":
        loss_cols = torch.cat([batch.mask.new_zeros(n_rows, C), batch.mask], dim=1)  # (N, C+T)
        needed = loss_context(loss_cols, batch.terminals, batch.removed, policy.memoryless)
    memory = batch.memory if cfg.context in ("memory", "stored") and C > 0 else None
    if cfg.context == "stored" and C > 0 and batch.memory is None:
        raise ValueError("--ppo.context stored needs a Rollout built with stored_context=True")
    cut = 0 if memory is None else C  # with memory the forward takes the T new tokens only
    for _epoch in range(cfg.update_epochs):
        perm = torch.randperm(n_rows, generator=generator).to(device)
        for start in range(0, n_rows, mb_rows):
            idx = perm[start:start + mb_rows]
            state0 = None if batch.state0 is None else tuple(s[idx] for s in batch.state0)
            kw = {} if memory is None else {"memory": (memory[0][:, idx], memory[1][:, idx])}
            with amp:
                logits, value, _ = forward(batch.obs[idx, cut:], batch.terminals[idx], batch.removed[idx],
                                           state=state0, pos0=batch.pos0[idx],
                                           needed=None if needed is None else needed[idx, cut:], **kw)
            logits = logits[:, C - cut:].float()  # (mb, T, P)
            if batch.steer_bias is not None:  # the trial's exploration bias the rollout sampled with
                logits = logits + batch.steer_bias[idx].unsqueeze(-1) * batch.steer_template
            value = value[:, C - cut:].float()  # (mb, T)
            mask = batch.mask[idx]  # (mb, T)
            new_lp = dist_log_prob(logits, batch.actions[idx], policy.continuous)  # (mb, T)
            ent = dist_entropy(logits, policy.continuous)  # (mb, T)
            adv = batch.advantages[idx]
            if cfg.norm_adv:
                adv = normalize_advantages(adv, mask)
            out = ppo_losses(new_lp, batch.logprobs[idx], adv, value, batch.values[idx], batch.returns[idx], ent,
                             mask, cfg.clip_coef, vf_clip, cfg.ent_coef, cfg.vf_coef)
            if aux:  # the task head read the same forward's hidden state (TaskHead.logits)
                out["task_loss"], out["task_accuracy"] = task_loss(policy.task_head.logits[:, C - cut:], batch.task[idx], mask)
                out["loss"] = out["loss"] + cfg.aux_task_coef * out["task_loss"]
            optimizer.zero_grad(set_to_none=True)
            out["loss"].backward()
            nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            optimizer.step()
            for k in stats:
                stats[k].append(out[k].detach())
            if cfg.target_kl is not None and float(out["approx_kl"]) > cfg.target_kl:  # sync: opt-in only
                stop_early = True
                break
        if stop_early:
            break
    metrics = {f"losses/{k}": torch.stack(v).mean() for k, v in stats.items()}
    metrics["losses/explained_variance"] = explained_variance(batch.values, batch.returns, batch.mask)
    return metrics
