"""Sandbox evaluations as Ray tasks (a local Ray started by the executor, dashboard off/loopback)."""

from __future__ import annotations

import numpy as np

from ttlab.discover.llm.ray_executor import make_executor
from ttlab.discover.sandbox import Job, Limits

OK = "import numpy as np\ndef solve(parent, budget_s, seed):\n    return np.asarray(parent) * 0 + seed\n"
BAD = "def solve(parent, budget_s, seed):\n    raise ValueError('nope')\n"


def test_ray_executor_runs_programs_in_the_sandbox_and_reports_failures():
    ex = make_executor("ray", 2, Limits(wall_s=20), ray_cpus_per_task=1)
    try:
        futs = [ex.submit(Job(OK, np.ones(3), seed=s)) for s in (1, 2)] + [ex.submit(Job(BAD, np.ones(3)))]
        res = [f.result(timeout=120) for f in futs]
    finally:
        ex.close()
    assert res[0].ok and np.array_equal(res[0].output, np.full(3, 1.0))
    assert res[1].ok and np.array_equal(res[1].output, np.full(3, 2.0))
    assert not res[2].ok and "nope" in res[2].reason
