# Two entry points: `make lab` and `make test`. Each sets up .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
LAB_STAMP := $(VENV)/.lab-stamp

.PHONY: lab notebooks test test-fast check bench clean chromium nginx redis interop conformance reliability

# The venv, from a Python that requires-python accepts (3.11 or newer).
$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || \
	  { echo "fusion-nb needs Python 3.11 or newer; $(PYTHON) is not: run make PYTHON=python3.12 ..."; exit 1; }
	$(PYTHON) -m venv $(VENV)

# An editable install skips the wheel's data files: the server extension's enabling file is copied
# into the venv's etc/jupyter by hand (the wheel ships it; tests/test_packaging.py checks both).
SERVER_CONFIG := jupyter-config/jupyter_server_config.d/fusion_nb.json
ENABLE_SERVER_EXTENSION := install -D -m 644 $(SERVER_CONFIG) $(VENV)/etc/jupyter/jupyter_server_config.d/fusion_nb.json

$(STAMP): pyproject.toml $(SERVER_CONFIG) | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'
	$(ENABLE_SERVER_EXTENSION)
	touch $(STAMP)

# Running the notebooks needs the package, JupyterLab and Notebook 7 only (the `lab` extra), not the test tools.
$(LAB_STAMP): pyproject.toml $(SERVER_CONFIG) | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[lab]'
	$(ENABLE_SERVER_EXTENSION)
	touch $(LAB_STAMP)

# Opens notebook 01 (not the launcher); `jupyter notebook` (Notebook 7) works on the same venv.
# The project's JupyterLab settings (jupyterlab-settings/overrides.json): no "Jupyter news?" popup.
LAB_FIRST := notebooks/01-quickstart.ipynb
LAB_SETTINGS := jupyterlab-settings
lab: $(LAB_STAMP)
	@echo "fusion-nb is $(VENV)/bin/fusion-nb (or run: . $(VENV)/bin/activate)"
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks --LabApp.app_settings_dir=$(CURDIR)/$(LAB_SETTINGS) $(LAB_FIRST) $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# Re-run every teaching notebook top to bottom, storing their outputs (notebooks/README.md).
notebooks: $(STAMP)
	$(PY) scripts/notebooks.py execute

# The browser test drives Debian's chromium (Playwright cannot download browsers here).
chromium:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "chromium is missing: install Debian's chromium package for the browser test"

# The scale-out tests put Debian's nginx in front of two workers.
nginx:
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; } || \
	  echo "nginx is missing: install Debian's nginx package for the scale-out tests"

# The task-store tests share tasks across workers through Debian's redis-server (each test starts its own on loopback).
redis:
	@command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } || \
	  echo "redis-server is missing: install Debian's redis-server package for the task-store tests"

# Real MCP clients nobody here wrote (TypeScript SDK, Inspector CLI) and the MCPB CLI, pinned in tests/interop/package.json.
INTEROP_STAMP := tests/interop/node_modules/.installed-stamp
$(INTEROP_STAMP): tests/interop/package.json tests/interop/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: the interop tests need Node 20 and npm"; exit 1; }
	npm install --prefix tests/interop --no-audit --no-fund --loglevel=error  # (npm ci trips over a Windows-only optional dependency)
	touch $(INTEROP_STAMP)
interop: $(INTEROP_STAMP)

# The official MCP conformance suite and a Node 22 for it (the npm package `node`, project-local:
# the system's Node 20 stays), pinned in tests/conformance/package.json.
CONFORMANCE_STAMP := tests/conformance/node_modules/.installed-stamp
$(CONFORMANCE_STAMP): tests/conformance/package.json tests/conformance/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: the conformance suite is installed with npm"; exit 1; }
	npm ci --prefix tests/conformance --no-audit --no-fund --loglevel=error
	touch $(CONFORMANCE_STAMP)
conformance: $(CONFORMANCE_STAMP)

# The notebooks are tests too (nbval, outputs compared after tests/notebooks_support/sanitize.cfg).
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/notebooks_support/sanitize.cfg --nbval-cell-timeout=120

# Coverage of this process's fusion_nb (not of the servers and kernels it starts), printed once, never gated.
test: $(STAMP) chromium nginx redis interop conformance
	$(PY) -m pytest $(NBVAL) --cov --cov-report=term

# No kernel, no browser, no notebook: nbval is not even loaded.
test-fast: $(STAMP)
	$(PY) -m pytest -p no:nbval -m "not kernel and not browser" tests

# The reliability suite with its long budget; ends with the figures table (JSON: FIGURES=path, else .pytest_cache).
reliability: $(STAMP)
	$(PY) -m pytest tests/reliability -m reliability --reliability-long $(if $(FIGURES),--reliability-figures=$(FIGURES))

# The engineering gate: lint, format and types (strict on the engine).
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) scripts/notebooks.py check

bench: $(STAMP)
	$(PY) benchmarks/engine.py

clean:
	rm -rf $(VENV) build *.egg-info
