"""Reliability suite wiring: the budget (bounded or long), served apps, and the figures table.

``make test`` runs the bounded budget. ``make reliability`` runs
``pytest tests/reliability --reliability-long`` (or set ``FUSION_RELIABILITY_LONG=1``)
and ends with the figures table, also written as JSON to ``--reliability-figures``
(or ``FUSION_RELIABILITY_FIGURES``; default ``.pytest_cache/fusion-nb-reliability.json``
under the rootdir) so two runs can be compared:
``python tests/reliability/reliability_support.py before.json after.json``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from reliability_served import ThreadServed, thread_served
from reliability_support import FIGURES, FIGURES_ENV, Budget, long_budget, option

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    """Options exist when this directory is on the command line (``pytest tests/reliability``)."""
    group = parser.getgroup("reliability")
    group.addoption("--reliability-long", action="store_true", help="run the long reliability budget")
    group.addoption("--reliability-figures", default=None, help="where to write the figures JSON")


def _long(config: pytest.Config) -> bool:
    return long_budget(config)


def _figures_path(config: pytest.Config) -> Path:
    given = option(config, "--reliability-figures") or os.environ.get(FIGURES_ENV)
    if given:
        return Path(given)
    return Path(config.rootpath) / ".pytest_cache" / "fusion-nb-reliability.json"


@pytest.fixture(scope="session")
def budget(pytestconfig: pytest.Config) -> Budget:
    """The bounded budget, or the long one under ``--reliability-long``."""
    return Budget.choose(_long(pytestconfig))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Print the figures table and write it as JSON, when this run recorded any."""
    if FIGURES.empty:
        return
    path = _figures_path(config)
    FIGURES.notes.append(f"budget: {'long' if _long(config) else 'bounded'}")
    FIGURES.write(path)
    for line in FIGURES.table().splitlines():
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"figures written to {path}")


@pytest.fixture(scope="module")
def served() -> Iterator[ThreadServed]:
    """One served app per module: bad inputs must not disturb the next case (that is the point)."""
    with thread_served(request_state_ttl=600) as s:
        yield s
