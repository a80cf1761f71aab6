"""Levers that help PPO find the adaptive strategy on the hidden-exit benchmark, and what keeps them honest.

The task-inference auxiliary loss: the true exit is a training target of a head, never a policy input.

- the rollout records the episode's true exit per step (`Batch.task`), while the observations the policy
  acts on stay bit-identical in two worlds that differ only in the true exit until the first exit report;
- a policy without a task head is the same module as before (same parameters); a bad head size is refused;
  `aux_task_coef > 0` without a head or without a hidden task is refused with a clear error;
- the loss is a masked cross-entropy (golden numbers); with `aux_task_coef = 0` the update is exactly the old
  one, with it > 0 the head and the core (attention included) get gradient;
- the entropy schedule is linear from `ent_coef` to `ent_coef_end`;
- trial-level exploration: a per-trial steering bias is trained as it acted; exploring starts force a prefix
  of a trial and keep it out of the loss.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch

from ttlab.drive.adapt_eval import exit_flag
from ttlab.drive.config import PolicyConfig, PPOConfig
from ttlab.drive.policy import build_policy
from ttlab.drive.policy.task_head import TaskHead
from ttlab.drive.ppo import annealed, ppo_update, task_loss
from ttlab.drive.presets import hidden_exit
from ttlab.drive.rollout import Rollout
from ttlab.drive.scenarios.pool import load_pool
from ttlab.drive.scripted import ExitDriver, pool_exit_routes
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.state import SimState

SPEC = "procedural:n=8,seed=3,families=t_maze,agents=1,exits=2"


@functools.cache
def _env(num_envs: int = 8, **kw) -> DriveEnv:
    """One env per config for the whole file (building the road grid is the slow part); users reset it."""
    cfg = dataclasses.replace(hidden_exit(intent=False).env, num_envs=num_envs, **kw)
    return DriveEnv(cfg, load_pool(SPEC), seed=1)


def _policy(env, core: str = "transformer", classes: int = 2, seed: int = 0):
    torch.manual_seed(seed)
    pcfg = PolicyConfig(core=core, embed=16, hidden=32, n_layers=1, n_heads=2, task_classes=classes)
    return build_policy(pcfg, env.layout, env.num_actions, horizon=env.cfg.k_trials * env.cfg.trial_length)


def _flip(env: DriveEnv) -> None:
    """The same draws, except every ego's true exit is the other one (as tests/drive/test_hidden_exit.py)."""
    env.true_goal = (env.true_goal + 1) % 2
    env.start = env._start_state()
    env.state = SimState(**{k: v.clone() for k, v in vars(env.start).items()})


class _Scripted:
    """The scripted exit driver (always exit 0) as a rollout policy: its logits put all mass on the driver's action."""

    continuous, memoryless, context_len = False, True, 0

    def __init__(self, env):
        self.env, self.num_actions = env, env.num_actions
        self.driver = ExitDriver(env, pool_exit_routes(SPEC))

    def initial_state(self, n, device="cpu"):
        return None

    def forward_eval(self, obs, state, terminals, removed, active=None):
        a = self.driver.act(torch.zeros(self.env.num_envs, 1, dtype=torch.long)).reshape(-1)  # (N,)
        logits = torch.full((a.shape[0], self.num_actions), -1e9).scatter(1, a[:, None], 0.0)
        return logits, torch.zeros(a.shape[0]), None


def test_the_label_is_recorded_for_training_but_the_policy_inputs_do_not_carry_it():
    T = 60  # the first trial (55 ticks) and the start of the second
    batches = []
    for flip in (False, True):
        env = _env()
        ro = Rollout(env, _Scripted(env), T, 0.99, 0.95, generator=torch.Generator().manual_seed(7))
        if flip:  # after the rollout's reset: the same scenes and starts, the other true exit
            _flip(env)
        batches.append((ro.collect(), env))
    (a, env_a), (b, _) = batches
    # the label is the world's true exit: it differs between the worlds at every step of the first episode
    assert a.task is not None and torch.equal(a.task[:, :T - 5], 1 - b.task[:, :T - 5])
    # the policy's inputs are identical up to the first exit report and differ from it on
    flag = exit_flag(env_a, a.obs.unsqueeze(2)).squeeze(2)  # (N, T): the exit flag the policy sees
    assert (flag != 0).any(1).all(), "every ego reached an exit in trial 0"
    first = (flag != 0).float().argmax(1)  # (N,)
    for n in range(a.obs.shape[0]):
        f = int(first[n])
        assert torch.equal(a.obs[n, :f], b.obs[n, :f]), "inputs before the report carry no label"
        assert torch.equal(a.removed[n, :f], b.removed[n, :f]) and torch.equal(a.terminals[n, :f], b.terminals[n, :f])
        assert not torch.equal(a.obs[n, f], b.obs[n, f]), "the report is where the worlds part"


