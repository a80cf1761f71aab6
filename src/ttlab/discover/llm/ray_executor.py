"""Where sandbox evaluations run: the local pool (default) or Ray tasks across machines.

Both executors expose `submit(job) -> concurrent.futures.Future[SandboxResult]` and `close()`, so the
trainer never knows which one it has. The Ray executor runs each program as a Ray task reserving
`cpus_per_task` CPUs (`num_cpus=N`), inside the same hard sandbox (`sandbox.run_program`, a fresh
runner per task) on whichever node Ray places it. The worker sends back plain data (status strings and
the NumPy array, which Ray ships natively); the driver rebuilds the `SandboxResult` and the TRAINER
verifies it, so every score is still recomputed on the driver from the returned construction.

Ray's dashboard is bound to loopback (`dashboard_host=127.0.0.1`) when this process starts Ray; when
joining an existing cluster (`--ray-address host:6379`) the head was started by `ray start --head`,
which must be given `--dashboard-host 127.0.0.1` there (the README shows the command).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from typing import Any

from ttlab.discover.sandbox import Job, Limits, SandboxPool, SandboxResult, run_program


def _run_job_plain(job_fields: dict[str, Any], limits_fields: dict[str, Any]) -> dict[str, Any]:
    """Body of one Ray task: run the program in the sandbox, hand back plain fields (no custom classes)."""
    res = run_program(job_fields["code"], parent=job_fields["parent"], entry=job_fields["entry"],
                      budget_s=job_fields["budget_s"], seed=job_fields["seed"], limits=Limits(**limits_fields))
    return {f.name: getattr(res, f.name) for f in dataclasses.fields(res)}


class LocalExecutor:
    """The bounded local `SandboxPool` (pre-forked runners on this machine)."""

    def __init__(self, workers: int, limits: Limits):
        self.pool = SandboxPool(workers=workers, limits=limits)

    def submit(self, job: Job) -> Future:
        return self.pool.submit(job)

    def close(self) -> None:
        self.pool.close()


class RayExecutor:
    """Sandbox runs as Ray tasks, each pinned to `cpus_per_task` CPUs."""

    def __init__(self, address: str, cpus_per_task: int, limits: Limits, num_cpus: int | None = None):
        try:
            import ray  # deferred on purpose: a few seconds to import, and only --executor ray uses it
        except ImportError as e:
            raise RuntimeError("--executor ray needs the ray package: pip install 'ttlab[discover]'") from e
        if cpus_per_task < 1:
            raise ValueError(f"--ray-cpus-per-task must be >= 1, got {cpus_per_task}")
        self.ray = ray
        self.limits = limits
        self._started = False
        if not ray.is_initialized():
            kw: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False}
            if address:
                kw["address"] = address
            else:
                kw.update(num_cpus=num_cpus, include_dashboard=False, dashboard_host="127.0.0.1")
            try:
                ray.init(**kw)
            except ConnectionError as e:
                raise RuntimeError(f"--ray-address {address!r}: cannot connect to a Ray cluster ({e})") from e
            self._started = True
        self._task = ray.remote(num_cpus=cpus_per_task, max_retries=0)(_run_job_plain)

    def submit(self, job: Job) -> Future:
        job_fields = {"code": job.code, "parent": job.parent, "entry": job.entry, "budget_s": job.budget_s,
                      "seed": job.seed}
        ref = self._task.remote(job_fields, dataclasses.asdict(self.limits))
        out: Future = Future()

        def done(f: Future) -> None:
            try:
                out.set_result(SandboxResult(**f.result()))
            except Exception as e:  # a lost node, a killed worker: the sample fails, the step goes on
                out.set_result(SandboxResult(ok=False, status="sandbox_error", reason=f"ray task failed: {e}"[:500]))

        ref.future().add_done_callback(done)
        return out

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()


def make_executor(kind: str, workers: int, limits: Limits, ray_address: str = "",
                  ray_cpus_per_task: int = 1) -> LocalExecutor | RayExecutor:
    """`--executor local|ray` -> an executor."""
    if kind == "local":
        return LocalExecutor(workers, limits)
    if kind == "ray":
        return RayExecutor(ray_address, ray_cpus_per_task, limits, num_cpus=None if ray_address else workers)
    raise ValueError(f"--executor {kind!r}: expected 'local' or 'ray'")
