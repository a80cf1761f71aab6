"""Both program contracts, the seed's output format in `verify`, and the verifier's bounds."""

import json
import time

import numpy as np
import pytest

from ttlab.discover.cli import main as discover_main
from ttlab.discover.sandbox import Job, Limits, SandboxPool
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.autocorrelation import DIRECT_MAX, MAX_N, ac1_value, ac2_value
from ttlab.discover.tasks.erdos import MAX_PIECES, _correlations, exact_c5, exact_c5_bounded

SEED_STYLE = """
import numpy as np
def run(seed, budget_s):
    n = 40
    h = np.full(n, 0.5)
    c5 = float(np.max(np.correlate(h, 1 - h, mode='full')) * 2 / n)
    return h, CLAIM, N_POINTS
"""


@pytest.fixture(scope="module")
def pool():
    p = SandboxPool(1, Limits(wall_s=5.0, memory_mb=1536))
    yield p
    p.close()


def _run(pool, code, **kw):
    return pool.submit(Job(code, **kw)).result(timeout=60)


def test_seed_contract_run_seed_budget(pool):
    r = _run(pool, SEED_STYLE.replace("CLAIM", "c5").replace("N_POINTS", "n"))
    assert r.ok and r.output.shape == (40,) and r.extra["contract"] == "run" and r.extra["n_points"] == 40
    v = get_task("erdos").verify(r.output, r.reported_score)
    assert v.valid and v.score == pytest.approx(0.5) and v.metrics["reported_gap"] == pytest.approx(0.0)


def test_seed_contract_forged_bound_is_only_compared(pool):
    r = _run(pool, SEED_STYLE.replace("CLAIM", "0.2").replace("N_POINTS", "n"))
    v = get_task("erdos").verify(r.output, r.reported_score)
    assert r.reported_score == 0.2 and v.score == pytest.approx(0.5) and v.metrics["reported_gap"] == pytest.approx(-0.3)


@pytest.mark.parametrize("n_points", ["n + 1", "'forty'", "None"])
def test_seed_contract_wrong_n_points_is_rejected(pool, n_points):
    r = _run(pool, SEED_STYLE.replace("CLAIM", "c5").replace("N_POINTS", n_points))
    assert not r.ok and r.status == "bad_result" and "n_points" in r.reason


def test_reference_style_run_without_arguments_and_dict_return(pool):
    r = _run(pool, "import numpy as np\ndef run():\n    return {'h_values': [0.5] * 6, 'c5_bound': 0.5, 'n_points': 6}\n")
    assert r.ok and r.output.shape == (6,) and r.reported_score == 0.5


def test_solve_wins_when_both_are_defined_and_entry_can_force_one(pool):
    code = ("import numpy as np\ndef solve(p, b, s):\n    return np.full(3, 0.5)\n"
            "def run(seed, budget_s):\n    return np.full(5, 0.5), 0.5, 5\n")
    assert _run(pool, code).output.shape == (3,)
    assert _run(pool, code, entry="run").output.shape == (5,)
    r = _run(pool, "def helper():\n    pass\n")
    assert r.status == "error" and "neither solve" in r.reason


def test_tracebacks_show_the_program_lines(pool):
    r = _run(pool, "def solve(p, b, s):\n    x = 1\n    return undefined_name + x\n")
    assert r.status == "error" and "return undefined_name + x" in r.stderr and 'program.py", line 3' in r.stderr


# ---- ttlab discover verify -------------------------------------------------------------------------
def _verify(tmp_path, capsys, payload, *args):
    f = tmp_path / "out.json"
    f.write_text(json.dumps(payload))
    rc = discover_main(["verify", str(f), *args])
    return rc, capsys.readouterr().out