def test_no_head_means_the_old_module_and_bad_sizes_are_refused():
    env = _env(trial_length=20, report_steps=2)
    plain, with_head = _policy(env, classes=0), _policy(env, classes=2)
    assert set(plain.state_dict()) == {k for k in with_head.state_dict() if not k.startswith("task_head.")}
    for k, v in plain.state_dict().items():  # the head is built last: the other weights are drawn the same
        assert torch.equal(v, with_head.state_dict()[k]), k
    with pytest.raises(ValueError, match="task_classes=1"):
        TaskHead(8, 1)
    mlp = _policy(env, core="mlp", classes=2)
    assert mlp.task_head.classes == 2


def test_task_loss_golden_numbers_ignore_masked_steps():
    logits = torch.tensor([[[2.0, 0.0], [0.0, 0.0], [9.0, -9.0]]])  # (1, 3, 2)
    task = torch.tensor([[0, 1, 1]])
    mask = torch.tensor([[True, True, False]])
    loss, acc = task_loss(logits, task, mask)
    want = (math.log(1 + math.exp(-2.0)) + math.log(2.0)) / 2
    assert float(loss) == pytest.approx(want, rel=1e-6)
    assert float(acc) == pytest.approx(0.5)  # step 1 is a tie (argmax 0, wrong); the masked step is not counted


@functools.cache
def _shared_batch():
    """Two rollouts of the seed-0 policy without a head; the second (returned) has a context prefix. Callers copy
    it (dataclasses.replace) before changing a field."""
    env = _env(trial_length=20, report_steps=2)
    ro = Rollout(env, _policy(env, classes=0).eval(), 16, 0.99, 0.95, generator=torch.Generator().manual_seed(3))
    ro.collect()
    return ro.collect()


def test_aux_off_is_the_old_update_and_aux_on_trains_head_and_attention():
    env = _env(trial_length=20, report_steps=2)
    base = _policy(env, classes=0)  # the weights that collected the batch
    batch = _shared_batch()
    runs = {}
    for name, classes, coef in (("plain", 0, 0.0), ("head_off", 2, 0.0), ("head_on", 2, 1.0)):
        pol = _policy(env, classes=classes)
        pol.load_state_dict(base.state_dict(), strict=False)
        opt = torch.optim.Adam(pol.parameters(), lr=1e-3)
        before = {k: v.clone() for k, v in pol.state_dict().items()}
        torch.manual_seed(0)
        m = ppo_update(pol.train(), opt, batch, PPOConfig(update_epochs=1, num_minibatches=2, aux_task_coef=coef),
                       generator=torch.Generator().manual_seed(0))
        runs[name] = (pol, before, m)
    p0, p1 = runs["plain"][0].state_dict(), runs["head_off"][0].state_dict()
    for k, v in p0.items():
        assert torch.equal(v, p1[k]), f"aux off changed {k}"
    pol, before, m = runs["head_on"]
    assert "losses/task_loss" in m and 0.0 <= float(m["losses/task_accuracy"]) <= 1.0
    after = pol.state_dict()
    assert not torch.equal(after["task_head.linear.weight"], before["task_head.linear.weight"])
    qkv = [k for k in after if k.startswith("blocks.0.") and "weight" in k]
    assert any(not torch.equal(after[k], p0[k]) for k in qkv), "the aux loss reaches the core"


