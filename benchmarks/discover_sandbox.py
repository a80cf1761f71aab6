"""Sandbox overhead: a trivial numpy program via the pre-forked pool vs a fresh `python -c` per program.

Prints ONE JSON line: p50/p95 per-program latency of each path, and evaluations/s with 2 parallel workers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ttlab.discover.sandbox import Job, Limits, SandboxPool

TRIVIAL = "import numpy as np\ndef solve(parent, budget_s, seed):\n    return np.full(16, 0.5)\n"
PY_C = "import numpy as np; np.save('/dev/null', np.full(16, 0.5))"


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, q))


def main(n: int = 60, workers: int = 2) -> None:
    lim = Limits(wall_s=30.0)
    with SandboxPool(workers, lim) as pool:
        pool.map([Job(TRIVIAL)] * 4)  # warm up
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            r = pool.submit(Job(TRIVIAL)).result()
            lat.append(time.perf_counter() - t0)
            assert r.ok
        t0 = time.perf_counter()
        rs = pool.map([Job(TRIVIAL)] * n)
        pool_eps = n / (time.perf_counter() - t0)
        assert all(r.ok for r in rs)
        caps = pool.caps

    def fresh() -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", PY_C], check=True, timeout=60, capture_output=True,
                       env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
        return time.perf_counter() - t0

    m = max(10, n // 3)
    fresh_lat = [fresh() for _ in range(m)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(lambda _: fresh(), range(m)))
    fresh_eps = m / (time.perf_counter() - t0)
    out = {
        "bench": "discover_sandbox", "programs": n, "workers": workers,
        "prefork_p50_ms": pct(lat, 50), "prefork_p95_ms": pct(lat, 95),
        "fresh_python_c_p50_ms": pct(fresh_lat, 50), "fresh_python_c_p95_ms": pct(fresh_lat, 95),
        "prefork_evals_per_s": pool_eps, "fresh_python_c_evals_per_s": fresh_eps,
        "p50_speedup": pct(fresh_lat, 50) / pct(lat, 50),
        "isolation": {k: caps.get(k) is not None and caps.get(k) is not False for k in ("subreaper", "net_isolated", "uid")},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
