# Two entry points: `make lab` and `make test`. Each sets up .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: lab test test-fast check bench clean chromium reliability

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'
	touch $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# The browser test drives Debian's chromium (Playwright cannot download browsers here).
chromium:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "chromium is missing: install Debian's chromium package for the browser test"

test: $(STAMP) chromium
	$(PY) -m pytest

test-fast: $(STAMP)
	$(PY) -m pytest -m "not kernel and not browser"

# The reliability suite with its long budget; ends with the figures table (JSON: FIGURES=path, else .pytest_cache).
reliability: $(STAMP)
	$(PY) -m pytest tests/reliability -m reliability --reliability-long $(if $(FIGURES),--reliability-figures=$(FIGURES))

# The engineering gate: lint, format and types (strict on the engine).
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/engine.py

clean:
	rm -rf $(VENV) build *.egg-info
