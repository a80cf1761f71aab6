"""Where the shared sample data lives, found one way everywhere (package, tests, benchmarks, demos).

    $TTLAB_SHARED_DATA      when set (non-empty), and then only there;
    <repo>/../shared/data   otherwise: the `shared/data` folder beside the source checkout.

    shared_data_dir()                              # Path, or SharedDataMissing naming both places
    shared_data_file("erdos_reference.json")       # Path to a file in it, same error when absent
    shared_data_file("x.json", required=False)     # None when absent (tests skip on it)

It holds the real samples the project is checked against (the CARLA Town02 scene in Waymo format, the
published Erdős constructions). Nothing here downloads anything.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "TTLAB_SHARED_DATA"
BESIDE_REPO = Path("..") / "shared" / "data"


class SharedDataMissing(FileNotFoundError):
    """The shared data folder (or a file in it) is not where it is looked for."""


def repo_root() -> Path | None:
    """The source checkout this package runs from (src layout), or None for an installed copy."""
    root = Path(__file__).resolve().parents[3]  # src/ttlab/common/data.py -> the checkout
    return root if (root / "pyproject.toml").is_file() and (root / "src" / "ttlab").is_dir() else None


def _places() -> tuple[Path | None, Path | None]:
    """(the $TTLAB_SHARED_DATA folder or None when unset, the folder beside the checkout or None)."""
    env = os.environ.get(ENV_VAR, "")
    root = repo_root()
    return (Path(env).expanduser() if env else None), ((root.parent / "shared" / "data") if root else None)


def _where() -> str:
    """Both places, and which one was looked in (for an error message)."""
    env, beside = _places()
    second = f"{BESIDE_REPO} relative to the repo root" + (f" ({beside})" if beside is not None else
                                                            " (none: not running from a source checkout)")
    if env is not None:
        return f"${ENV_VAR}={env} is not a folder ({second} is looked in only when {ENV_VAR} is unset)"
    return f"${ENV_VAR} is unset and {second} is not a folder"


def shared_data_dir() -> Path:
    """The shared data folder: $TTLAB_SHARED_DATA when set, else ../shared/data beside the checkout."""
    env, beside = _places()
    path = env if env is not None else beside
    if path is None or not path.is_dir():
        raise SharedDataMissing(f"shared data folder not found: {_where()}; set {ENV_VAR} to the folder holding "
                                "carla_town02_womd.json and erdos_reference.json")
    return path


def shared_data_file(name: str, required: bool = True) -> Path | None:
    """`name` in the shared data folder; when absent: SharedDataMissing, or None if not `required`."""
    try:
        path = shared_data_dir() / name
    except SharedDataMissing:
        if required:
            raise
        return None
    if path.is_file():
        return path
    if required:
        raise SharedDataMissing(f"shared data file {name!r} not found in {path.parent} (${ENV_VAR}"
                                f"{' is set' if _places()[0] is not None else ' is unset'})")
    return None


def repo_relative(path: str | Path) -> str:
    """`path` relative to the repo root when it lies inside the checkout, else as given: what a result file
    records, so that it names no path of the machine it ran on."""
    root, p = repo_root(), Path(path)
    if root is not None and p.is_absolute():
        try:
            return str(p.resolve().relative_to(root))
        except ValueError:
            pass
    return str(path)


SHARED_PREFIX = "$" + ENV_VAR + "/"
"""How a portable path names a file of the shared data folder (in presets, checkpoints and result files)."""


def expand_shared(path: str) -> str:
    """`$TTLAB_SHARED_DATA/x` -> the located shared data folder's x (whether or not the variable is set)."""
    if path.startswith(SHARED_PREFIX):
        return str(shared_data_dir() / path[len(SHARED_PREFIX):])
    return path
