import logging
import warnings

from ttlab.common.lightning_quiet import quiet_lightning


def test_quiet_lightning_drops_only_the_named_messages(caplog):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_lightning()
        quiet_lightning()  # idempotent
        warnings.warn("Found 101 module(s) in eval mode at the start of training. This may lead to ...", stacklevel=1)
        warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated, use ...", DeprecationWarning, stacklevel=1)
        warnings.warn("Found a real problem", stacklevel=1)
    assert [str(w.message) for w in seen] == ["Found a real problem"]
    lg = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    assert sum(isinstance(f, logging.Filter) and type(f).__name__ == "_DropLitLoggerTip" for f in lg.filters) == 1
    with caplog.at_level(logging.INFO, logger="lightning.pytorch.utilities.rank_zero"):
        lg.info("💡 Tip: For seamless cloud logging ... try installing [litlogger](https://pypi.org/project/litlogger/)")
        lg.info("GPU available: False, used: False")
    assert [r.getMessage() for r in caplog.records] == ["GPU available: False, used: False"]
