"""Reward provenance: every verified result names its program and parent, and a construction equal to a known
one (after the task's normalisation) is a copy that never becomes a state, a best or a kept polish round."""

import json

import numpy as np
import pytest

from ttlab.discover.config import PolishConfig, SearchConfig
from ttlab.discover.loop import run_search
from ttlab.discover.polish import run_polish
from ttlab.discover.proposers import Proposal, Proposer
from ttlab.discover.provenance import Judge, Known, program_hash
from ttlab.discover.puct import PUCTTree
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.base import COPY_TOL, coarsest_steps
from ttlab.discover.tasks.erdos import ErdosTask, load_reference, reference_file

REF = reference_file()
needs_ref = pytest.mark.skipif(REF is None, reason="shared reference data absent (set TTLAB_SHARED_DATA)")


def _returns(h: np.ndarray) -> str:
    """A program that returns a fixed construction (as a program that copied it from somewhere would)."""
    return ("import numpy as np\nH = np.array(" + repr([float(x) for x in h]) + ")\n"
            "def solve(parent, budget_s, seed):\n    return H\n")


def _rough(n=60, seed=0):
    rng = np.random.default_rng(seed)
    x = np.linspace(-1, 1, n)
    return np.clip(0.5 + 0.3 * np.cos(np.pi * x / 2) + 0.05 * rng.standard_normal(n), 0, 1)


