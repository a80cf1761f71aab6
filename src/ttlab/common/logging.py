"""Metrics to TensorBoard (default) and W&B (behind a flag), console progress with rich."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ttlab.common.config import to_dict

console = Console(stderr=True)


class Logger:
    """Scalars/videos to TensorBoard under the run dir, mirrored to W&B when `wandb=True`.

    Values may be python numbers or 0-d tensors; tensors are read here, at the log interval, which
    is the one intended host sync of a training loop.
    """

    def __init__(self, run_dir: str | Path, wandb: bool = False, project: str = "ttlab", config: Any = None,
                 tensorboard: bool = True):
        self.run_dir = Path(run_dir)
        self.tb = None
        if tensorboard:
            # deferred on purpose: loads the tensorboard package (slow), only when TensorBoard logging is on
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=str(self.run_dir / "tb"))
        self.wb = None
        if wandb:
            try:
                import wandb as _wandb  # deferred on purpose: an optional extra (`ttlab[wandb]`)
            except ImportError as e:
                raise RuntimeError("--wandb needs the wandb package: pip install 'ttlab[wandb]'") from e
            self.wb = _wandb.init(project=project, dir=str(self.run_dir), name=self.run_dir.name,
                                  config=to_dict(config) if config is not None else None)

    @staticmethod
    def _num(v: Any) -> float:
        if hasattr(v, "item"):
            v = v.item()  # sync point: only at log intervals
        return float(v)

    def scalars(self, values: Mapping[str, Any], step: int) -> dict[str, float]:
        out = {k: self._num(v) for k, v in values.items()}
        if self.tb is not None:
            for k, v in out.items():
                if not math.isnan(v):
                    self.tb.add_scalar(k, v, step)
        if self.wb is not None:
            self.wb.log(out, step=step)
        return out

    def scalar(self, name: str, value: Any, step: int) -> float:
        return self.scalars({name: value}, step)[name]

    def video(self, name: str, frames: Any, step: int, fps: int = 10) -> None:
        """`frames`: uint8 or float tensor (N, T, C, H, W) as TensorBoard expects."""
        if self.tb is not None:
            self.tb.add_video(name, frames, step, fps=fps)
        if self.wb is not None:
            import wandb as _wandb  # optional extra, as above

            self.wb.log({name: _wandb.Video(frames.cpu().numpy(), fps=fps)}, step=step)

    def text(self, name: str, text: str, step: int) -> None:
        if self.tb is not None:
            self.tb.add_text(name, text, step)

    def flush(self) -> None:
        if self.tb is not None:
            self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wb is not None:
            self.wb.finish()


@contextlib.contextmanager
def progress(total: float | None, desc: str = "", disable: bool | None = None) -> Iterator[Any]:
    """A rich progress bar; `with progress(n, "train") as bar: bar.advance(k); bar.set(text="...")`."""
    if disable is None:
        disable = not sys.stderr.isatty()

    class _Bar:
        def __init__(self, p: Progress | None, task: Any):
            self.p, self.task, self.n = p, task, 0.0

        def advance(self, k: float = 1) -> None:
            self.n += k
            if self.p is not None:
                self.p.advance(self.task, k)

        def set(self, text: str = "", completed: float | None = None) -> None:
            if completed is not None:
                self.n = completed
            if self.p is not None:
                self.p.update(self.task, info=text, **({"completed": completed} if completed is not None else {}))

    if disable:
        yield _Bar(None, None)
        return
    cols = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TimeRemainingColumn(), TextColumn("{task.fields[info]}")]
    with Progress(*cols, console=console, transient=False) as p:
        task = p.add_task(desc, total=total, info="")
        yield _Bar(p, task)
