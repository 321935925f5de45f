# spabench: set-up and the two quickstart commands (`make demo`, `make test`), plus `make bench`.
# Finds a Python 3.12 by itself (PATH, pyenv, common prefixes), makes .venv, installs the project.

SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.spabench-installed
EXTRAS ?= bench,sim,console,postgres,dev
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

# The first Python 3.12 we can find: python3.12 on PATH, then pyenv's, then usual prefixes.
PYTHON312 ?= $(shell for c in python3.12 \
	  $$(command -v pyenv >/dev/null 2>&1 && echo $$(pyenv root)/versions/3.12*/bin/python3.12) \
	  $$HOME/.pyenv/versions/3.12*/bin/python3.12 /root/.pyenv/versions/3.12*/bin/python3.12 \
	  /usr/local/bin/python3.12 /usr/bin/python3.12 /opt/python*/bin/python3.12; do \
	  if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; \
	  then command -v $$c; break; fi; done)

.PHONY: install demo test test-fast lint bench egl postgresql chromium clean help

help:
	@echo "make demo   - install, then plan, run and report a small campaign on the MuJoCo twin"
	@echo "make test   - install, then lint (ruff, mypy) and run the whole test suite"
	@echo "make test-fast - install, then run the quick subset (no sessions, browser or PostgreSQL)"
	@echo "make lint   - install, then ruff check . and mypy (src/spabench)"
	@echo "make bench  - install, then run the performance benchmarks (benchmarks/)"

$(STAMP): pyproject.toml
	@if [ -z "$(PYTHON312)" ]; then \
	  echo "error: no Python 3.12 found (LeRobot 0.6 needs it). Install one, e.g. 'pyenv install 3.12', or pass PYTHON312=/path/to/python3.12" >&2; exit 1; fi
	@echo "using $(PYTHON312)"
	@test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	@touch $(STAMP)

install: $(STAMP)

# Headless rendering for the twin needs Debian's EGL (Mesa llvmpipe). Installed only when missing.
egl:
	@if ! ldconfig -p 2>/dev/null | grep -q 'libEGL_mesa.so.0'; then \
	  echo "installing Debian EGL packages for headless MuJoCo rendering"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq libegl1 libegl-mesa0 libgl1-mesa-dri >/dev/null; \
	fi

# The shared-ledger tests and benchmark start a throwaway PostgreSQL server from Debian's binaries
# (and make its TLS certificate with openssl). Installed only when missing; no cluster is created
# for the system (create_main_cluster = false), the tests make their own in a temporary folder.
postgresql:
	@if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then \
	  echo "installing Debian's postgresql (server binaries for the tests' throwaway cluster)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then \
	    $$SUDO mkdir -p /etc/postgresql-common && echo "create_main_cluster = false" | $$SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null; fi; \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql openssl >/dev/null; \
	fi

# The console's browser tests drive Debian's Chromium through Playwright (no browser download).
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then \
	  echo "installing Debian chromium for the console's browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi

# `make demo out=DIR` passes out= on to `spabench demo` (default: demo-out/<timestamp>/)
demo: install egl
	$(VENV)/bin/spabench demo $(if $(out),'out=$(out)')

# ruff (pyflakes, bugbear, pyupgrade, simplify, isort) and mypy; configured in pyproject.toml.
lint: install
	@$(PY) -m ruff check . || { echo "make lint: ruff found the findings above ('ruff check --fix' fixes the safe ones)" >&2; exit 1; }
	@$(PY) -m mypy || { echo "make lint: mypy found the type errors above ([tool.mypy] in pyproject.toml)" >&2; exit 1; }

# lint first: a finding stops the run before the system packages and the suite
# The suite starts hundreds of Python processes (sessions, servers, encoders): the sources are compiled
# once here, so none of them compiles ~100 modules again where PYTHONDONTWRITEBYTECODE is set.
test: install lint egl postgresql chromium
	$(PY) -m compileall -q -j 2 src tests
	$(PY) -m pytest -q -n 2 --dist worksteal --durations=25

# The quick subset (markers in pyproject.toml): no subprocess sessions, reports or servers, no
# browser, no PostgreSQL. The twin's unit tests stay in, so it needs EGL.
test-fast: install egl
	$(PY) -m pytest -q -m "not slow and not browser and not postgres"

# BENCH_ARGS=--quick for short runs; results land in benchmarks/results/*.json (git-ignored).
BENCH_ARGS ?=
bench: install egl postgresql chromium
	@for b in benchmarks/[a-z]*.py; do echo "== $$b"; $(PY) $$b $(BENCH_ARGS) || exit 1; done

clean:
	rm -rf $(VENV) demo-out dist build src/spabench.egg-info .pytest_cache .mypy_cache .ruff_cache
