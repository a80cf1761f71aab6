"""Discovery tasks. `get_task(name)` builds one; `TASKS` lists the names."""

from __future__ import annotations

from collections.abc import Callable

from ttlab.discover.tasks.base import Task, VerifyResult

TASKS: dict[str, Callable[[], Task]] = {}


def _register() -> None:
    from ttlab.discover.tasks.erdos import ErdosTask

    TASKS["erdos"] = ErdosTask
    try:
        from ttlab.discover.tasks.autocorrelation import AC1Task, AC2Task
        from ttlab.discover.tasks.circle_packing import CirclePackingTask

        TASKS["ac1"] = AC1Task
        TASKS["ac2"] = AC2Task
        TASKS["circle26"] = lambda: CirclePackingTask(26)
        TASKS["circle32"] = lambda: CirclePackingTask(32)
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("ttlab.discover.tasks"):
            raise


def get_task(name: str) -> Task:
    if not TASKS:
        _register()
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
    return TASKS[name]()


__all__ = ["TASKS", "Task", "VerifyResult", "get_task"]
