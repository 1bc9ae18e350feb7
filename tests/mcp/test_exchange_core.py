"""Both transports share one dispatch context, one state machine, one era rule and one back channel.

A transport that grows its own copy fails here.

The copies drifted before (issue 45): ``7`` and ``"7"`` matched on stdio and not
over HTTP, a malformed answer was a sentence on one and a wait on the other. The
checks read the transport modules' source (``ast``), so they hold whatever a test
of behaviour happens to cover.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fusion_nb.mcp as mcp_package

MCP = Path(mcp_package.__file__).parent
TRANSPORTS = [
    "pipe.py",
    "pipe_reader.py",
    "pipe_writer.py",
    "streamable.py",
    "exchange.py",
    "sessions.py",
    "http.py",
    "stdio.py",
]
DISPATCH_CONTEXT = {"notify", "progress", "send_raw_request"}
"""The SDK's ``DispatchContext`` methods a request's context implements (``Outbound`` has the first and last)."""

ERA_NAMES = {
    "PROTOCOL_VERSION_META_KEY",
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "classify_inbound_request",
    "find_duplicated_routing_header",
    "validate_mcp_param_headers",
    "from_envelope",
}
"""What deciding a request's era takes: ``era`` alone uses them."""

BACK_CHANNEL_NAMES = {"token_urlsafe", "coerce_request_id", "fail_after", "REQUEST_TIMEOUT"}
"""What allocating a question's id, matching its answer and bounding its wait take: ``back_channel`` alone."""


def names_used(path: Path) -> set[str]:
    """Every name and attribute a module's code mentions (imports included)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
    return found


def existing(names: list[str]) -> list[Path]:
    return [MCP / name for name in names if (MCP / name).exists()]


def classes(path: Path) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)}


def methods(node: ast.ClassDef) -> set[str]:
    return {item.name for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_one_dispatch_context_serves_both_transports():
    """``exchange_core.Exchange`` is the only class in ``fusion_nb.mcp`` implementing the SDK's dispatch context
    (there were three: the pipe's, a POST's and a POSTed notification's)."""
    found = [
        f"{path.name}:{name}"
        for path in sorted(MCP.glob("*.py"))
        for name, node in classes(path).items()
        if methods(node) >= DISPATCH_CONTEXT
    ]
    assert found == ["exchange_core.py:Exchange"]


@pytest.mark.parametrize("path", existing(TRANSPORTS), ids=lambda path: path.name)
def test_no_transport_keeps_its_own_state_machine(path):
    """An exchange's phases and moves are ``exchange_core.ExchangeState``'s; no transport defines states of its own."""
    enums = [name for name, node in classes(path).items() if any("Enum" in ast.unparse(base) for base in node.bases)]
    assert enums == [] and "ExchangeState" not in classes(path), f"{path.name} keeps an exchange's state itself"


@pytest.mark.parametrize("path", existing(TRANSPORTS), ids=lambda path: path.name)
def test_no_transport_decides_the_era_itself(path):
    """The first request fixing the era, the 2026 envelope test, the other era's refusal, the ladder: ``era``."""
    assert not names_used(path) & ERA_NAMES, f"{path.name} decides a request's era; use fusion_nb.mcp.era"


@pytest.mark.parametrize("path", existing(TRANSPORTS), ids=lambda path: path.name)
def test_no_transport_keeps_its_own_back_channel(path):
    """Question ids, the ``7``/``"7"`` rule, the answer's shape and the wait's bound: ``back_channel``."""
    assert not names_used(path) & BACK_CHANNEL_NAMES, f"{path.name} runs a back channel; use BackChannel"


def test_the_shared_modules_are_the_ones_named():
    """The one era rule and the one back channel exist where the transports import them from."""
    from fusion_nb.mcp import back_channel, era

    assert callable(era.opens_modern) and callable(era.ladder)
    assert back_channel.lookup({7: "seven"}, "7") == "seven"
    assert back_channel.lookup({"7": "seven"}, 7) == "seven"
    for path in existing(["pipe.py", "sessions.py"]):
        assert "BackChannel" in names_used(path), path.name
    for path in existing(["pipe.py", "streamable.py"]):
        assert "era" in names_used(path), path.name
        assert {"Exchange", "acknowledged"} <= names_used(path), path.name
