import math

import numpy as np
import pytest

from ttlab.discover.puct import PUCTTree, puct_score, rank_priors


def test_rank_prior_linear():
    assert rank_priors([0.1, 0.9, 0.5]) == pytest.approx([1 / 6, 3 / 6, 2 / 6])


def test_puct_score_formula():
    assert puct_score(0.5, 0.25, 3, 8, 2.0, 0.4) == pytest.approx(0.5 + 2.0 * 0.4 * 0.25 * 3.0 / 4.0)


def _tree():
    t = PUCTTree(c=1.0, keep_children=2, max_roots=2)
    a = t.add_root(np.array([0.0]), reward=1.0, score=1.0)
    b = t.add_root(np.array([1.0]), reward=2.0, score=2.0)
    return t, a, b


def test_hand_computed_scores_and_visits():
    t, a, b = _tree()
    # T = 0, scale = 1: a: Q=1, P=1/3 -> 1 + 1/3; b: Q=2, P=2/3 -> 2 + 2/3
    sc = t.scores()
    assert sc[a.id] == pytest.approx(1 + 1 / 3) and sc[b.id] == pytest.approx(2 + 2 / 3)
    t.record_expansion(a.id)
    c = t.add_child(a.id, np.array([0.5]), reward=3.0, score=3.0)
    t.record_expansion(c.id)  # a failed expansion of c: counts on c and on a
    assert (a.n, c.n, b.n, t.total) == (2, 1, 0, 2)
    # Q: a=3 (best child), b=2, c=3 -> ranks a(0), c(1), b(2) (ties by order); scale = 3 - 1 = 2
    sc = t.scores()
    s3 = math.sqrt(3.0)
    assert sc[a.id] == pytest.approx(3 + 2 * (3 / 6) * s3 / 3)
    assert sc[c.id] == pytest.approx(3 + 2 * (2 / 6) * s3 / 2)
    assert sc[b.id] == pytest.approx(2 + 2 * (1 / 6) * s3 / 1)


def test_select_blocks_lineage_and_is_deterministic():
    t, a, b = _tree()
    t.record_expansion(a.id)
    c = t.add_child(a.id, np.array([0.5]), reward=5.0, score=5.0)
    picks = [n.id for n in t.select(3)]
    assert picks == [n.id for n in t.select(3)]
    assert not ({a.id, c.id} <= set(picks)) and b.id in picks and len(picks) == 2


def test_dedup_and_flush_and_roundtrip(tmp_path):
    t, a, b = _tree()
    assert t.add_root(np.array([1.0]), 9.0, 9.0) is None
    for k, r in enumerate([0.1, 0.9, 0.5]):
        t.record_expansion(b.id)
        t.add_child(b.id, np.array([10.0 + k]), reward=r, score=r)
    t.add_root(np.array([7.0]), reward=0.01, score=0.01)
    dropped = t.flush()
    assert dropped == 2  # the worst child of b and the worst root
    assert sorted(t.nodes[c].reward for c in t.nodes[b.id].children) == [0.5, 0.9]
    t.save(tmp_path / "tree.json")
    u = PUCTTree.load(tmp_path / "tree.json")
    assert u.scores() == pytest.approx(t.scores()) and u.total == t.total
    assert u.add_child(b.id, np.array([11.0]), 1.0, 1.0) is None  # dedup survives reload
    with pytest.raises(ValueError, match="not a PUCT tree"):
        PUCTTree.load(tmp_path / "config.json")


def test_roots_first_expands_every_root_once_before_puct_chooses():
    t = PUCTTree(c=1.0)
    r = [t.add_root(np.array([float(i)]), reward=float(i), score=float(i)) for i in range(3)]
    t.record_expansion(r[0].id)
    t.add_child(r[0].id, np.array([9.0]), reward=9.0, score=9.0)  # a much better child: PUCT's pick
    assert t.select(1)[0].parent_id == r[0].id
    assert [n.id for n in t.select(1, roots_first=True)] == [r[1].id]  # the oldest root never expanded
    assert [n.id for n in t.select(5, roots_first=True)] == [r[1].id, r[2].id]
    t.record_expansion(r[1].id)  # a failed try counts as a try
    t.record_expansion(r[2].id)
    assert [n.id for n in t.select(1, roots_first=True)] == [n.id for n in t.select(1)]


def test_portfolio_preset_is_auto_from_three_roots_first():
    from ttlab.discover.presets import SEARCH_PRESETS

    cfg, auto = SEARCH_PRESETS["erdos_portfolio"](), SEARCH_PRESETS["erdos_auto"]()
    assert (cfg.init_states, cfg.roots_first, auto.roots_first) == (3, True, False)
    assert (cfg.program_settings, cfg.program_budget_s) == (auto.program_settings, auto.program_budget_s)


def test_screen_preset_is_auto_with_seven_chains_in_one_program_of_the_whole_budget():
    import json

    from ttlab.common.duration import parse_duration
    from ttlab.discover.loop import make_proposer
    from ttlab.discover.presets import SEARCH_PRESETS
    from ttlab.discover.proposers import read_settings
    from ttlab.discover.puct import Node

    cfg, auto = SEARCH_PRESETS["erdos_screen"](), SEARCH_PRESETS["erdos_auto"]()
    pins, auto_pins = json.loads(cfg.program_settings)["lse"], json.loads(auto.program_settings)["lse"]
    assert (pins["chains"], pins["metro_frac"], pins["hop_T"], cfg.program_budget_s) == (7, 0.77, 5e-5, 1800.0)
    assert (cfg.cpu_budget, cfg.program_wall_factor) == ("30m", 6.0)  # the wall limit never cuts the first program
    assert parse_duration(cfg.time_limit) >= cfg.program_wall_factor * cfg.program_budget_s
    assert {k: v for k, v in pins.items() if k not in ("chains", "metro_frac", "hop_T")} == \
        {k: v for k, v in auto_pins.items() if k not in ("metro_frac", "hop_T")}
    node = Node(id="0", construction=[0.5] * 8, reward=-0.5, score=0.5)
    code = make_proposer(cfg).propose([node], 1)[0].code
    assert read_settings(code)["chains"] == 7  # the pin reaches the program the sandbox runs
