"""Rollout: step the env with the learner (and frozen co-players) into preallocated buffer rows.

Buffer layout. One row per agent slot (N = num_envs x num_agents), time-aligned to the decision:

    obs, terminals, removed, pos : (N, C + T)   C = policy.context_len, T = steps per rollout
    actions, logprobs, values, rewards, stop, mask : (N, T)

`terminals[:, t]` means obs[:, t] starts a new episode (the env returned `terminals` with it);
`removed[:, t]` means the agent is in limbo at that step; `pos` is the position within the episode.

How training sees exactly the context the rollout saw (an episode may cross a row boundary):

- transformer: the first C = horizon - 1 columns of a row are the last C steps of the previous
  rollout (context only; no loss there). At the start of each rollout the KV cache is rebuilt from that
  prefix with the *current* weights (`policy.forward(prefix, return_state=True)`), and the rollout steps
  on from it. Training runs `policy.forward` over prefix + segment, so every loss step attends over
  the same tokens, through the same weights, as when it was acted on: the first PPO epoch reproduces
  the rollout's log-probs exactly (tested), and no episode is ever cut at a row boundary;
- transformer with `stored_context` (PPO `context = stored`): no rebuild; the rollout steps on with its KV
  cache as it is, and records every step's keys/values, so training takes the prefix's keys/values as the
  rollout computed them (with the weights of the rollout that stepped them: one update stale, as R2D2's
  stored state) and again attends exactly what the rollout attended; the prefill's cost is saved;
- LSTM: the recurrent state at the start of the row is stored per row and training starts from it;
- MLP: nothing to carry.

On CPU the prefill and the PPO update pass `needed` to `policy.forward`, so tokens that no loss (or no
cache slot) can read, such as earlier episodes in the prefix and limbo steps, are not computed; and each
rollout step passes `active` (the learner's agents in play) to `forward_eval`, so padding slots, limbo and
co-players' agents are not computed either (their logits and values are never read: masked out of the loss,
and GAE stops before a removed step).

Co-players (population play) are agents the env controls by policy but the learner does not: frozen
policies loaded from checkpoints, each stepped in one batched forward over its own agents only (its KV cache
has a row per agent it drives; on CPU only its agents in play are computed); their steps are masked out of
the learner's loss (`mask` = learner-controlled and not removed), and the env counts them apart from the
learner's in its metrics (`coplayer/<name>`; `DriveEnv.set_learner`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ttlab.drive.advantage import gae
from ttlab.drive.policy.dist import log_prob, sample


@dataclass
class Batch:
    """What one PPO update consumes (see the module docstring for shapes)."""

    obs: torch.Tensor
    terminals: torch.Tensor
    removed: torch.Tensor
    pos0: torch.Tensor
    state0: tuple[torch.Tensor, ...] | None
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    mask: torch.Tensor
    memory: tuple[torch.Tensor, torch.Tensor] | None = None
    """Transformer: keys and values (k, v) each (L, N, H, C, dh) of the context prefix, from the prefill with
    the weights the rollout acted with (`TransformerPolicy.prefill`); None for the other cores."""
    in_play: torch.Tensor | None = None
    """0-d long: learner steps with the agent in play (mask.sum()), the steps `charts/SPS` counts."""
    steer_bias: torch.Tensor | None = None
    """(N, T) float: the per-trial steering bias the rollout added to the logits it sampled from (exploration at
    the level of a trial's route, `PPOConfig.explore_steer`); training adds the same `steer_bias * steer_template`
    so the ratio is taken against the distribution that acted. None when off."""
    steer_template: torch.Tensor | None = None
    """(P,) float: each discrete action's steering command / the largest one, in [-1, 1]."""
    task: torch.Tensor | None = None
    """(N, T) long: the hidden task of each step's episode (the env's `true_goal`, the true exit; or, in population
    play, the episode's partner index), a *training target* of the task-inference head only
    (`PPOConfig.aux_task_coef`); never a policy input. None when the env has no hidden task."""


class CoPlayers:
    """Frozen co-player policies; `assign` (N,) long: index of the co-player driving each agent, -1 = learner.

    Each policy owns the rows assigned to it (`rows[i]`, fixed at construction) and steps only those: its state
    (LSTM memory, transformer KV cache) has one row per agent it drives, so k policies cost what their agents
    cost, not k full-batch forwards."""

    def __init__(self, policies: list[torch.nn.Module], assign: torch.Tensor):
        if policies and int(assign.max()) >= len(policies):
            raise ValueError(f"co-player assignment uses index {int(assign.max())} but {len(policies)} policies were loaded")
        self.policies = [p.eval().requires_grad_(False) for p in policies]
        self.assign = assign
        self.rows = [(assign == i).nonzero().squeeze(1) for i in range(len(policies))]  # (n_i,) each
        self.states = [p.initial_state(int(r.numel()), assign.device)
                       for p, r in zip(self.policies, self.rows, strict=True)]

    @property
    def learner(self) -> torch.Tensor:
        return self.assign < 0  # (N,)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, terminals: torch.Tensor, removed: torch.Tensor, actions: torch.Tensor,
            active: torch.Tensor | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """Replace the actions of co-player agents with their policy's sample: policy i runs on its rows only.

        obs (N, D), terminals/removed (N,), actions (N, ...); `active` (N,) bool (CPU): the agents whose
        actions the env uses (controlled, in play); a policy computes only those of its rows."""
        actions = actions.clone()
        for i, (p, r) in enumerate(zip(self.policies, self.rows, strict=True)):
            if r.numel() == 0:
                continue
            act_r = None if active is None else active[r]  # (n_i,)
            logits, _, self.states[i] = p.forward_eval(obs[r], self.states[i], terminals[r], removed[r], active=act_r)
            actions[r] = sample(logits, p.continuous, generator).to(actions.dtype)  # (n_i, ...)
        return actions


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, *x.shape[2:])  # (E, A, ...) -> (E*A, ...)


