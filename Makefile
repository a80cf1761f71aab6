# ttlab: `make demo` and `make test` are the two commands; each sets itself up when .venv is missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# torch: the default pin resolves to the local CPU wheel on the dev/CI machines (pip find-links) and to
# PyPI's CUDA build on a Linux GPU machine. Override e.g.
#   make setup TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= all,dev
# llama-cpp-python builds from source: its multimodal library (unused here) is skipped, a minute of the build
CMAKE_ARGS ?=
PYTEST_ARGS ?=
# test workers (pytest-xdist): one per core, at most 4; TEST_WORKERS=0 runs the suite in this process
TEST_WORKERS ?= auto

.PHONY: setup demo test test-all bench lint format clean

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel
	$(PIP) install $(TORCH_SPEC)
	CMAKE_ARGS="-DLLAVA_BUILD=OFF $(CMAKE_ARGS)" $(PIP) install -e ".[$(EXTRAS)]"
	@touch $@

setup: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/ttlab demo

test: $(VENV)/.installed
	$(PY) -m pytest -m "not slow" -n $(TEST_WORKERS) --maxprocesses 4 $(PYTEST_ARGS)

test-all: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS) --maxprocesses 4 $(PYTEST_ARGS)

bench: $(VENV)/.installed
	$(PY) benchmarks/bench_all.py

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests benchmarks

format: $(VENV)/.installed
	$(VENV)/bin/ruff format src tests benchmarks

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
