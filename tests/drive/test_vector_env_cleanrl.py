"""A cleanrl-style PPO loop (cleanrl's ppo.py, shortened) drives DriveVectorEnv through numpy and learns.

The loop is cleanrl's with the two additions any multi-agent lane env needs (PufferLib does the same with its
masks): bootstrapping also stops where the next observation is in limbo (`info["removed"]`), and the loss
is taken over `info["active"]` lanes only (controlled vehicles in play). Everything else (Agent,
`get_action_and_value`, GAE, the clipped objective, `RecordEpisodeStatistics`) is what cleanrl code expects.
"""

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions.categorical import Categorical

from ttlab.drive.config import EnvConfig
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.toy import pad_pool, straight_road
from ttlab.drive.vector_env import DriveVectorEnv


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs, hidden=32):
        super().__init__()
        d, n = np.prod(envs.single_observation_space.shape), envs.single_action_space.n
        self.critic = nn.Sequential(layer_init(nn.Linear(d, hidden)), nn.Tanh(), layer_init(nn.Linear(hidden, 1), 1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(d, hidden)), nn.Tanh(), layer_init(nn.Linear(hidden, n), 0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def make_envs(seed):
    """8 envs x 4 agents on short straight roads, 2 trials of 30 ticks, goal 15 m ahead; small observations."""
    pool = pad_pool([straight_road(4, seed=i, goal_ahead=15.0) for i in range(4)])
    cfg = EnvConfig(num_envs=8, max_agents=4, goal_behavior="trial", k_trials=2, trial_length=30, partner_slots=3,
                    road_slots=16, collision_behavior="remove", offroad_behavior="remove")
    return gym.wrappers.vector.RecordEpisodeStatistics(DriveVectorEnv(DriveEnv(cfg, pool, seed=seed)))


def test_cleanrl_ppo_loop_learns_through_numpy():
    seed, num_updates, num_steps, update_epochs, num_minibatches = 0, 20, 64, 4, 4
    gamma, gae_lambda, clip_coef, ent_coef, vf_coef, lr = 0.99, 0.95, 0.2, 0.01, 0.5, 3e-3
    torch.manual_seed(seed)
    envs = make_envs(seed)
    assert isinstance(envs.single_action_space, gym.spaces.Discrete)
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    N = envs.num_envs
    agent = Agent(envs)
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)

    obs = torch.zeros((num_steps, N) + envs.single_observation_space.shape)
    actions = torch.zeros((num_steps, N), dtype=torch.long)
    logprobs, rewards, dones, values, masks = (torch.zeros((num_steps, N)) for _ in range(5))

    next_obs, info = envs.reset(seed=seed)
    assert isinstance(next_obs, np.ndarray) and next_obs.dtype == np.float32 and next_obs.shape == (N, obs.shape[-1])
    next_obs, next_done = torch.Tensor(next_obs), torch.zeros(N)
    next_mask = torch.Tensor(info["active"])
    returns_per_update, first_ratios, kls = [], [], []
    for _ in range(num_updates):
        episode_returns = []
        for step in range(num_steps):
            obs[step], dones[step], masks[step] = next_obs, next_done, next_mask
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step], logprobs[step] = action, logprob
            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            next_done = np.logical_or(terminations, truncations) | infos["removed"]  # limbo ends bootstrapping
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs, next_done = torch.Tensor(next_obs), torch.Tensor(next_done)
            next_mask = torch.Tensor(infos["active"])
            if "episode" in infos:  # the lanes whose episode (here: a trial) ended on this step
                episode_returns += infos["episode"]["r"][infos["_episode"]].tolist()
        returns_per_update.append(np.mean(episode_returns))

        with torch.no_grad():  # GAE, as cleanrl
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages, lastgaelam = torch.zeros_like(rewards), 0
            for t in reversed(range(num_steps)):
                if t == num_steps - 1:
                    nextnonterminal, nextvalues = 1.0 - next_done, next_value
                else:
                    nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
                delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        keep = masks.reshape(-1).bool()  # the lanes whose actions mattered
        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)[keep]
        b_logprobs, b_actions = logprobs.reshape(-1)[keep], actions.reshape(-1)[keep]
        b_advantages, b_returns, b_values = advantages.reshape(-1)[keep], returns.reshape(-1)[keep], values.reshape(-1)[keep]
        b_inds = np.arange(len(b_actions))
        for epoch in range(update_epochs):
            np.random.default_rng(epoch).shuffle(b_inds)
            for start, mb in enumerate(np.array_split(b_inds, num_minibatches)):  # masked: the batch size varies
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions[mb])
                logratio = newlogprob - b_logprobs[mb]
                ratio = logratio.exp()
                if epoch == 0 and start == 0:
                    first_ratios.append(ratio.detach())
                with torch.no_grad():
                    kls.append(((ratio - 1) - logratio).mean().item())
                mb_adv = b_advantages[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
                v_loss = 0.5 * ((newvalue.view(-1) - b_returns[mb]) ** 2).mean()
                loss = pg_loss - ent_coef * entropy.mean() + v_loss * vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
        explained_var = 1 - torch.var(b_returns - b_values) / torch.var(b_returns)
        assert torch.isfinite(explained_var)
    envs.close()

    # numpy round trip: the update's first log-probs are exactly the ones the rollout sampled with
    for r in first_ratios:
        torch.testing.assert_close(r, torch.ones_like(r), atol=1e-5, rtol=0)
    assert all(np.isfinite(kls)) and max(kls) > 0
    # and it learns: random driving scores below zero (offroad and collisions); within 20 updates most trials
    # reach the goal (0.7-0.8 on seeds 0-3 when this test was written)
    first, last = np.mean(returns_per_update[:3]), np.mean(returns_per_update[-3:])
    assert first < 0.1 and last > 0.4 and last > first + 0.3, returns_per_update
