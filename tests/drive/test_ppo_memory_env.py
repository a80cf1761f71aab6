"""PPO + rollout on a tiny fake memory task: a hidden bit revealed in trial 0 is needed in trial 1.

The fake env follows the simulator's conventions (res.removed = out of play during the step just
taken; env.state.removed = out of play now; env.ep_step == 0 at an episode start).
Trial of 3 ticks: tick 0 the agent picks a in {0, 1}, reward 1 if a == b (hidden bit, per agent per
episode); tick 1 the observation shows (a, a == b); an agent that was right is removed for tick 2.
Episode = K = 2 trials; trial-start observations are identical. Memoryless: 0.5 in every trial;
with memory: 1.0 in trial 1.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ttlab.drive.config import PPOConfig
from ttlab.drive.policy import LSTMPolicy, MLPPolicy, ObsLayout, TransformerPolicy
from ttlab.drive.policy.dist import log_prob
from ttlab.drive.ppo import ppo_update
from ttlab.drive.rollout import Rollout

LAYOUT = ObsLayout(ego_dim=4, partner_slots=1, partner_dim=2, road_slots=1, road_dim=2, road_type_col=1,
                   num_road_types=2)


class MemoryEnv:
    K, L = 2, 3

    def __init__(self, num_envs: int = 32, num_agents: int = 2, seed: int = 0):
        self.num_envs, self.num_agents = num_envs, num_agents
        self.layout, self.obs_dim, self.num_actions = LAYOUT, LAYOUT.obs_dim, 2
        self.horizon, self.device = self.K * self.L, torch.device("cpu")
        self.g = torch.Generator().manual_seed(seed)
        self.controlled = torch.ones(num_envs, num_agents, dtype=torch.bool)
        self.hits = torch.zeros(self.K)
        self.count = torch.zeros(self.K)

    def _obs(self) -> torch.Tensor:
        E, A = self.num_envs, self.num_agents
        obs = torch.zeros(E, A, self.obs_dim)
        tick = self.tick.view(E, 1).expand(E, A)
        obs[..., 0] = (tick == 0).float()
        obs[..., 1] = (tick == 1).float()
        obs[..., 2] = torch.where(tick == 1, self.choice.float() * 2 - 1, torch.zeros(E, A))
        obs[..., 3] = torch.where(tick == 1, self.right.float(), torch.zeros(E, A))
        return obs

    def reset(self):
        E, A = self.num_envs, self.num_agents
        self.bit = torch.randint(0, 2, (E, A), generator=self.g)
        self.tick = torch.zeros(E, dtype=torch.long)
        self.trial = torch.zeros(E, dtype=torch.long)
        self.ep_step = torch.zeros(E, dtype=torch.long)
        self.choice = torch.zeros(E, A, dtype=torch.long)
        self.right = torch.zeros(E, A, dtype=torch.bool)
        self.state = SimpleNamespace(removed=torch.zeros(E, A, dtype=torch.bool))
        return self._obs()

    def step(self, actions: torch.Tensor):
        E, A = self.num_envs, self.num_agents
        first = (self.tick == 0).view(E, 1)
        removed_during = self.state.removed.clone()
        right_now = actions.long() == self.bit
        reward = (first & right_now).float()
        self.choice = torch.where(first, actions.long(), self.choice)
        self.right = torch.where(first, right_now, self.right)
        self.hits.index_add_(0, self.trial, (first & right_now).float().sum(1))
        self.count.index_add_(0, self.trial, first.float().expand(E, A).sum(1))
        self.tick += 1
        self.ep_step += 1
        trial_end = self.tick >= self.L  # (E,)
        ep_end = trial_end & (self.trial == self.K - 1)
        removed_next = (self.tick == 2).view(E, 1) & self.right
        self.state.removed = removed_next & ~trial_end.view(E, 1)
        self.tick = torch.where(trial_end, torch.zeros_like(self.tick), self.tick)
        self.trial = torch.where(trial_end, (self.trial + 1) % self.K, self.trial)
        self.ep_step = torch.where(ep_end, torch.zeros_like(self.ep_step), self.ep_step)
        newbit = torch.randint(0, 2, (E, A), generator=self.g)
        self.bit = torch.where(ep_end.view(E, 1), newbit, self.bit)
        ones = torch.ones(E, A, dtype=torch.bool)
        return SimpleNamespace(obs=self._obs(), reward=reward, terminals=ep_end.view(E, 1) & ones,
                               truncations=trial_end.view(E, 1) & ones, removed=removed_during,
                               trial_ended=trial_end.view(E, 1) & ones, controlled=self.controlled)

    def metrics(self):
        rate = self.hits / self.count.clamp_min(1)
        out = {f"trial_{k}_goal_rate": rate[k] for k in range(self.K)}
        out["ada_delta_trial_1_minus_0"] = rate[1] - rate[0]
        self.hits.zero_()
        self.count.zero_()
        return out


def _transformer():
    return TransformerPolicy(LAYOUT, 2, embed=16, d_model=32, n_layers=1, n_heads=2, horizon=MemoryEnv.K * MemoryEnv.L)


def test_first_epoch_logprobs_equal_the_rollouts_across_row_boundaries():
    """Training attends over exactly the rollout's context, even when episodes cross rows."""
    torch.manual_seed(0)
    env = MemoryEnv(num_envs=4)
    policy = _transformer().eval()
    ro = Rollout(env, policy, steps=4, gamma=0.9, gae_lambda=0.9)  # T=4 < episode length 6
    for _ in range(3):
        b = ro.collect()
        with torch.no_grad():
            logits, values, _ = policy(b.obs, b.terminals, b.removed, pos0=b.pos0)
        C = policy.context_len
        m = b.mask  # the rollout computes only the agents in play: compare there
        lp = log_prob(logits[:, C:], b.actions, False)
        assert (lp - b.logprobs)[m].abs().max() < 1e-5
        assert (values[:, C:] - b.values)[m].abs().max() < 1e-5
        assert b.mask.sum() < b.mask.numel()  # limbo steps were masked
        with torch.no_grad():  # the training path with the prefill's keys/values as memory: the same
            logits_m, values_m, _ = policy(b.obs[:, C:], b.terminals, b.removed, pos0=b.pos0, memory=b.memory)
        assert (log_prob(logits_m, b.actions, False) - b.logprobs)[m].abs().max() < 1e-5
        assert (values_m - b.values)[m].abs().max() < 1e-5


