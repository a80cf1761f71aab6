"""The shared data folder is found one way ($TTLAB_SHARED_DATA, else ../shared/data beside the checkout), its
absence is one clear error naming both places, and no path of a particular machine is written in the tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ttlab.common import data
from ttlab.common.data import SharedDataMissing, repo_relative, repo_root, shared_data_dir, shared_data_file

ROOT = Path(__file__).resolve().parents[2]
# an absolute path into a home, root's home or a machine's work area (a path of one machine, not of the project)
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|Users)/|[A-Za-z]:\\Users\\")
SCANNED = ("src", "tests", "benchmarks", "docs", "README.md", "Makefile", "pyproject.toml", ".ci")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache"}
TEXT = {".py", ".md", ".json", ".jsonl", ".toml", ".txt", ".csv", ".yaml", ".yml", ".c", ".h", ".cfg", ".sh", ""}


def test_the_env_var_wins_when_set(tmp_path, monkeypatch):
    (tmp_path / "erdos_reference.json").write_text("{}")
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    assert shared_data_dir() == tmp_path
    assert shared_data_file("erdos_reference.json") == tmp_path / "erdos_reference.json"
    assert shared_data_file("absent.json", required=False) is None
    with pytest.raises(SharedDataMissing, match=r"'absent.json' not found in .*TTLAB_SHARED_DATA is set"):
        shared_data_file("absent.json")


def test_a_missing_folder_names_both_places(tmp_path, monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(SharedDataMissing) as e:
        shared_data_dir()
    msg = str(e.value)
    assert "\n" not in msg and f"TTLAB_SHARED_DATA={tmp_path / 'nowhere'}" in msg
    assert "../shared/data relative to the repo root" in msg
    assert shared_data_file("erdos_reference.json", required=False) is None
    assert isinstance(e.value, FileNotFoundError)  # callers that skip on a missing file keep working


def test_unset_env_var_means_the_folder_beside_the_checkout(monkeypatch):
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    assert repo_root() == ROOT  # this test runs from the source checkout
    beside = ROOT.parent / "shared" / "data"
    if beside.is_dir():
        assert shared_data_dir() == beside
    else:
        with pytest.raises(SharedDataMissing, match=r"TTLAB_SHARED_DATA is unset and \.\./shared/data relative to the repo root"):
            shared_data_dir()


def test_an_empty_env_var_counts_as_unset(monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, "")
    env, beside = data._places()
    assert env is None and beside == ROOT.parent / "shared" / "data"


def test_repo_relative_strips_the_checkout():
    assert repo_relative(ROOT / "runs" / "x" / "tree.json") == str(Path("runs") / "x" / "tree.json")
    assert repo_relative("runs/x/tree.json") == "runs/x/tree.json"
    outside = Path(ROOT.anchor) / "elsewhere" / "f.json"
    assert repo_relative(outside) == str(outside)


def _scanned_files():
    for name in SCANNED:
        top = ROOT / name
        if top.is_file():
            yield top
        elif top.is_dir():
            for p in sorted(top.rglob("*")):
                if p.is_file() and p.suffix in TEXT and not SKIPPED_DIRS & set(p.relative_to(ROOT).parts):
                    yield p


def test_the_pattern_catches_machine_paths():
    hits = ["/" + "work/shared/data", "'/" + "root/.cache/x'", "/" + "home/me/ttlab", "C:\\" + "Users\\me"]
    misses = ["../shared/data", "~/.cache/ttlab", "https://github.com/org/work/tree", "runs/work/x", "/tmp/x.json"]
    assert all(MACHINE_PATH.search(s) for s in hits)
    assert not any(MACHINE_PATH.search(s) for s in misses)


def test_no_machine_path_in_the_tree():
    files = list(_scanned_files())
    assert len(files) > 100  # the scan reached the tree
    found = []
    for p in files:
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line):
                found.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()[:120]}")
    assert not found, "machine paths (use $TTLAB_SHARED_DATA / ttlab.common.data or a repo-relative path):\n" + \
        "\n".join(found)
