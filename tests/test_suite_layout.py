"""The suite's own layout: test modules are imported by basename (no ``__init__.py``), so two
with one name stop collection for the whole run ("import file mismatch")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent


def test_no_two_test_modules_share_a_name() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py") if "node_modules" not in path.parts)
    assert [name for name, count in names.items() if count > 1] == []
