"""The search with block programs: the random-blocks proposer end to end, CPU-time budgets, wall-factor pins."""
import json

import pytest

from ttlab.discover.config import SearchConfig
from ttlab.discover.loop import make_proposer, run_search
from ttlab.discover.proposers import library_programs, read_settings
from ttlab.discover.puct import Node
from ttlab.discover.random_blocks import RandomBlocksProposer


def test_random_blocks_search_records_each_programs_cpu_seconds_and_stops_at_its_cpu_budget(tmp_path):
    steps = []
    cfg = SearchConfig(proposer="random_blocks", time_limit="5m", cpu_budget="3s", program_budget_s=2.0, grace_s=10.0,
                       program_wall_factor=4.0, workers=1, init_states=1, states_per_step=1, samples_per_state=1,
                       root=str(tmp_path), run_name="rb")
    rec = run_search(cfg, log=lambda *_: None, on_step=steps.append)
    progs = [p for s in steps for p in s["programs"]]
    # programs run while at least 1 CPU second of the 3 is left: the last one started below 2 s, and then it was spent
    assert rec["programs_cpu_s"] >= 2.0 and sum(p["cpu_s"] for p in progs[:-1]) < 2.0
    assert all(p["cpu_reported"] and 0.0 < p["cpu_s"] <= p["budget_s"] + 0.5 for p in progs if p["status"] == "ok")
    assert progs[0]["budget_s"] == 2.0 and progs[0]["cpu_s"] > 1.0  # it got (most of) its CPU seconds
    assert rec["programs_cpu_s"] == pytest.approx(sum(p["cpu_s"] for p in progs))
    tree = json.loads((tmp_path / "discover" / "rb" / "tree.json").read_text())
    codes = [n["code"] for n in tree["nodes"] if n["code"]]
    assert codes and all(c.startswith("import numpy as np\nimport erdos_blocks as eb") for c in codes)  # unbundled


def test_wall_factor_is_pinned_into_cpu_budgeted_library_programs_only():
    cfg = SearchConfig(task="erdos", program_wall_factor=3.0, program_weights="lse=1,minimax=1,adam=0,local=0,slp=0")
    node = Node(id="0", construction=[0.5] * 4, reward=-0.4, score=0.4)
    for p in make_proposer(cfg).propose([node], 8):
        assert p.meta["settings"]["wall_factor"] == 3.0 and "import erdos_blocks" in p.code
    assert "wall_factor" not in read_settings(library_programs("erdos")["adam"])  # wall-clock programs: untouched
    plain = make_proposer(SearchConfig(task="erdos", program_weights="lse=1,adam=0,local=0,minimax=0,slp=0"))
    assert all(p.meta["settings"]["wall_factor"] is None for p in plain.propose([node], 4))  # mutate leaves None
    rb = make_proposer(SearchConfig(proposer="random_blocks", program_wall_factor=3.0))
    assert isinstance(rb, RandomBlocksProposer) and "eb.Clock(budget_s, wall_factor=3)" in rb.propose([node], 1)[0].code


def test_bad_cpu_budget_or_wall_factor_is_refused_before_a_run_dir_exists(tmp_path):
    for kw, msg in [({"cpu_budget": "lots"}, "--cpu-budget"), ({"program_wall_factor": 0.5}, "--program-wall-factor")]:
        with pytest.raises(ValueError, match=msg):
            run_search(SearchConfig(root=str(tmp_path), run_name="bad", **kw), log=lambda *_: None)
    assert not (tmp_path / "discover" / "bad").exists()