# ---- the normalisation ---------------------------------------------------------------------------------
def test_coarsest_steps_finds_the_fewest_equal_pieces():
    h = np.array([0.2, 0.7, 0.4])
    np.testing.assert_allclose(coarsest_steps(np.repeat(h, 6)), h, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(coarsest_steps(h), h)
    assert coarsest_steps(np.full(12, 0.5)).shape == (1,)
    noisy = np.repeat(h, 4) + 1e-14 * np.arange(12)
    assert coarsest_steps(noisy).shape == (3,)
    assert coarsest_steps(np.repeat(h, 4) + 1e-9 * np.arange(12)).shape == (12,)


def test_erdos_forms_are_the_verifiers_normalisation_and_keep_c5():
    task = ErdosTask()
    h = _rough()
    c5 = task.verify(h).score
    forms = task.normal_forms(h)
    assert len(forms) == 4
    for g in forms:  # every symmetry image is itself a valid construction of the same C5
        v = task.verify(g)
        assert v.valid and v.score == pytest.approx(c5, abs=1e-12)
        assert g.sum() == pytest.approx(g.size / 2, abs=1e-9)


@pytest.mark.parametrize("variant", [
    lambda h: 0.6 * h,  # scaled: the verifier rescales to sum n/2
    lambda h: h[::-1],  # reversed: C5 is invariant under x -> 2 - x
    lambda h: 1.0 - h / h.sum() * (h.size / 2),  # complement of the rescaled h: same C5
    lambda h: np.repeat(h, 3),  # the same step function on three times the pieces
    lambda h: np.repeat(h[::-1], 2) * 0.9 + 0.0,
    lambda h: h + 1e-13,  # within the tolerance after the rescale
])
def test_equivalent_erdos_constructions_are_recognised(variant):
    task = ErdosTask()
    h = _rough()
    known = Known(task)
    known.add("orig", h)
    assert known.match(task.normal_forms(variant(h))) == "orig"


@pytest.mark.parametrize("variant", [
    lambda h: h + 1e-9 * np.arange(h.size),  # a real (if tiny) change
    lambda h: np.concatenate([h, [0.0]]),  # a different function (one more piece on the same [0, 2])
    lambda h: np.roll(h, 1),
])
def test_different_erdos_constructions_are_not_copies(variant):
    task = ErdosTask()
    h = _rough()
    known = Known(task)
    known.add("orig", h)
    assert known.match(task.normal_forms(variant(h))) is None


def test_other_tasks_normalise_by_scale_reversal_and_symmetry():
    ac1 = get_task("ac1")
    f = np.abs(_rough(40)) + 0.1
    k = Known(ac1)
    k.add("f", f)
    assert k.match(ac1.normal_forms(3.0 * np.repeat(f[::-1], 2))) == "f"
    assert k.match(ac1.normal_forms(f + 1e-6)) is None
    circ = get_task("circle26")
    c = circ.initial_states(np.random.default_rng(0), 1)[0]
    k = Known(circ)
    k.add("c", c)
    mirrored = np.stack([1 - c[:, 1], c[:, 0], c[:, 2]], axis=1)[::-1]  # rotated by 90 degrees, rows permuted
    assert k.match(circ.normal_forms(mirrored)) == "c"
    assert COPY_TOL == 1e-12


# ---- the judge: references, other lineages, own lineage ------------------------------------------------
def test_judge_tells_copies_from_rediscoveries():
    task = ErdosTask()
    tree = PUCTTree()
    a, b = _rough(seed=1), _rough(seed=2)
    ra = tree.add_root(a, 1.0, 0.5)
    rb = tree.add_root(b, 1.0, 0.5)
    child = tree.add_child(ra.id, _rough(seed=3), 1.1, 0.45, code="x")
    judge = Judge(task, Known(task))
    other = judge.judge(tree, rb.id, np.repeat(a, 2), "prog")  # given b, returns a (another lineage)
    assert other.verdict == "copy" and other.copy_of == f"tree:{ra.id}" and other.parent == rb.id
    assert other.program == program_hash("prog") and len(other.program) == 16
    own = judge.judge(tree, child.id, a[::-1], "prog")  # given a's child, returns a: its own lineage
    assert own.verdict == "same" and own.copy_of == f"tree:{ra.id}"
    assert judge.judge(tree, rb.id, _rough(seed=9), "prog").verdict == "new"


@needs_ref
def test_published_references_are_known_to_the_task():
    task = ErdosTask()
    refs = task.references()
    assert {name for name, _ in refs} >= {"ttt_discover_2026", "haugland_2016"}
    known = Known.for_task(task)
    ttt = load_reference(REF)[-1]["h"]
    assert known.match(task.normal_forms(np.repeat(ttt[::-1], 2) * 0.5)) == "reference:ttt_discover_2026"


# ---- hostile: a copied construction never counts -------------------------------------------------------
class CopyProposer(Proposer):
    """Returns the published record (reversed, scaled) for the first state and the other selected state's
    construction (refined) for the second: copies an LLM could make by reading files or memorising them."""

    def __init__(self, record: np.ndarray) -> None:
        self.record = record

    def propose(self, states, n):
        out = [Proposal(states[0].id, _returns(0.8 * self.record[::-1]))]
        if len(states) > 1:
            out.append(Proposal(states[1].id, _returns(np.repeat(states[0].array(), 2))))
        return out


@needs_ref
def test_search_never_takes_a_copy_as_a_state_or_a_best(tmp_path):
    record = load_reference(REF)[-1]["h"]
    cfg = SearchConfig(time_limit="90s", program_budget_s=2.0, grace_s=5.0, init_states=2, states_per_step=2,
                       samples_per_state=1, max_steps=1, workers=2, memory_mb=1536, root=str(tmp_path), run_name="c")
    rec = run_search(cfg, proposer=CopyProposer(record), log=lambda *_: None)
    assert rec["score"] > 0.39  # the best is still an initial state, not the copied record
    assert rec["valid"] == 0 and rec["evals"] == 2  # neither copy counted as a valid result
    run = tmp_path / "discover" / "c"
    lines = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(x["verdict"] == "copy" and not x["counted"] for x in lines)
    assert lines[0]["copy_of"] == "reference:ttt_discover_2026"
    assert lines[1]["copy_of"].startswith("tree:s")
    assert all(len(x["program"]) == 16 and x["parent"].startswith("s") for x in lines)
    tree = json.loads((run / "tree.json").read_text())
    assert len(tree["nodes"]) == 2 and tree["total"] == 2  # two expansions, no new state
    best = json.loads((run / "best.json").read_text())
    assert best["provenance"]["parent"] is None  # the best is a root


@needs_ref
def test_polish_never_keeps_a_copied_reference(tmp_path, monkeypatch):
    from ttlab.discover import polish, proposers

    record = load_reference(REF)[-1]["h"]
    copy = _returns(np.repeat(record, 2)) + "SETTINGS = {}\n"
    monkeypatch.setattr(polish, "library_programs", lambda task: {"copy": copy})
    out = tmp_path / "best.json"
    rec = run_polish(PolishConfig(file=REF, name="haugland_2016", program="copy", time_limit="12s", round_s=4.0,
                                  out=out), log=lambda *_: None)
    assert rec["score"] > 0.3809  # still Haugland's 0.380927, not the copied 0.380875
    rounds = rec["history"][1:]
    assert rounds and all(e["verdict"] == "copy" and not e["kept"] for e in rounds if e["status"] == "ok")
    assert any(e["status"] == "ok" for e in rounds)
    ran = proposers.render(copy, {})  # the source the polish actually ran
    assert rec["provenance"]["program"] == program_hash(ran) and rec["provenance"]["parent"] == "haugland_2016"
