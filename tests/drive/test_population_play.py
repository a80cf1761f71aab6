"""Population play: the learner's metrics count its own agents only, co-players are
reported apart (`coplayer/...`), and each co-player policy steps only the rows it drives."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from ttlab.common.checkpoint import load_checkpoint
from ttlab.drive.cli import main as drive_main
from ttlab.drive.config import EnvConfig
from ttlab.drive.partners import PartnerPopulation, ScriptedPartner, build_population, draw_partner
from ttlab.drive.policy import TransformerPolicy
from ttlab.drive.policy.dist import sample
from ttlab.drive.presets import partner_adapt, partner_adapt_debug
from ttlab.drive.rollout import CoPlayers, Rollout
from ttlab.drive.scenarios.pool import load_pool
from ttlab.drive.sim import rng
from ttlab.drive.sim.env import DriveEnv
from ttlab.drive.sim.toy import pad_pool, straight_road
from ttlab.drive.train import train

COAST = 45  # zero accel, zero steer
HARD_LEFT = 3 * 13 + 12  # steers into the road edge 2 m away within a few ticks


class Fixed(nn.Module):
    """A policy that always takes `action` (logits +30 on it): a scripted driver in the policy interface."""

    context_len, continuous, num_actions, memoryless = 0, False, 91, True

    def __init__(self, action: int):
        super().__init__()
        self.action = action

    def initial_state(self, n, device="cpu"):
        return None

    def forward_eval(self, obs, state=None, terminals=None, removed=None, active=None):
        logits = torch.zeros(obs.shape[0], 91)
        logits[:, self.action] = 30.0
        return logits, torch.zeros(obs.shape[0]), None


def _env(E: int, A: int, trial_length: int, k: int = 2, seed: int = 0) -> DriveEnv:
    scenes = [straight_road(A, lanes=1, gap=10.0, goal_ahead=300.0, seed=i) for i in range(E)]
    cfg = EnvConfig(num_envs=E, max_agents=A, goal_behavior="trial", k_trials=k, trial_length=trial_length,
                    collision_behavior="remove", offroad_behavior="remove", partner_slots=8, road_slots=32)
    return DriveEnv(cfg, pad_pool(scenes), seed=seed)


def test_80_bad_coplayers_do_not_enter_the_16_learners_rates():
    """The issue's case: 80 co-player slots drive off the road, 16 learner slots drive safely."""
    E, A = 6, 16
    env = _env(E, A, trial_length=20)
    assign = torch.full((E, A), -1, dtype=torch.long)
    assign[1:] = 0  # envs 1..5: 80 co-player agents; env 0: the learner's 16
    co = CoPlayers([Fixed(HARD_LEFT)], assign.reshape(-1))
    Rollout(env, Fixed(COAST), steps=40, gamma=0.99, gae_lambda=0.95, coplayers=co).collect()
    m = {k: float(v) for k, v in env.metrics().items()}
    for k in range(2):
        assert m[f"trial_{k}_collision_rate"] + m[f"trial_{k}_offroad_rate"] == 0.0  # the learner's own rate
        assert m[f"coplayer/trial_{k}_offroad_rate"] == 1.0  # every co-player left the road ...
        assert m[f"coplayer/trial_{k}_score"] == 0.0
    assert m["episodes"] == 16  # env 0's one episode of 2 trials x 20 ticks, its 16 egos
    assert m["coplayer/episodes"] >= 80 and m["coplayer/episodes"] % 80 == 0  # their envs end trials early
    assert m["collision_rate"] + m["offroad_rate"] == 0.0 and m["coplayer/offroad_rate"] == 1.0
    # counting every ego, as before the fix, the same play reads mostly the co-players' rate (0.833 in the issue)
    env2 = _env(E, A, trial_length=20)
    co2 = CoPlayers([Fixed(HARD_LEFT)], assign.reshape(-1))
    rollout = Rollout(env2, Fixed(COAST), steps=40, gamma=0.99, gae_lambda=0.95, coplayers=co2)
    env2.set_learner(None)
    rollout.collect()
    assert float(env2.metrics()["trial_0_offroad_rate"]) > 0.8


def test_without_coplayers_every_ego_is_the_learners():
    env = _env(2, 4, trial_length=5)
    Rollout(env, Fixed(COAST), steps=10, gamma=0.99, gae_lambda=0.95).collect()
    m = env.metrics()
    assert env.learner is None and not any(k.startswith("coplayer/") for k in m)
    assert float(m["episodes"]) == 8
    with pytest.raises(ValueError, match=r"expected \(E, A\) = \(2, 4\)"):
        env.set_learner(torch.ones(3, 4, dtype=torch.bool))


