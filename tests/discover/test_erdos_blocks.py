"""The Erdős building blocks: golden numbers, the exact repair, the CPU clock, and block programs in the sandbox."""
import ast
import math
import os
import subprocess
import sys
import time
from fractions import Fraction

import numpy as np
import pytest

from ttlab.discover.blocks import BLOCKS_DIR, log_tail, program_meta, uses_blocks, with_blocks
from ttlab.discover.blocks import erdos_blocks as eb
from ttlab.discover.random_blocks import STAGES, RandomBlocksProposer, random_program
from ttlab.discover.tasks.erdos import exact_c5

INF = eb.Clock.wall_until(math.inf)


def test_c5_golden_numbers_on_tiny_inputs():
    assert eb.c5(np.array([0.5, 0.5])) == 0.5  # lags -1, 0, 1: 0.25, 0.5, 0.25; times 2/n
    assert eb.c5(np.array([2.0, 2.0])) == 0.5  # the verifier's rescale to sum n/2
    assert eb.c5(np.array([1.0, 0.0, 1.0, 0.0])) == 1.0  # shift by one piece: 2 overlaps of 1, times 2/4
    h = np.array([0.0, 0.3, 0.9, 0.8, 0.0])
    g = h * 2.5 / h.sum()
    brute = max(sum(g[i] * (1 - g[i + k]) for i in range(5) if 0 <= i + k < 5) for k in range(-4, 5)) * 2 / 5
    assert abs(eb.c5(h) - brute) < 1e-15


def test_soft_max_is_the_closed_form_and_bounds_c5():
    val, _ = eb.soft_max_and_grad(np.array([0.5, 0.5]), 0.1, 0.0)
    assert abs(val - (0.5 + 0.1 * math.log(1 + 2 * math.exp(-2.5)))) < 1e-15
    h = eb.normalise(eb.random_start(40, np.random.default_rng(0)))
    for tau in (1e-2, 1e-5):
        v, _ = eb.scaled_objective(h, tau, 0.0)
        assert eb.c5(h) <= v <= eb.c5(h) + tau * math.log(79) + 1e-15


def test_normalise_is_feasible_and_exact_repair_makes_the_rational_check_pass():
    h = eb.normalise(np.array([3.0, 0.1, 0.2, 0.9]))
    assert abs(h.sum() - 2.0) < 1e-12 and h.max() <= 1.0 and h.min() >= 0.0
    # float-feasible, exactly infeasible: the piece at 1 rescales to 1.5 / (1.5 - 2^-55) > 1
    bad = np.array([1.0, 0.25, 0.25 - 2.0 ** -55])
    assert not exact_c5(bad)[1]
    fixed = eb.exactly_feasible(bad)
    assert exact_c5(fixed)[1] and np.abs(fixed - bad).max() < 1e-15 and fixed[0] == 1.0
    assert 3 * max(Fraction(float(x)) for x in fixed) <= 2 * sum(Fraction(float(x)) for x in fixed)
    rng = np.random.default_rng(1)
    for _ in range(20):  # finish() always passes the exact check
        x = rng.uniform(0, 1, int(rng.integers(5, 60))) ** 3
        x[rng.integers(x.size)] = 5.0
        assert exact_c5(eb.finish(x))[1]


def test_local_solves_and_hops_golden_on_a_tiny_start():
    # deterministic when the clock never runs out (no deadline): golden values of the library's solves
    h0 = eb.random_start(30, np.random.default_rng(3))
    h1, c1 = eb.continuation(h0, INF, tau0=1e-3)
    assert abs(c1 - eb.c5(h1)) < 1e-15 and c1 < eb.c5(h0) - 0.02
    h2, c2, hops = eb.hop(h1, INF, np.random.default_rng(4), max_hops=6)
    assert hops == 6 and abs(c2 - eb.c5(h2)) < 1e-15
    h3, c3 = eb.refine(h2, eb.Clock(1.0, 20.0), 120)  # converges at ftol 1e-15: bounded by a clock
    assert h3.size == 120 and c3 < c2 - 1e-5  # more pieces, lower
    # golden (scipy L-BFGS-B; a hop's first converge may end a hair above the continuation's best)
    assert abs(eb.c5(h0) - 0.4555776975043) < 1e-12
    assert abs(c1 - 0.3815438232) < 1e-8 and abs(c2 - 0.3815440652) < 1e-8
    h4, c4, steps = eb.lp_polish(eb.random_start(16, np.random.default_rng(5)), eb.Clock(2.0, 10.0))
    assert steps > 0 and c4 < 0.40


def test_coarsen_and_upsample_keep_the_function():
    h = eb.normalise(eb.random_start(64, np.random.default_rng(2)))
    assert eb.c5(eb.upsample(h, 2)) == pytest.approx(eb.c5(h), abs=1e-15)
    assert eb.coarsen(h, 4).size == 16 and eb.coarsen(h, 5) is h and eb.coarsen(h, 16) is h  # 64/16 < 8 pieces
    assert np.allclose(eb.upsample(eb.coarsen(h, 4), 4).reshape(-1, 4).mean(axis=1), eb.coarsen(h, 4))


