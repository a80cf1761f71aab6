"""Partner controls: each observed partner shows its last applied command, on both backends."""

import pytest
import torch

from ttlab.drive.config import EnvConfig
from ttlab.drive.scenarios.pool import build_pool
from ttlab.drive.scenarios.procedural import generate_pool_scenarios
from ttlab.drive.sim import native
from ttlab.drive.sim.env import DriveEnv

BACKENDS = ["torch"] + (["native"] if native.available() else [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_partner_rows_show_the_partners_last_command(backend):
    pool = build_pool(generate_pool_scenarios(2, seed=5, num_agents=4), max_agents=4)
    cfg = EnvConfig(num_envs=2, max_agents=4, partner_slots=3, partner_controls=True, partner_radius=500.0,
                    backend=backend)
    env = DriveEnv(cfg, pool, seed=0)
    base = DriveEnv(EnvConfig(num_envs=2, max_agents=4, partner_slots=3, partner_radius=500.0, backend=backend),
                    pool, seed=0)
    assert env.layout.partner_dim == 9 and base.layout.partner_dim == 7
    assert env.obs_dim == base.obs_dim + 2 * 3
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        a = torch.randint(0, env.num_actions, (2, 4), generator=g)
        obs = env.step(a).obs.clone()
        obs0 = base.step(a).obs
        ego, par, road = env.layout.split(obs)  # par (E, A, 3, 9)
        ego0, par0, road0 = base.layout.split(obs0)
        torch.testing.assert_close(par[..., :7], par0)  # the first 7 features are unchanged
        torch.testing.assert_close(road, road0)
        st, lim = env.state, env.cfg.limits
        assert st.accel.abs().max() > 0  # random commands: the columns carry something
        for i in range(4):  # every other agent fits, in slot order: other j sits in slot j (j - 1 past the ego)
            for j in range(4):
                if j == i:
                    continue
                slot = j if j < i else j - 1
                seen = par0[:, i, slot].abs().sum(-1) > 0  # (E,) this partner is visible to ego i
                want = torch.stack([st.accel[:, j] / lim.max_accel, st.steer[:, j] / lim.max_steer], -1)
                torch.testing.assert_close(par[seen, i, slot, 7:], want[seen], rtol=0, atol=1e-6)
                assert (par[~seen, i, slot, 7:] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_priority_token_is_shown_to_self_and_partners_and_redrawn_per_episode(backend):
    pool = build_pool(generate_pool_scenarios(2, seed=5, num_agents=4), max_agents=4)
    cfg = EnvConfig(num_envs=2, max_agents=4, partner_slots=3, priority=True, partner_radius=500.0,
                    episode_length=5, backend=backend)
    env = DriveEnv(cfg, pool, seed=0)
    L = env.layout
    assert L.partner_dim == 8 and L.ego_dim == 10
    first = env.priority.clone()  # (E, A)
    assert ((first >= 0) & (first < 1)).all() and first.unique().numel() == first.numel()
    obs = env.reset(0)
    for _ in range(4):
        ego, par, _road = L.split(obs)
        torch.testing.assert_close(ego[..., 9], env.priority)  # own token, last ego feature here
        for i in range(4):
            for j in range(4):
                if j != i:
                    seen = par[:, i, j if j < i else j - 1, :7].abs().sum(-1) > 0
                    torch.testing.assert_close(par[seen, i, j if j < i else j - 1, 7], env.priority[seen, j])
        torch.testing.assert_close(env.priority, first)  # fixed within the episode
        obs = env.step(torch.zeros(2, 4, dtype=torch.long)).obs.clone()
    env.step(torch.zeros(2, 4, dtype=torch.long))  # the 5-tick episode ends: new draws
    assert not torch.equal(env.priority, first)
    again = DriveEnv(cfg, pool, seed=0)
    torch.testing.assert_close(again.priority, first)  # a pure function of (seed, env, episode, slot)