class Recording(TransformerPolicy):
    """Records the number of rows each forward_eval call receives, and the largest cache position."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.rows_seen: list[int] = []
        self.max_pos = 0

    def forward_eval(self, obs, state, terminals, removed, active=None):
        self.rows_seen.append(obs.shape[0])
        out = super().forward_eval(obs, state, terminals, removed, active)
        self.max_pos = max(self.max_pos, int(state.pos.max()))
        return out


class Checked(CoPlayers):
    """Co-players that also step a full-batch copy of each policy (the old way: every row) and compare."""

    def __init__(self, policies, assign, refs):
        super().__init__(policies, assign)
        self.refs = refs
        self.ref_states = [p.initial_state(assign.shape[0]) for p in refs]
        self.calls = self.compared = 0

    def act(self, obs, terminals, removed, actions, active=None, generator=None):
        seed = 1000 + self.calls
        self.calls += 1
        out = super().act(obs, terminals, removed, actions, active, torch.Generator().manual_seed(seed))
        g = torch.Generator().manual_seed(seed)  # same noise, drawn in the same order and shapes
        for i, (ref, r) in enumerate(zip(self.refs, self.rows, strict=True)):
            logits, _, self.ref_states[i] = ref.forward_eval(obs, self.ref_states[i], terminals, removed)  # (N, P)
            want = sample(logits[r], False, g)  # (n_i,)
            use = active[r]  # the agents whose actions the env uses
            assert torch.equal(out[r][use], want[use])
            self.compared += int(use.sum())
        return out


def test_each_coplayer_steps_only_its_rows_and_acts_as_a_full_batch_forward_would():
    """KV cache included, across trial resets and an episode reset."""
    torch.manual_seed(0)
    E, A, L, K = 4, 3, 6, 2
    env = _env(E, A, trial_length=L, k=K)
    assign = torch.tensor([-1, -1, -1, 0, 0, 0, 1, 1, 1, 0, 1, -1])  # env 3 mixes both policies and the learner
    kw = dict(layout=env.layout, num_actions=91, embed=16, d_model=32, n_layers=2, n_heads=2, horizon=K * L)
    pols = [Recording(**kw) for _ in range(2)]
    refs = [TransformerPolicy(**kw) for _ in range(2)]
    for p, r in zip(pols, refs, strict=True):
        r.load_state_dict(p.state_dict())
    co = Checked(pols, assign, refs)
    learner = TransformerPolicy(**kw)
    rollout = Rollout(env, learner, steps=2 * K * L + 3, gamma=0.99, gae_lambda=0.95, coplayers=co)
    rollout.collect()
    assert co.calls == 2 * K * L + 3 and co.compared > 0
    assert pols[0].rows_seen and set(pols[0].rows_seen) == {4}  # its 4 rows, never the 12
    assert set(pols[1].rows_seen) == {4}
    assert co.states[0].k.shape[1] == 4 and co.states[1].k.shape[1] == 4  # a cache row per agent it drives
    assert pols[0].max_pos > L  # the cache ran on across a trial reset (positions past the first trial)


# ---- population play as the seed runs it: one partner per episode, drawn with weights, kept across trials ----

def _crossing_env(E: int, seed: int = 0):
    cfg = partner_adapt().env
    cfg.num_envs = E
    return DriveEnv(cfg, load_pool("crossing:n=8,seed=0"), seed=seed)


def test_the_partner_is_drawn_per_episode_with_its_weights_as_a_pure_function():
    env = _crossing_env(64)
    w = torch.tensor([0.25, 0.75])
    draws = []
    for ep in range(16):
        env.episode = torch.full((64,), ep, dtype=torch.long)
        draws.append(draw_partner(env, w))
    d = torch.stack(draws)  # (episodes, E)
    assert abs(float((d == 1).float().mean()) - 0.75) < 0.05  # 1024 draws
    assert (d != d[0:1]).any(0).float().mean() > 0.9, "an env meets different partners in different episodes"
    env2 = _crossing_env(64)
    env2.episode = env.episode.clone()
    assert torch.equal(draw_partner(env2, w), d[-1]), "the same (seed, env, episode) draws the same partner"
    assert (draw_partner(env, torch.tensor([1.0, 0.0])) == 0).all()


def test_population_training_counts_the_learner_only_and_labels_each_step_with_its_partner():
    E = 6
    env = _crossing_env(E)
    pop = build_population(["never_yield", "yield"], [0.5, 0.5], env)
    kw = dict(layout=env.layout, num_actions=91, embed=16, d_model=32, n_layers=1, n_heads=2, horizon=100)
    ro = Rollout(env, TransformerPolicy(**kw), steps=120, gamma=0.99, gae_lambda=0.95, coplayers=pop)
    batch = ro.collect()
    assert torch.equal(env.learner, torch.tensor([[True, False]] * E)), "slot 0 learns, slot 1 is the partner"
    assert not batch.mask.view(E, 2, -1)[:, 1].any(), "the partner's steps are out of the loss"
    C = ro.C
    ep = batch.terminals[:, C:].long().cumsum(1) - 1  # (N, T) episode index of each step (first rollout)
    env_id = torch.arange(E).repeat_interleave(2).unsqueeze(1).expand_as(ep)
    u = rng.uniform(env_id, ep, env.seed, 17)
    want = (u >= 0.5).long()  # weights (0.5, 0.5): the cumulative split at 0.5
    assert (ep.max(1).values >= 1).any(), "some row crossed into a second episode"
    assert torch.equal(batch.task, want), "the aux label is the partner of each step's episode"
    m = env.metrics()
    assert "coplayer/trial_0_score" in m and float(m["episodes"]) >= 1


class _Spy(nn.Module):
    """Wraps a policy; asserts it is asked to compute only the partner rows it drives this episode."""

    def __init__(self, inner, pop_ref, idx):
        super().__init__()
        self.inner, self.pop_ref, self.idx = inner, pop_ref, idx
        self.continuous, self.computed = False, 0

    def initial_state(self, n, device="cpu"):
        return self.inner.initial_state(n, device)

    def forward_eval(self, obs, state, terminals, removed, active=None):
        pop = self.pop_ref[0]
        assert obs.shape[0] == pop.rows.numel(), "one memory row per partner slot"
        assert active is not None and ((pop.task()[pop.rows] == self.idx) | ~active).all()
        self.computed += int(active.sum())
        return self.inner.forward_eval(obs, state, terminals, removed, active)


def test_a_checkpoint_partner_steps_only_the_rows_it_drives(tmp_path):
    E = 8
    env = _crossing_env(E)
    kw = dict(layout=env.layout, num_actions=91, embed=16, d_model=32, n_layers=1, n_heads=2, horizon=100)
    ref: list = []
    spy = _Spy(TransformerPolicy(**kw), ref, 1)
    pop = PartnerPopulation(env, [ScriptedPartner("yield"), spy], ["yield", "ckpt"], [0.5, 0.5])
    ref.append(pop)
    Rollout(env, TransformerPolicy(**kw), steps=150, gamma=0.99, gae_lambda=0.95, coplayers=pop).collect()
    assert spy.computed > 0


def test_train_against_a_population_with_a_checkpoint_and_eval_per_partner(tmp_path):


    root = str(tmp_path)
    assert drive_main(["train", "--preset", "partner_adapt_debug", "--root", root, "--run-name", "p0"]) == 0
    stem = tmp_path / "drive" / "p0" / "checkpoints" / "latest"
    frozen = load_checkpoint(stem)["policy"]
    assert drive_main(["train", "--preset", "partner_adapt_debug", "--root", root, "--run-name", "p1",
                       "--partners", "yield", str(stem), "--partner-weights", "0.5", "0.5"]) == 0
    assert all(torch.equal(frozen[k], load_checkpoint(stem)["policy"][k]) for k in frozen), "the partner stays frozen"
    learner = tmp_path / "drive" / "p1" / "checkpoints" / "latest"
    out = tmp_path / "e.json"
    assert drive_main(["eval", "--checkpoint", str(learner), "--mode", "trial", "--num-envs", "6", "--episodes", "2",
                       "--out", str(out)]) == 0  # the checkpoint's own population by default
    m = json.loads(out.read_text())
    assert m["partners"] == ["yield", str(stem)] and m["scenarios"].endswith("seed=1000")
    pp = m["per_partner"]
    assert set(pp) == {"yield", str(stem)} and sum(p["episodes"] for p in pp.values()) == 12
    for k in ("trial_0_score", "trial_1_score"):  # the per-partner means add up to the overall one
        n = {name: p["ego_trials"] / 2 for name, p in pp.items()}
        total = sum(pp[name][k] * n[name] for name in pp if n[name]) / sum(n.values())
        assert abs(total - m[k]) < 1e-6
    assert "ada_delta_trial_1_minus_0" in pp["yield"] and "trial_1_time_to_goal" in pp["yield"]
    assert drive_main(["eval", "--checkpoint", str(learner), "--mode", "trial", "--num-envs", "4", "--episodes", "1",
                       "--partners", "never_yield_late", "--out", str(out)]) == 0  # a held-out partner
    assert list(json.loads(out.read_text())["per_partner"]) == ["never_yield_late"]


def test_partners_and_coplayers_are_exclusive(tmp_path):
    cfg = partner_adapt_debug()
    cfg.root, cfg.coplayers = str(tmp_path), ("x",)
    with pytest.raises(ValueError, match="exclusive"):
        train(cfg)
