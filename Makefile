# Every target that needs the virtual environment creates it first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two installs: what `make run` needs (the package), and the test / lint tools on top.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
export JAX_COMPILATION_CACHE_DIR ?= $(CURDIR)/.cache/jax
# MUJOCO_GL is left to the process: unset, the tests and the launcher's image / video paths
# pick osmesa or egl (envs/pixels.py default_mujoco_gl); scripts/install_system_gl.sh puts
# libOSMesa on the machine (apt-get, as root) when it is missing.

.PHONY: install run test lint format bench clean

$(RUN_STAMP): pyproject.toml Makefile
	sh scripts/install_system_gl.sh
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(RUN_STAMP)
	$(BIN)/python -m launcher agent=tdmpc2 env=pendulum protocol=quick

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup --durations=15

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python benchmarks/env_throughput.py

clean:
	rm -rf $(VENV) .cache .pytest_cache