def test_stored_context_reproduces_the_rollouts_logprobs_after_the_weights_change():
    """context = stored: no prefill; training with the rollout's recorded keys/values as memory attends exactly
    what the rollout attended, even though the weights changed between the rollouts."""
    torch.manual_seed(0)
    env = MemoryEnv(num_envs=4)
    policy = _transformer()
    ro = Rollout(env, policy, steps=4, gamma=0.9, gae_lambda=0.9, stored_context=True)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    C = policy.context_len
    for _ in range(4):
        policy.eval()
        b = ro.collect()
        with torch.no_grad():
            logits, values, _ = policy(b.obs[:, C:], b.terminals, b.removed, pos0=b.pos0, memory=b.memory)
        m = b.mask
        assert (log_prob(logits, b.actions, False) - b.logprobs)[m].abs().max() < 1e-5
        assert (values - b.values)[m].abs().max() < 1e-5
        policy.train()
        ppo_update(policy, opt, b, PPOConfig(update_epochs=1, num_minibatches=1, context="stored"))


def test_rollout_masks_limbo_and_stops_bootstrap_at_trial_ends():
    torch.manual_seed(0)
    env = MemoryEnv(num_envs=2, num_agents=1)
    ro = Rollout(env, MLPPolicy(LAYOUT, 2, embed=8, hidden=16), steps=12, gamma=0.9, gae_lambda=0.9)
    b = ro.collect()
    # ticks 2, 5, 8, 11 end a trial -> stop; an agent right at tick 0 is removed at tick 2
    assert ro.stop[:, 2::3].all()
    right = b.rewards[:, 0::3] > 0  # (N, 4)
    assert torch.equal(~b.mask[:, 2::3], right)
    assert b.terminals[:, 0].all() and b.terminals[:, 6].all() and not b.terminals[:, 3].any()


def test_one_ppo_update_changes_weights_and_reduces_the_loss():
    torch.manual_seed(0)
    env = MemoryEnv(num_envs=16)
    policy = _transformer()
    ro = Rollout(env, policy, steps=12, gamma=0.9, gae_lambda=0.9)
    policy.eval()
    b = ro.collect()
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    before = [p.detach().clone() for p in policy.parameters()]
    cfg = PPOConfig(update_epochs=1, num_minibatches=1, ent_coef=0.0)
    m1 = ppo_update(policy, opt, b, cfg)
    m2 = ppo_update(policy, opt, b, cfg)
    assert any(not torch.equal(a, p) for a, p in zip(before, policy.parameters(), strict=True))
    loss1 = m1["losses/policy_loss"] + 0.5 * m1["losses/value_loss"]
    loss2 = m2["losses/policy_loss"] + 0.5 * m2["losses/value_loss"]
    assert loss2 < loss1


def _train(policy, updates: int, seed: int, context: str = "memory"):
    torch.manual_seed(seed)
    env = MemoryEnv(num_envs=32, seed=seed)
    ro = Rollout(env, policy, steps=12, gamma=0.9, gae_lambda=0.9, stored_context=context == "stored")
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    cfg = PPOConfig(update_epochs=4, num_minibatches=2, ent_coef=0.003, context=context)
    for _ in range(updates):
        policy.eval()
        b = ro.collect()
        policy.train()
        ppo_update(policy, opt, b, cfg)
    env.metrics()
    policy.eval()
    for _ in range(4):
        ro.collect()
    return env.metrics()


def test_transformer_adapts_across_trials_and_the_mlp_cannot():
    torch.manual_seed(1)
    tm = _train(_transformer(), updates=60, seed=1)
    torch.manual_seed(1)
    mm = _train(MLPPolicy(LAYOUT, 2, embed=16, hidden=32), updates=60, seed=1)
    assert tm["trial_1_goal_rate"] > 0.85, tm
    assert tm["ada_delta_trial_1_minus_0"] > 0.3, tm
    assert abs(float(mm["ada_delta_trial_1_minus_0"])) < 0.15, mm
    assert mm["trial_1_goal_rate"] < 0.65, mm


@pytest.mark.slow
@pytest.mark.parametrize("context", ["stored", "full"])
def test_transformer_adapts_with_the_other_context_modes(context):
    torch.manual_seed(1)
    tm = _train(_transformer(), updates=60, seed=1, context=context)
    assert tm["trial_1_goal_rate"] > 0.85, tm
    assert tm["ada_delta_trial_1_minus_0"] > 0.3, tm


@pytest.mark.parametrize("core", ["lstm"])
def test_lstm_rollout_and_training_forward_agree(core):
    torch.manual_seed(0)
    env = MemoryEnv(num_envs=4)
    policy = LSTMPolicy(LAYOUT, 2, embed=8, hidden=16).eval()
    ro = Rollout(env, policy, steps=4, gamma=0.9, gae_lambda=0.9)
    for _ in range(3):
        b = ro.collect()
        with torch.no_grad():
            logits, _, _ = policy(b.obs, b.terminals, b.removed, state=b.state0)
        assert (log_prob(logits, b.actions, False) - b.logprobs).abs().max() < 1e-5