def test_aux_without_a_head_or_a_hidden_task_is_refused():
    env = _env(trial_length=20, report_steps=2)
    pol = _policy(env, classes=0)
    batch = dataclasses.replace(_shared_batch())
    opt = torch.optim.Adam(pol.parameters())
    with pytest.raises(ValueError, match="task head"):
        ppo_update(pol.train(), opt, batch, PPOConfig(aux_task_coef=1.0))
    pol2 = _policy(env, classes=2)
    batch.task = None
    with pytest.raises(ValueError, match="hidden task"):
        ppo_update(pol2.train(), torch.optim.Adam(pol2.parameters()), batch, PPOConfig(aux_task_coef=1.0))


def test_entropy_schedule_is_linear_and_constant_without_an_end():
    assert annealed(0.05, 0.0, 0.0) == 0.05 and annealed(0.05, 0.0, 1.0) == 0.0
    assert annealed(0.05, 0.01, 0.5) == pytest.approx(0.03) and annealed(0.05, 0.0, 2.0) == 0.0
    assert annealed(0.02, None, 0.7) == 0.02


def test_trial_steering_bias_is_drawn_per_trial_and_trained_as_it_acted():
    """explore_steer: one bias per (agent, trial) in {-s, 0, +s}; the first PPO minibatch reproduces the rollout's
    log-probs exactly (approx_kl 0), which it would not without adding the bias back."""
    env = _env(trial_length=20, report_steps=2)
    pol = _policy(env).eval()
    ro = Rollout(env, pol, 45, 0.99, 0.95, generator=torch.Generator().manual_seed(5), explore_steer=2.0)
    b = ro.collect()
    assert b.steer_template.shape == (env.num_actions,) and float(b.steer_template.abs().max()) == 1.0
    assert set(b.steer_bias.unique().tolist()) <= {-2.0, 0.0, 2.0} and b.steer_bias.unique().numel() == 3
    trial = (torch.arange(45) // 20).expand_as(b.steer_bias)  # trial index of every step (all envs in lockstep)
    for k in range(3):  # constant within a trial, redrawn at the next one (for some agent)
        part = b.steer_bias[trial == k].view(b.steer_bias.shape[0], -1)
        assert (part == part[:, :1]).all()
    assert not torch.equal(b.steer_bias[:, 0], b.steer_bias[:, 20])
    cfg = PPOConfig(update_epochs=1, num_minibatches=1, explore_steer=2.0)
    m = ppo_update(pol.train(), torch.optim.SGD(pol.parameters(), lr=0.0), b, cfg)
    assert float(m["losses/approx_kl"]) < 1e-6
    b.steer_bias = None  # without the bias the trained distribution is not the one that acted
    m = ppo_update(pol.train(), torch.optim.SGD(pol.parameters(), lr=0.0), b, cfg)
    assert float(m["losses/approx_kl"]) > 1e-3


def test_exploring_starts_force_the_first_ticks_of_a_trial_and_keep_them_out_of_the_loss():
    env = _env(trial_length=20, report_steps=2)
    pol = _policy(env).eval()
    ro = Rollout(env, pol, 40, 0.99, 0.95, generator=torch.Generator().manual_seed(2), explore_start=6,
                 explore_start_prob=0.5)
    b = ro.collect()
    lon, lat = env.tables
    left, right = (int(a) for a in ro.start_actions.flip(0))
    assert lat[left] == lat.max() and lat[right] == lat.min() and lon[left] == 0 and lon[right] == 0
    step = torch.arange(40) % 20  # trial step of every column (all envs in lockstep: 2 trials of 20)
    forced = ~b.mask & (step < 6)  # (N, T): the only masked steps here are forced ones (no ego reaches an exit)
    assert not (~b.mask & (step >= 6)).any()
    assert forced.any() and (~forced).any(), "some trials start forced, some do not"
    for n in range(b.mask.shape[0]):
        for k in range(2):
            cols = forced[n, 20 * k:20 * k + 20]
            L = int(cols.sum())
            assert cols[:L].all() and not cols[L:].any(), "a prefix of the trial"
            acts = b.actions[n, 20 * k:20 * k + L]
            assert L == 0 or (acts == acts[0]).all() and int(acts[0]) in (left, right)