class Rollout:
    def __init__(self, env, policy, steps: int, gamma: float, gae_lambda: float, coplayers: CoPlayers | None = None,
                 generator: torch.Generator | None = None, stored_context: bool = False, explore_steer: float = 0.0,
                 explore_start: int = 0, explore_start_prob: float = 0.5):
        self.env, self.policy, self.T = env, policy, steps
        self.gamma, self.lam = gamma, gae_lambda
        self.coplayers, self.gen = coplayers, generator
        self.E, self.A = env.num_envs, env.num_agents
        N, C, T, D = self.E * self.A, policy.context_len, steps, env.obs_dim
        self.N, self.C = N, C
        dev = self.device = torch.device(env.device) if hasattr(env, "device") else torch.device("cpu")
        self.obs = torch.zeros(N, C + T, D, device=dev)
        self.terminals = torch.ones(N, C + T, dtype=torch.bool, device=dev)  # padding prefix: isolated tokens
        self.removed = torch.ones(N, C + T, dtype=torch.bool, device=dev)
        self.pos = torch.zeros(N, C + T, dtype=torch.long, device=dev)
        act_shape = (N, T, policy.num_actions) if policy.continuous else (N, T)
        self.actions = torch.zeros(act_shape, dtype=torch.float32 if policy.continuous else torch.long, device=dev)
        self.logprobs = torch.zeros(N, T, device=dev)
        self.values = torch.zeros(N, T, device=dev)
        self.rewards = torch.zeros(N, T, device=dev)
        self.stop = torch.zeros(N, T, dtype=torch.bool, device=dev)
        self.mask = torch.zeros(N, T, dtype=torch.bool, device=dev)
        self.explore = float(explore_steer)
        self.steer_bias = self.template = None
        if self.explore > 0:  # per-trial steering bias: one of {-s, 0, +s} per agent and trial
            if policy.continuous or not hasattr(env, "tables"):
                raise ValueError("explore_steer needs the driving env's discrete actions (action='discrete')")
            lat = env.tables[1].float().to(dev)  # (P,) steering command of each action
            self.template = lat / lat.abs().max()  # (P,) in [-1, 1]
            self.steer_bias = torch.zeros(N, T, device=dev)
            self.cur_bias = self._draw_bias(N)
        self.start_max, self.start_prob = int(explore_start), float(explore_start_prob)
        if self.start_max > 0:  # exploring starts: forced first ticks of a trial (see PPOConfig.explore_start)
            if policy.continuous or not hasattr(env, "tables") or not hasattr(env, "trial_step"):
                raise ValueError("explore_start needs the driving env in trial mode with discrete actions")
            lon, lat = env.tables  # (P,), (P,)
            neutral = lon.abs() == lon.abs().min()
            left = int(torch.nonzero(neutral & (lat == lat.max()))[0])  # full steering rate, no jerk
            right = int(torch.nonzero(neutral & (lat == lat.min()))[0])
            self.start_actions = torch.tensor([right, left], device=dev)
            self.start_len, self.start_dir = self._draw_start(N)
        self.task_fn = None  # the hidden task of each row: the env's true exit, or the episode's partner (population)
        if getattr(env, "true_goal", None) is not None:
            self.task_fn = lambda: _flat(self.env.true_goal)
        elif hasattr(coplayers, "task"):
            self.task_fn = coplayers.task
        self.task = torch.zeros(N, T, dtype=torch.long, device=dev) if self.task_fn is not None else None
        self.next_obs = _flat(env.reset()).float()  # (N, D)
        self.next_term = torch.ones(N, dtype=torch.bool, device=dev)  # the first observation starts an episode
        self.next_removed = torch.zeros(N, dtype=torch.bool, device=dev)
        self.next_pos = torch.zeros(N, dtype=torch.long, device=dev)
        self.controlled = _flat(env.controlled).bool()
        if coplayers is not None and hasattr(env, "set_learner"):  # learner metrics count the learner's agents only
            env.set_learner(coplayers.learner.view(self.E, self.A))
        self.state = policy.initial_state(N, dev)
        self.stored = stored_context and C > 0
        if self.stored:  # keys/values of every buffer column as the rollout computed them: (2, L, N, H, C+T, dh)
            L, _, H, _, dh = self.state.k.shape
            self.kv = torch.zeros(2, L, N, H, C + T, dh, device=dev, dtype=self.state.k.dtype)
        self._collected = False
        self.agent_steps = 0  # slot-steps: every agent slot of every env per step
        self.in_play_steps = torch.zeros((), dtype=torch.long, device=dev)  # learner steps in play (sum of mask)

    def _draw_bias(self, n: int) -> torch.Tensor:
        """(n,) float: explore_steer x one of {-1, 0, +1}, uniform (a third of the trials are unbiased)."""
        k = torch.randint(0, 3, (n,), generator=self.gen, device=self.gen.device if self.gen is not None else "cpu")
        return self.explore * (k.to(self.device) - 1).float()

    def _draw_start(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) forced ticks (0 = none) and (n,) side (0 right, 1 left) of the next trial's exploring start."""
        dev = self.gen.device if self.gen is not None else "cpu"
        on = torch.rand(n, generator=self.gen, device=dev) < self.start_prob
        length = torch.randint(1, self.start_max + 1, (n,), generator=self.gen, device=dev) * on
        side = torch.randint(0, 2, (n,), generator=self.gen, device=dev)
        return length.to(self.device), side.to(self.device)

    def _per_env(self, flag: torch.Tensor) -> torch.Tensor:
        """An env-level flag (E,) or an event seen by any agent of an env (E, A), broadcast: -> (N,)."""
        flag = flag.bool()
        if flag.dim() == 2:
            flag = flag.any(dim=1)
        return flag.unsqueeze(1).expand(self.E, self.A).reshape(-1)

    def _next_flags(self, res) -> tuple[torch.Tensor, torch.Tensor]:
        """(new_episode, removed) for the observation just returned, both (N,).

        The simulator's `res.removed` says an ego was out of play during the step just taken; the
        policy needs it for the step about to be taken, which is the env state's removed | stopped.
        A new episode starts where the env's episode clock went back to 0 (in trial mode that is
        exactly `terminals`; in the other modes an ego's `terminals` only means it left play)."""
        env = self.env
        new_ep = self._per_env(env.ep_step == 0) if hasattr(env, "ep_step") else self._per_env(res.terminals)
        st = getattr(env, "state", None)
        if st is not None and hasattr(st, "removed"):
            out = st.removed | st.stopped if hasattr(st, "stopped") else st.removed
            removed = _flat(out).bool() & _flat(res.controlled).bool()
        else:
            removed = torch.zeros_like(new_ep)
        return new_ep, removed

    @torch.no_grad()
    def collect(self) -> Batch:
        C, T, policy = self.C, self.T, self.policy
        if self._collected and C > 0:  # slide the last C steps into the prefix
            for buf in (self.obs, self.terminals, self.removed, self.pos):
                buf[:, :C] = buf[:, T:T + C].clone()
            if self.stored:
                self.kv[..., :C, :] = self.kv[..., T:T + C, :].clone()
        self._collected = True
        if self.stored:  # keep stepping on the cache as it is; the prefix's keys/values are the ones it holds
            state, state0 = self.state, None
            memory = (self.kv[0, :, :, :, :C], self.kv[1, :, :, :, :C])
        elif C > 0:  # rebuild the KV cache from the prefix with the current weights
            terms, rem = self.terminals[:, :C], self.removed[:, :C]
            needed = None
            if self.device.type == "cpu":  # the cache keeps the last episode's unremoved tokens: compute only those
                ep = terms.long().cumsum(dim=1)  # (N, C)
                needed = ~rem & (ep == ep[:, -1:])
            if hasattr(policy, "prefill"):
                state, memory = policy.prefill(self.obs[:, :C], terms, rem, pos0=self.pos[:, 0], needed=needed)
            else:
                _, _, state = policy.forward(self.obs[:, :C], terms, rem, pos0=self.pos[:, 0], return_state=True,
                                             needed=needed)
                memory = None
            state0 = None
        else:
            state, memory = self.state, None
            state0 = None if state is None else tuple(s.clone() for s in state)
        learner = self.coplayers.learner if self.coplayers is not None else torch.ones_like(self.controlled)
        skip = self.device.type == "cpu"  # computing only agents in play costs a host sync: CPU only
        for t in range(T):
            obs, term, rem = self.next_obs, self.next_term, self.next_removed
            self.obs[:, C + t] = obs
            self.terminals[:, C + t] = term
            self.removed[:, C + t] = rem
            self.pos[:, C + t] = self.next_pos
            active = self.controlled & learner & ~rem if skip else None  # only the learner's agents in play
            logits, value, state = policy.forward_eval(obs, state, term, rem, active=active)  # (N, P), (N,)
            if self.stored:  # this step's keys/values: the ring slot it was written to
                slot = ((state.pos - 1) % state.k.shape[3]).view(1, -1, 1, 1, 1)  # (1, N, 1, 1, 1)
                idx = slot.expand(*state.k.shape[:3], 1, state.k.shape[4])  # (L, N, H, 1, dh)
                self.kv[0, ..., C + t, :] = state.k.gather(3, idx).squeeze(3)
                self.kv[1, ..., C + t, :] = state.v.gather(3, idx).squeeze(3)
            if self.template is not None:  # this trial's steering bias: the distribution that acts (and is trained)
                logits = logits + self.cur_bias.unsqueeze(1) * self.template  # (N, P)
                self.steer_bias[:, t] = self.cur_bias
            action = sample(logits, policy.continuous, self.gen)
            self.logprobs[:, t] = log_prob(logits, action, policy.continuous).float()
            self.values[:, t] = value.float()
            self.actions[:, t] = action
            self.mask[:, t] = self.controlled & learner & ~rem
            if self.start_max > 0:  # exploring start: the rollout's action, not the policy's (out of the loss)
                forced = _flat(self.env.trial_step.view(-1, 1).expand(self.E, self.A)) < self.start_len  # (N,)
                action = torch.where(forced, self.start_actions[self.start_dir], action)
                self.actions[:, t] = action
                self.mask[:, t] &= ~forced
            if self.task is not None:  # the label of the episode this step belongs to (read before the step)
                self.task[:, t] = self.task_fn()
            env_action = action
            if self.coplayers is not None:
                co_active = self.controlled & ~rem if skip else None
                env_action = self.coplayers.act(obs, term, rem, action, co_active, self.gen)
            res = self.env.step(env_action.reshape(self.E, self.A, *action.shape[1:]))
            self.rewards[:, t] = _flat(res.reward).float()
            term_n, removed_n = self._next_flags(res)
            ended = _flat(res.terminals).bool() | _flat(res.truncations).bool()  # (N,)
            self.stop[:, t] = ended | term_n | removed_n
            self.next_obs = _flat(res.obs).float()
            self.next_term, self.next_removed = term_n, removed_n
            self.next_pos = torch.where(term_n, torch.zeros_like(self.next_pos), self.next_pos + 1)
            self.controlled = _flat(res.controlled).bool()
            if self.start_max > 0:  # a new trial draws a new exploring start
                new_trial = self._per_env(self.env.trial_step == 0)
                length, side = self._draw_start(self.N)
                self.start_len = torch.where(new_trial, length, self.start_len)
                self.start_dir = torch.where(new_trial, side, self.start_dir)
            if self.template is not None:  # a new trial (or episode) draws a new bias
                new_trial = self._per_env(self.env.trial_step == 0) if hasattr(self.env, "trial_step") else term_n
                self.cur_bias = torch.where(new_trial, self._draw_bias(self.N), self.cur_bias)
        self.agent_steps += self.N * T
        in_play = self.mask.sum()
        self.in_play_steps += in_play  # 0-d device tensor: no host sync here
        if C == 0 or self.stored:
            self.state = state
        if self.stored:  # the bootstrap step below must not enter the cache the next rollout steps on
            state = type(state)(k=state.k.clone(), v=state.v.clone(), valid=state.valid.clone(), pos=state.pos.clone())
        active = self.controlled & learner & ~self.next_removed if skip else None
        _, next_value, _ = policy.forward_eval(self.next_obs, state, self.next_term, self.next_removed, active=active)
        adv, ret = gae(self.rewards, self.values, next_value.float(), self.stop, self.gamma, self.lam)
        return Batch(obs=self.obs, terminals=self.terminals, removed=self.removed, pos0=self.pos[:, 0],
                     state0=state0, actions=self.actions, logprobs=self.logprobs, values=self.values,
                     rewards=self.rewards, advantages=adv, returns=ret, mask=self.mask, memory=memory,
                     in_play=in_play, task=self.task, steer_bias=self.steer_bias, steer_template=self.template)