def test_verify_reads_the_seed_output_and_recomputes_the_bound(tmp_path, capsys):
    rc, out = _verify(tmp_path, capsys, {"h_values": [0.5] * 10, "c5_bound": 0.1, "n_points": 10})
    assert rc == 0 and "VALID" in out and "c5_bound 0.1 (not trusted)" in out and "recomputed 0.5" in out


def test_verify_rejects_mismatched_n_points_and_odd_bounds(tmp_path, capsys):
    rc, out = _verify(tmp_path, capsys, {"h_values": [0.5] * 10, "c5_bound": 0.1, "n_points": 11})
    assert rc == 1 and "n_points=11 does not match" in out
    rc, out = _verify(tmp_path, capsys, {"h_values": [0.5] * 10, "c5_bound": "tiny", "n_points": 10})
    assert rc == 0 and "not a number" in out


def test_verify_exact_claim_is_bounded(tmp_path, capsys):
    rc, out = _verify(tmp_path, capsys, {"h_values": [0.5] * 10, "c5_bound": 0.5, "n_points": 10}, "--claim", "0.5")
    assert rc == 0 and "HOLDS" in out
    rc, out = _verify(tmp_path, capsys, {"h_values": [0.5] * 10, "c5_bound": 0.5, "n_points": 10}, "--claim", "0.49")
    assert rc == 1 and "FAILS" in out


# ---- verifier bounds -------------------------------------------------------------------------------
def test_piece_limit_and_time_of_the_largest_accepted_h():
    t = get_task("erdos")
    assert not t.verify(np.full(MAX_PIECES + 1, 0.5)).valid
    assert "pieces" in t.verify(np.full(MAX_PIECES + 1, 0.5)).message
    t0 = time.perf_counter()
    assert t.verify(np.random.default_rng(0).uniform(0.3, 0.7, MAX_PIECES)).valid
    assert time.perf_counter() - t0 < 3.0  # ~20 ms idle; generous for a loaded 2-core box


def test_autocorrelation_fft_path_matches_direct_and_is_fast():
    f = np.random.default_rng(1).uniform(0, 1, DIRECT_MAX + 2000)
    direct = np.convolve(f, f)
    w = 1.0 / (2 * f.size)
    assert ac1_value(f) == pytest.approx(float(direct.max() * w / (f.sum() * w) ** 2), rel=1e-12)
    g = np.concatenate([[0.0], direct, [0.0]])
    want = (np.sum(g[:-1] ** 2 + g[:-1] * g[1:] + g[1:] ** 2) / 3) / (np.sum(g[:-1] + g[1:]) / 2 * g.max())
    assert ac2_value(f) == pytest.approx(float(want), rel=1e-12)
    t0 = time.perf_counter()
    assert get_task("ac2").verify(np.ones(MAX_N)).valid and time.perf_counter() - t0 < 3.0


def _quadratic(a, b):
    n = len(a)
    return [sum(a[i] * b[i + k] for i in range(max(0, -k), min(n, n - k))) for k in range(-(n - 1), n)]


def test_exact_correlations_match_the_quadratic_definition():
    rng = np.random.default_rng(2)
    for n in (1, 2, 5, 33):
        a = [int(x) for x in rng.integers(0, 2**60, n)]
        b = [int(x) for x in rng.integers(-(2**60), 2**60, n)]
        assert _correlations(a, b) == _quadratic(a, b)


def test_exact_check_runs_in_a_worker_with_a_deadline():
    h = np.random.default_rng(3).uniform(0.2, 0.8, 200)
    c, ok, _ = exact_c5_bounded(h, timeout_s=60)
    assert c == exact_c5(h)[0] and ok
    slow = np.random.default_rng(4).uniform(0.2, 0.8, MAX_PIECES)
    slow[0] = 5e-324  # a subnormal: 1100-bit integers in the exact arithmetic
    t0 = time.perf_counter()
    c, ok, msg = exact_c5_bounded(slow, timeout_s=1.0)
    assert c is None and not ok and "within 1s" in msg and time.perf_counter() - t0 < 5
