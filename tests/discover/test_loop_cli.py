import json

import numpy as np
import pytest

from ttlab.common.duration import parse_duration
from ttlab.common.errors import UserError
from ttlab.discover.cli import main as discover_main
from ttlab.discover.loop import run_search
from ttlab.discover.presets import search_debug


def test_parse_duration_needs_a_unit():
    assert parse_duration("10m") == 600 and parse_duration("90s") == 90 and parse_duration("1.5h") == 5400
    assert parse_duration("") == 0 and parse_duration("0") == 0
    for bad in ("ten minutes", "59"):  # a bare number's unit would be a guess
        with pytest.raises(UserError, match="--time-limit"):
            parse_duration(bad)


def test_search_end_to_end_then_resume(tmp_path):
    cfg = search_debug()
    cfg.root, cfg.run_name = str(tmp_path), "r"
    rec = run_search(cfg, log=lambda *_: None)
    best = json.loads((tmp_path / "discover" / "r" / "best.json").read_text())
    assert rec["valid"] and best["score"] == pytest.approx(rec["score"]) and rec["evals"] == 4
    tree = json.loads((tmp_path / "discover" / "r" / "tree.json").read_text())
    assert tree["total"] == 4 and tree["step"] == 2
    assert rec["score"] < 0.5 and "exact" in best  # improved on the initial states, exact check recorded
    cfg.resume = True
    rec2 = run_search(cfg, log=lambda *_: None)
    tree2 = json.loads((tmp_path / "discover" / "r" / "tree.json").read_text())
    assert tree2["total"] == 8 and tree2["step"] == 4 and rec2["score"] <= rec["score"]


def test_search_starts_from_an_earlier_tree_and_refuses_a_forged_one(tmp_path):
    cfg = search_debug()
    cfg.root, cfg.run_name = str(tmp_path), "a"
    first = run_search(cfg, log=lambda *_: None)
    src = tmp_path / "discover" / "a" / "tree.json"
    cfg.run_name, cfg.init_tree = "b", str(src)
    second = run_search(cfg, log=lambda *_: None)
    grown = json.loads((tmp_path / "discover" / "b" / "tree.json").read_text())
    assert grown["total"] == 8 and second["score"] <= first["score"]  # 4 expansions on top of the earlier 4
    forged = json.loads(src.read_text())
    forged["nodes"][0]["reward"] += 0.01  # a stored reward the verifier does not reproduce
    bad = tmp_path / "forged.json"
    bad.write_text(json.dumps(forged))
    cfg.run_name, cfg.init_tree = "c", str(bad)
    with pytest.raises(ValueError, match="verifies to"):
        run_search(cfg, log=lambda *_: None)
    assert not (tmp_path / "discover" / "c").exists()  # refused before the run directory


def test_cli_verify(tmp_path, capsys):
    f = tmp_path / "h.json"
    f.write_text(json.dumps({"h": [0.5] * 10}))
    assert discover_main(["verify", str(f)]) == 0
    assert "C5 = 0.5" in capsys.readouterr().out
    np.save(tmp_path / "bad.npy", np.array([0.5, np.nan]))
    assert discover_main(["verify", str(tmp_path / "bad.npy")]) == 1
    assert "NaN" in capsys.readouterr().out
    assert discover_main(["verify", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: no such file" in capsys.readouterr().err
    assert discover_main(["search", "--help"]) == 0


def test_program_weights_are_parsed_and_bad_ones_refused():
    from ttlab.discover.loop import DEFAULT_PROGRAM_WEIGHTS, parse_program_weights

    assert parse_program_weights("lse=3,minimax=0.5", "erdos") == {"lse": 3.0, "minimax": 0.5}
    assert parse_program_weights(DEFAULT_PROGRAM_WEIGHTS["erdos"], "erdos") == {"lse": 3.0}
    for bad in ["foo=1", "lse", "lse=x", "lse=-1", "adam=0,local=0,lse=0,minimax=0,slp=0"]:
        with pytest.raises(ValueError, match="program-weights"):
            parse_program_weights(bad, "erdos")


def test_program_settings_pin_the_proposers_settings_and_bad_ones_are_refused():
    from ttlab.discover.config import SearchConfig
    from ttlab.discover.loop import make_proposer, parse_program_settings
    from ttlab.discover.puct import Node

    pins = '{"lse": {"start": "random", "hop_frac": 0.25}}'
    assert parse_program_settings(pins, "erdos") == {"lse": {"start": "random", "hop_frac": 0.25}}
    prop = make_proposer(SearchConfig(task="erdos", program_weights="lse=1,adam=0,local=0,minimax=0,slp=0",
                                      program_settings=pins))
    for p in prop.propose([Node(id="0", construction=[0.5] * 4, reward=-0.4, score=0.4)], 6):
        assert p.meta["program"] == "lse" and p.meta["settings"]["start"] == "random"
        assert p.meta["settings"]["hop_frac"] == 0.25 and "hop_frac': 0.25" in p.code
    for bad, msg in [("{", "not JSON"), ('{"foo": {}}', "not a library program"), ('{"lse": {"nope": 1}}', "no setting"),
                     ('{"lse": 3}', "object of objects")]:
        with pytest.raises(ValueError, match=msg):
            parse_program_settings(bad, "erdos")


def test_demo_rerun_starts_its_runs_afresh(tmp_path):
    # the demo's search and TTT runs have fixed names: a second `make demo` failed with "run directory exists"
    from ttlab.common.runs import make_run_dir
    from ttlab.discover.config import SearchConfig
    from ttlab.discover.demo import fresh_runs

    out = tmp_path / "discover"
    cfg = SearchConfig(run_name="search", root=str(tmp_path))
    make_run_dir("discover", cfg, cfg.run_name, cfg.root, False)
    with pytest.raises(FileExistsError):
        make_run_dir("discover", cfg, cfg.run_name, cfg.root, False)
    fresh_runs(out)
    make_run_dir("discover", cfg, cfg.run_name, cfg.root, False)
