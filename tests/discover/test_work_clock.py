"""The blocks' work clock: a program's compute, and so its score, depends on its calls, never on the load."""
import time

import numpy as np
import pytest

from ttlab.discover.blocks import clock_wall_factor, loader_line, program_meta, with_blocks
from ttlab.discover.blocks import erdos_blocks as eb
from ttlab.discover.random_blocks import random_program


def _hop_run(budget: float, unit: str, slow_s: float, monkeypatch) -> tuple[np.ndarray, int]:
    """`eb.hop` from a fixed start; every objective evaluation additionally burns `slow_s` CPU seconds (a core
    shared with others: every call costs more CPU, e.g. through a cold cache)."""
    real = eb.soft_max_and_grad

    def slowed(*a, **k):
        end = time.thread_time() + slow_s
        while time.thread_time() < end:
            pass
        return real(*a, **k)

    monkeypatch.setattr(eb, "soft_max_and_grad", slowed)
    h0 = eb.random_start(40, np.random.default_rng(3))
    h, c, hops = eb.hop(h0, eb.Clock(budget, wall_factor=100.0, unit=unit), np.random.default_rng(5), window=0.3)
    monkeypatch.setattr(eb, "soft_max_and_grad", real)
    return h, hops


def test_a_work_clock_stops_a_slowed_down_program_at_the_same_point(monkeypatch):
    fast, hops_fast = _hop_run(0.3, "work", 0.0, monkeypatch)
    slow, hops_slow = _hop_run(0.3, "work", 1e-4, monkeypatch)
    assert hops_fast == hops_slow >= 1 and np.array_equal(fast, slow)


def test_a_time_clock_stops_a_slowed_down_program_earlier(monkeypatch):
    # 2 CPU seconds: room for a few hops on a CPU without AVX-512 with four test workers on two cores
    # (0.3 s held none there, 1 s sometimes one)
    _, hops_fast = _hop_run(2.0, "time", 0.0, monkeypatch)
    _, hops_slow = _hop_run(2.0, "time", 1e-4, monkeypatch)
    assert hops_fast >= 2 and hops_slow < hops_fast


def test_work_is_charged_per_call_and_a_loop_of_bare_clock_checks_ends():
    c = eb.Clock(0.01, unit="work")
    w0 = eb.WORK[0]
    eb.corr(np.full(100, 0.5))
    assert eb.WORK[0] - w0 == pytest.approx(eb.corr_work(100) + 0.0)
    checks = 0
    while not c.done():  # nothing charged but the checks: still ends, after a fixed number of them
        checks += 1
    assert checks == pytest.approx(0.01 / eb.CHECK_WORK, abs=3)
    assert c.wall_factor == eb.WORK_WALL_FACTOR and c.sub(1.0).unit == "work"


def test_the_work_model_grows_with_the_size_and_is_near_a_cpu_second():
    sizes = [51, 204, 816, 1632]
    per_eval = [eb.grad_work(n, n >= eb.FFT_N) + eb.lbfgs_work(n) for n in sizes]
    assert (np.diff(per_eval) > 0).all()
    assert 1e-5 < per_eval[0] < 1e-3 and 1e-4 < per_eval[-1] < 1e-2  # seconds, the order measured on one core


def test_unknown_clock_units_are_refused():
    with pytest.raises(ValueError, match="unit"):
        eb.Clock(1.0, unit="ticks")
    with pytest.raises(ValueError, match="clock"):
        with_blocks("import erdos_blocks as eb\n", "ticks")
    with pytest.raises(ValueError, match="clock"):
        clock_wall_factor("ticks")
    assert clock_wall_factor("time") == 1.0 and clock_wall_factor("work") == eb.WORK_WALL_FACTOR


def test_the_loader_sets_the_unit_and_the_default_stays_time():
    assert eb.CLOCK_UNIT == "time" and "CLOCK_UNIT = 'work'" in loader_line("erdos_blocks", "work")
    g: dict = {}
    exec(compile(loader_line("erdos_blocks", "work"), "p", "exec"), g)
    import sys

    assert sys.modules["erdos_blocks"].CLOCK_UNIT == "work" and sys.modules["erdos_blocks"].Clock(1.0).unit == "work"
    sys.modules["erdos_blocks"] = eb  # the host's module again


def test_a_block_program_scores_the_same_twice_in_the_sandbox_under_the_work_clock():
    from ttlab.discover.sandbox import Limits, run_program
    from ttlab.discover.tasks import get_task

    task = get_task("erdos")
    parent = task.initial_states(np.random.default_rng(0), 1)[0]
    code, _ = random_program(np.random.default_rng(4))
    scores, metas = [], []
    for _ in range(2):
        res = run_program(with_blocks(code, "work"), parent=parent, budget_s=0.6, seed=9,
                          limits=Limits(wall_s=clock_wall_factor("work") * 0.6 + 10.0))
        assert res.ok, (res.status, res.reason, res.stderr[-800:])
        scores.append(task.verify(res.output).score)
        metas.append(program_meta(res.stdout))
    assert scores[0] == scores[1]
    assert metas[0]["work_s"] == metas[1]["work_s"] > 0 and metas[0]["wall_stops"] == 0
