"""build_pool: padding contract of ScenarioPool, limits and clear errors."""

import dataclasses

import numpy as np
import pytest
import torch

from ttlab.drive.scenarios.pool import build_pool
from ttlab.drive.scenarios.procedural import generate


def test_shapes_and_padding():
    scenes = [generate("straight", 0, 4), generate("intersection", 1, 9), generate("merge", 2, 6)]
    pool = build_pool(scenes, "cpu")
    P, N, S = 3, max(s.num_agents for s in scenes), max(s.num_segments for s in scenes)
    assert pool.size == P and pool.names == [s.name for s in scenes]
    assert pool.pos.shape == (P, N, 91, 2) and pool.heading.shape == (P, N, 91) and pool.vel.shape == (P, N, 91, 2)
    assert pool.seg.shape == (P, S, 4) and pool.seg_type.dtype == torch.long and pool.agent_type.dtype == torch.long
    for i, s in enumerate(scenes):
        n = s.num_agents
        assert pool.exists[i, :n].all() and not pool.exists[i, n:].any()
        assert not pool.valid[i, n:].any() and pool.valid[i, :n].all()
        assert torch.equal(pool.pos[i, :n], torch.from_numpy(s.pos))
        assert int(pool.num_segments[i]) == s.num_segments
        assert (pool.seg_type[i, s.num_segments:] == 0).all() and (pool.seg_type[i, : s.num_segments] > 0).all()
        # routes padded by repeating each route's end point
        r = s.route
        assert torch.equal(pool.route[i, :n, : r.shape[1]], torch.from_numpy(r))
        assert torch.equal(pool.route[i, :n, -1], torch.from_numpy(r[:, -1]))
    assert pool.goal_candidates is None and pool.style_pos is None


def test_limits_and_errors():
    scenes = [generate("straight", 0, 4), generate("intersection", 1, 9)]
    n = scenes[1].num_agents
    pool = build_pool(scenes, "cpu", max_agents=20, max_segments=2000)
    assert pool.pos.shape[1] == 20 and pool.seg.shape[1] == 2000
    with pytest.raises(ValueError, match=rf"'intersection_1' has {n} agents > max_agents=3"):
        build_pool(scenes, "cpu", max_agents=3)
    with pytest.raises(ValueError, match="segments > max_segments=10"):
        build_pool(scenes, "cpu", max_segments=10)
    bad = dataclasses.replace(scenes[0], heading=scenes[0].heading[:, :90])
    with pytest.raises(ValueError, match=r"'straight_0': field heading has shape \(4, 90\)"):
        build_pool([bad], "cpu")
    with pytest.raises(ValueError, match="some scenes have goal_candidates and some do not"):
        build_pool([generate("hidden_goal", 0, 3), scenes[0]], "cpu")
    with pytest.raises(ValueError, match="no scenes"):
        build_pool([], "cpu")


def test_adaptation_fields_are_pooled():
    pool = build_pool([generate("hidden_goal", i, 5) for i in range(2)], "cpu")
    assert pool.goal_candidates.shape[2:] == (3, 2)
    pool = build_pool([generate("partner_style", i, 5) for i in range(2)], "cpu")
    assert pool.style_pos.shape[:2] == (2, 2) and pool.style_valid.dtype == torch.bool
    mixed = [generate("straight", 0, 3), dataclasses.replace(generate("merge", 1, 3), route=None)]
    assert build_pool(mixed, "cpu").route is None  # routes only when every scene has one
    assert np.isclose(pool.dt, 0.1)


@pytest.mark.gpu
def test_pool_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA")
    pool = build_pool([generate("roundabout", 0, 5)], "cuda")
    assert pool.pos.is_cuda and pool.seg.is_cuda and pool.route.is_cuda