def test_clock_children_never_outlast_their_parent_and_wall_factor_one_is_a_wall_budget():
    c = eb.Clock(0.4, wall_factor=1.0)
    a, b = c.sub(100.0), c.until(0.5)
    assert a.cpu_end <= c.cpu_end and a.wall_end <= c.wall_end and b.wall_end <= c.wall0 + 0.2 + 1e-9
    t = time.time()
    time.sleep(0.25)  # no CPU used: with wall_factor 1 the wall clock ends it anyway
    while not c.done():
        pass
    assert 0.38 < time.time() - t < 0.6
    lazy = eb.Clock(0.2, wall_factor=10.0)
    time.sleep(0.3)  # wall passes, CPU does not: a CPU clock is not over (wall backstop 2 s)
    assert not lazy.done() and lazy.left() > 0.15


BUSY = """
import sys, time
sys.path.insert(0, {dir!r})
import erdos_blocks as eb
c = eb.Clock({budget}, wall_factor={factor})
x = 0
while not c.done():
    x += 1
print(c.used(), c.wall())
"""


def _pinned(code: str, cpu: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_a_cpu_budgeted_program_gets_its_cpu_seconds_under_a_competing_load():
    cpu = sorted(os.sched_getaffinity(0))[0]
    burner = _pinned("while True: pass", cpu)  # shares the one core with the program
    try:
        time.sleep(0.2)
        cpu_clock = _pinned(BUSY.format(dir=str(BLOCKS_DIR), budget=0.5, factor=100.0), cpu)
        used, wall = map(float, cpu_clock.communicate(timeout=120)[0].split())
        wall_clock = _pinned(BUSY.format(dir=str(BLOCKS_DIR), budget=0.5, factor=1.0), cpu)
        used1, wall1 = map(float, wall_clock.communicate(timeout=120)[0].split())
    finally:
        burner.kill()
        burner.wait()
    assert wall > 0.8 and used >= 0.49  # at most half a core, and still all of its 0.5 CPU seconds
    assert wall1 < 0.55 and used1 < 0.35  # a wall-clock budget under the same load gets only its share


def test_with_blocks_bundles_only_what_a_program_imports():
    plain = "import numpy as np\ndef solve(p, b, s):\n    return p\n"
    assert with_blocks(plain) == plain and uses_blocks(plain) == []
    code = "import numpy as np\nimport erdos_blocks as eb\n"
    out = with_blocks(code)
    assert uses_blocks(code) == ["erdos_blocks"] and out.endswith(code) and out.count("\n") == code.count("\n") + 1
    g: dict = {}
    exec(compile(out.replace("import erdos_blocks as eb\n", ""), "p", "exec"), g)  # the loader alone defines it
    assert sys.modules["erdos_blocks"].c5(np.array([0.5, 0.5])) == 0.5


def test_program_meta_reads_the_last_line_and_ignores_garbage():
    assert program_meta('x\nprogram_meta {"cpu_s": 1.5, "wall_s": 2}\nprogram_meta {"cpu_s": 3.0}\n') == {"cpu_s": 3.0}
    for junk in ["", None, "program_meta {", 'program_meta ["cpu_s", 1]', 'program_meta {"cpu_s": "fast"}',
                 'program_meta {"cpu_s": NaN}', "cpu_s=3"]:
        assert program_meta(junk).get("cpu_s") is None


def test_log_tail_keeps_the_last_lines_without_the_meta_line():
    out = "".join(f"lse ladder: n={51 * 2 ** k} C5=0.38\n" for k in range(20)) + "\n" + "x" * 500 + "\n"
    tail = log_tail(out + 'program_meta {"cpu_s": 1}\n', lines=3, width=40)
    assert tail == ["lse ladder: n=" + str(51 * 2 ** 18) + " C5=0.38", "lse ladder: n=" + str(51 * 2 ** 19) + " C5=0.38",
                    "x" * 40]
    assert log_tail(None) == [] and log_tail("") == []


def test_random_programs_parse_vary_in_structure_and_repeat_for_a_seed():
    rng = np.random.default_rng(0)
    progs = [random_program(rng) for _ in range(60)]
    for code, _ in progs:
        ast.parse(code)
        assert "import erdos_blocks as eb" in code and "return eb.finish(h)" in code
    kinds = {s["kind"] for _, ch in progs for s in ch.get("stages", [])}
    starts = {ch["start"] for _, ch in progs}
    assert kinds == set(STAGES) and starts == {"parent", "coarse", "multistart"}
    assert len({code for code, _ in progs}) == 60
    assert random_program(np.random.default_rng(7))[0] == random_program(np.random.default_rng(7))[0]
    with pytest.raises(ValueError, match="erdos"):
        RandomBlocksProposer("ac1")


def test_a_random_blocks_program_runs_in_the_sandbox_and_returns_a_valid_construction():
    from ttlab.discover.sandbox import Limits, run_program
    from ttlab.discover.tasks import get_task

    task = get_task("erdos")
    parent = task.initial_states(np.random.default_rng(0), 1)[0]
    code, _ = random_program(np.random.default_rng(11), wall_factor=2.0)
    res = run_program(with_blocks(code), parent=parent, budget_s=2.0, seed=0, limits=Limits(wall_s=20.0))
    assert res.ok, (res.status, res.reason, res.stderr[-800:])
    v = task.verify(res.output)
    assert v.valid and v.score < task.verify(parent).score and exact_c5(res.output)[1]
    meta = program_meta(res.stdout)
    assert 0.5 < meta["cpu_s"] <= 2.2 and meta["wall_s"] <= res.wall_s
