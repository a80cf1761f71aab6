"""Sandbox overhead of the working tree's sandbox against another revision's, measured in ONE run.

"before" is the sandbox at git revision --base (every src/ttlab/discover/sandbox*.py of that revision,
extracted into a temp dir and imported from there; default `main`, the sandbox this tree changes);
"after" is the working tree's (minimal read-only root, seccomp without Unix sockets, SysV IPC or execve).
Both pools run side by side and are measured in alternating blocks so the machine's load (shared,
2 cores) hits both alike. A trivial numpy program is timed end to end (submit -> parsed SandboxResult).
`confine_cost` times the layers alone in a process shaped like a runner: fork + the per-run layers of
the host-tree fallback vs fork + the per-run layers inside the minimal root, and the one-time build of
that root.

Prints ONE JSON line last (also written to --out, e.g. benchmarks/results/discover_sandbox/discover_sandbox.json):
p50/p95 latency and evaluations/s of each, the after/before ratios, the isolation layers active.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ttlab.discover.sandbox import Job, Limits, SandboxPool

TRIVIAL = "import numpy as np\ndef solve(parent, budget_s, seed):\n    return np.full(16, 0.5)\n"
PY_C = "import numpy as np; np.save('/dev/null', np.full(16, 0.5))"
REPO = Path(__file__).resolve().parents[1]


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, q))


def load_before(base: str, tmp: str):
    """The sandbox of revision `base`, from git, importable on its own (its runner and layers beside it)."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", base, "src/ttlab/discover/"],
                           check=True, capture_output=True, text=True).stdout.split()
    for path in [n for n in names if Path(n).name.startswith("sandbox") and n.endswith(".py")]:
        src = subprocess.run(["git", "-C", str(REPO), "show", f"{base}:{path}"], check=True,
                             capture_output=True, text=True).stdout
        Path(tmp, Path(path).name).write_text(src)
    spec = importlib.util.spec_from_file_location("sandbox_before", Path(tmp, "sandbox.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sandbox_before"] = mod
    spec.loader.exec_module(mod)
    return mod


def rev_parse(rev: str) -> str:
    """The commit `rev` names in this checkout ('' when it names none)."""
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", rev + "^{commit}"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def latency(pool, job, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = pool.submit(job).result(timeout=120)
        out.append(time.perf_counter() - t0)
        assert r.ok, r.reason
    return out


def throughput(pool, job, n: int) -> float:
    t0 = time.perf_counter()
    futs = [pool.submit(job) for _ in range(n)]
    assert all(f.result(timeout=300).ok for f in futs)
    return n / (time.perf_counter() - t0)


def fork_ms(fn, n: int = 40) -> float:
    """Median ms of fork -> fn() in the child -> exit -> reap."""
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            try:
                fn()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts) * 1000.0)


def confine_cost() -> dict:
    """The per-run cost of the confinement layers alone, measured in a fresh process shaped like a runner
    (numpy + scipy imported; fork cost grows with the parent's mappings). Needs root on Linux x86_64."""
    out = subprocess.run([sys.executable, __file__, "--confine-cost-only"], capture_output=True, text=True, timeout=300)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": out.stderr[-300:]}


def _confine_cost_here() -> dict:
    import scipy.optimize  # noqa: F401  (the runner's preload, so fork copies a runner-sized process)

    from ttlab.discover import sandbox_confine as c

    def host_tree_layers() -> None:
        c.private_mounts(64)
        c.readonly_root()
        c.no_new_privs()
        c.install_seccomp()

    def view_layers() -> None:
        c.private_mounts(64, in_view=True)
        c.no_new_privs()
        c.install_seccomp()

    if any(c.probe().values()):
        return {}
    out = {"fork_only_ms": fork_ms(lambda: None), "fork_plus_host_tree_layers_ms": fork_ms(host_tree_layers)}
    t0 = time.perf_counter()
    c.build_view(c.view_paths())  # this process is pivoted from here on: nothing after it needs the host
    out["view_build_ms"] = (time.perf_counter() - t0) * 1000.0
    out["fork_plus_view_layers_ms"] = fork_ms(view_layers)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=200, help="programs timed per side for latency")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--base", default="", help="git revision whose sandbox is the 'before' side (default: main "
                    "when the clone has it, else HEAD; the JSON names the commit)")
    ap.add_argument("--out", default="", help="also write the JSON line to this file")
    ap.add_argument("--confine-cost-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.confine_cost_only:
        print(json.dumps(_confine_cost_here()))
        return
    t_start = time.time()
    load0 = os.getloadavg()
    args.base = args.base or ("main" if rev_parse("main") else "HEAD")
    base_commit = rev_parse(args.base)
    if not base_commit:
        raise SystemExit(f"discover_sandbox: --base {args.base!r} is not a git revision of {REPO}")
    with tempfile.TemporaryDirectory() as tmp:
        before = load_before(args.base, tmp)
        lim_b, lim_a = before.Limits(wall_s=30.0), Limits(wall_s=30.0)
        pb = before.SandboxPool(args.workers, lim_b)
        pa = SandboxPool(args.workers, lim_a)
        try:
            jb, ja = before.Job(TRIVIAL), Job(TRIVIAL)
            latency(pb, jb, 4), latency(pa, ja, 4)  # warm up
            lat_b, lat_a, eps_b, eps_a = [], [], [], []
            block = 10
            for _ in range(max(1, args.programs // block)):
                lat_b += latency(pb, jb, block)
                lat_a += latency(pa, ja, block)
            for _ in range(5):
                eps_b.append(throughput(pb, jb, 30))
                eps_a.append(throughput(pa, ja, 30))
            caps = pa.caps
        finally:
            pb.close()
            pa.close()

    def fresh() -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", PY_C], check=True, timeout=60, capture_output=True,
                       env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
        return time.perf_counter() - t0

    fresh_lat = [fresh() for _ in range(15)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as ex:
        list(ex.map(lambda _: fresh(), range(15)))
    fresh_eps = 15 / (time.perf_counter() - t0)
    cost = confine_cost()
    commit = rev_parse("HEAD")
    dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"], capture_output=True,
                                text=True).stdout.strip())
    out = {
        "bench": "discover_sandbox", "programs_per_side": len(lat_a), "workers": args.workers, "base": args.base,
        "base_commit": base_commit,
        "command": "python benchmarks/discover_sandbox.py " + " ".join(sys.argv[1:]),
        "before_p50_ms": pct(lat_b, 50), "before_p95_ms": pct(lat_b, 95),
        "after_p50_ms": pct(lat_a, 50), "after_p95_ms": pct(lat_a, 95),
        "after_over_before_p50": pct(lat_a, 50) / pct(lat_b, 50),
        "before_evals_per_s": float(np.median(eps_b)), "after_evals_per_s": float(np.median(eps_a)),
        "after_over_before_evals_per_s": float(np.median(eps_a) / np.median(eps_b)),
        "fresh_python_c_p50_ms": pct(fresh_lat, 50), "fresh_python_c_evals_per_s": fresh_eps,
        "after_p50_speedup_vs_fresh": pct(fresh_lat, 50) / pct(lat_a, 50),
        "confine_cost": cost,
        "isolation": {k: bool(caps.get(k)) for k in ("subreaper", "net_isolated", "uid", "mountns", "fsview",
                                                      "readonly_root", "seccomp", "no_new_privs")},
        "missing_layers": caps.get("missing", {}),
        "commit": commit, "src_dirty": dirty, "nproc": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(),
        "wall_s": time.time() - t_start,
    }
    line = json.dumps(out)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
