"""Every public symbol of fusion-nb has a docstring.

The public surface (``__all__`` of fusion_nb, fusion_nb.engine, fusion_nb.mcp, fusion_nb.notebook
and fusion_nb.widgets, with the public methods of their classes) is collected by
scripts/api_report.py, so this test and the gate's before/after table count the same things.
The collector itself is tested on a small package written here, so that a collector that
finds nothing cannot make the real test pass.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_api_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_report", ROOT / "scripts" / "api_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["api_report"] = module  # dataclasses resolve their module while the class is built
    spec.loader.exec_module(module)
    return module


api_report = load_api_report()

FAKE = "gate_fake_api"
FAKE_SOURCE = '''
"""A package with one of each case the collector must judge."""

import dataclasses
import json
from typing import Any

__all__ = ["Base", "Child", "Record", "Encoder", "documented", "bare", "thing", "LIMIT"]

LIMIT = 3


def documented(x: Any) -> Any:
    """Has a docstring."""


def bare(x: int) -> int:
    return x


class Base:
    """A seam."""

    def ask(self) -> None:
        """The contract every channel follows."""

    def undocumented_helper(self) -> None:
        pass

    def _private(self) -> None:
        pass

    @property
    def size(self) -> int:
        return 1


class Child(Base):
    """Overrides the seam without repeating its contract."""

    def ask(self) -> None:
        pass


@dataclasses.dataclass
class Record:
    value: int


class Encoder(json.JSONEncoder):
    """Overrides a third-party method: its docstring is not ours."""

    def default(self, o: Any) -> Any:
        return str(o)


class _Thing:
    """The class of an exported instance."""

    def make(self) -> None:
        pass


thing = _Thing()
'''


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / FAKE).mkdir()
    (tmp_path / FAKE / "__init__.py").write_text(textwrap.dedent(FAKE_SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield FAKE
    sys.modules.pop(FAKE, None)


def test_the_collector_flags_exactly_the_symbols_without_a_docstring_of_their_own(fake_package: str) -> None:
    symbols = api_report.public_symbols((fake_package,), package=fake_package)
    missing = {s.name for s in api_report.undocumented(symbols, package=fake_package)}
    assert missing == {
        f"{FAKE}.bare",
        f"{FAKE}.Base.undocumented_helper",
        f"{FAKE}.Base.size",
        f"{FAKE}.Record",  # the docstring @dataclass generates does not count
        f"{FAKE}.Encoder.default",  # json.JSONEncoder's docstring is not our contract
        f"{FAKE}.thing.make",
    }
    names = {s.name for s in symbols}
    assert f"{FAKE}.Child.ask" in names  # collected, and documented by the contract it overrides
    assert f"{FAKE}.LIMIT" not in names  # a constant has no docstring of its own
    assert not any("_private" in name for name in names)


def test_the_collector_counts_each_annotation_mentioning_any(fake_package: str) -> None:
    symbols = api_report.public_symbols((fake_package,), package=fake_package)
    assert sorted(api_report.any_in_signatures(symbols)) == [
        f"{FAKE}.Encoder.default -> Any",
        f"{FAKE}.Encoder.default(o: Any)",
        f"{FAKE}.documented -> Any",
        f"{FAKE}.documented(x: Any)",
    ]


def test_the_collector_sees_the_whole_public_surface() -> None:
    names = {s.name for s in api_report.public_symbols()}
    for module in api_report.PUBLIC_MODULES:
        assert module in names
    for expected in ("fusion_nb.Fusion", "fusion_nb.engine.InputChannel.ask", "fusion_nb.ask.string"):
        assert expected in names


def test_every_public_symbol_has_a_docstring() -> None:
    missing = api_report.undocumented(api_report.public_symbols())
    if missing:
        listing = "\n".join(f"  {s.kind:<8} {s.name}" for s in missing)
        pytest.fail(f"{len(missing)} public symbols have no docstring:\n{listing}", pytrace=False)


def test_the_facade_serves_every_option_of_the_mcp_layer():
    """``Fusion.http_app`` / ``mcp_server`` and ``fusion_nb.mcp``'s functions take the options' fields, each
    as a keyword with its default; they drifted before (``max_sessions`` was missing), so both sides are
    checked against the one definition (``HttpOptions``, ``ServerOptions``), not only against each other."""
    import dataclasses
    import inspect

    import fusion_nb
    import fusion_nb.mcp
    from fusion_nb.mcp.options import HttpOptions, ServerOptions

    for facade, layer, options in (
        (fusion_nb.Fusion.http_app, fusion_nb.mcp.http_app, HttpOptions),
        (fusion_nb.Fusion.mcp_server, fusion_nb.mcp.mcp_server, ServerOptions),
        (None, fusion_nb.mcp.serve_stdio, ServerOptions),
    ):
        fields = [(f.name, inspect.Parameter.KEYWORD_ONLY, f.default) for f in dataclasses.fields(options) if f.init]
        assert len(fields) > 3, options
        for function in (facade, layer):
            if function is not None:
                taken = list(inspect.signature(function).parameters.values())[1:]  # self / app
                assert [(p.name, p.kind, p.default) for p in taken] == fields, function
    app = fusion_nb.Fusion("parity")
    assert (
        app.http_app(token="t" * 32, max_sessions=5).options
        == fusion_nb.mcp.http_app(app, token="t" * 32, max_sessions=5).options
    )
    with pytest.raises(TypeError, match="max_session"):
        app.http_app(max_session=5)  # type: ignore[call-arg]
