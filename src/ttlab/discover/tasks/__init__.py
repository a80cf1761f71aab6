"""Discovery tasks. `get_task(name)` builds one; `TASKS` lists the names."""

from __future__ import annotations

from collections.abc import Callable

from ttlab.discover.tasks.autocorrelation import AC1Task, AC2Task
from ttlab.discover.tasks.base import Task, VerifyResult
from ttlab.discover.tasks.circle_packing import CirclePackingTask
from ttlab.discover.tasks.erdos import ErdosTask

TASKS: dict[str, Callable[[], Task]] = {
    "erdos": ErdosTask,
    "ac1": AC1Task,
    "ac2": AC2Task,
    "circle26": lambda: CirclePackingTask(26),
    "circle32": lambda: CirclePackingTask(32),
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
    return TASKS[name]()


__all__ = ["TASKS", "Task", "VerifyResult", "get_task"]
