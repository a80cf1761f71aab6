"""Lightning's start-up messages that say nothing about a ttlab run, silenced by their exact text.

- "Found N module(s) in eval mode at the start of training": the world model's EMA copy lives in eval mode
  by design (it is never trained, only averaged into), so the warning fires on every run; the world model
  checks for any other module left in eval mode itself (`WorldModelModule.on_train_start`).
- "`isinstance(treespec, LeafSpec)` is deprecated": raised inside Lightning's own pytree helper on newer torch;
  nothing a user can change.
- the "Tip: ... litlogger" advert Lightning logs when no LitLogger is attached (ttlab logs to TensorBoard).

Every other warning and log line is kept.
"""

from __future__ import annotations

import logging
import warnings

_WARNINGS = (r"Found \d+ module\(s\) in eval mode at the start of training",
             r"`isinstance\(treespec, LeafSpec\)` is deprecated")
_LOG_NEEDLE = "litlogger"
_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning_utilities.core.rank_zero",
            "lightning.pytorch.trainer.connectors.logger_connector.logger_connector")


class _DropLitLoggerTip(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return _LOG_NEEDLE not in record.getMessage()


_FILTER = _DropLitLoggerTip()


def quiet_lightning() -> None:
    """Install the filters (idempotent)."""
    for pattern in _WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)
    for name in _LOGGERS:
        lg = logging.getLogger(name)
        if _FILTER not in lg.filters:
            lg.addFilter(_FILTER)
