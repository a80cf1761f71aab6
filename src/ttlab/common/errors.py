"""The CLI's error boundary: a user's mistake is one line on stderr and exit 2, never a traceback.

    raise UserError("--data /x: no such dataset")     # anywhere below a command
    ttlab wm train ...   ->   ttlab wm train: error: --data /x: no such dataset   (exit 2)

`UserError` marks an input the user can fix (a flag, a file, a preset name). At the boundary the
`ValueError` family (config validation, malformed scenario/dataset files) and missing or unreadable files
count as user errors too, since below a command they only ever come from its inputs. Every other exception
is a bug and keeps its traceback. `--debug` (anywhere on the command line) shows the traceback of a user
error as well.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence

USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError, FileExistsError,
)
EXIT_USAGE = 2


class UserError(ValueError):
    """An input the user can fix; the message names the flag, file or field and what is wrong with it."""


_debug = False


def set_debug(on: bool) -> None:
    global _debug
    _debug = on


def pop_debug(argv: Sequence[str]) -> tuple[bool, list[str]]:
    """(was `--debug` given, argv without it)."""
    rest = [a for a in argv if a != "--debug"]
    return len(rest) != len(argv), rest


def one_line(msg: object) -> str:
    """A message on one line: whitespace runs collapsed, box-drawing and ANSI colour codes removed."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(msg))
    text = re.sub(r"[\u2500-\u257f]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def describe(e: BaseException) -> str:
    """The user-facing text of an exception (an OSError names its file)."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return one_line(e) or type(e).__name__


def run_guarded(prog: str, fn: Callable[[], int | None]) -> int:
    """Call `fn`; a user error prints `<prog>: error: <message>` and returns 2 (re-raised with --debug)."""
    try:
        return int(fn() or 0)
    except SystemExit as e:  # argument parsing exits on --help
        return e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_USAGE)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as e:
        if _debug:
            raise
        print(f"{prog}: error: {describe(e)}", file=sys.stderr)
        return EXIT_USAGE
