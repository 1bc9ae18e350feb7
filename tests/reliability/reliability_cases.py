"""Hostile JSON-RPC bodies shared by the HTTP and stdio fault tests, and the reply they are judged by.

One list of classes serves both transports, so a class added here is tried over HTTP
(both eras) and as a garbage line on stdio.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
CLIENT_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "reliability", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


@dataclass
class Reply:
    """What came back: status, body text, and the JSON-RPC messages found in it."""

    status: int
    body: str

    @property
    def messages(self) -> list[Any]:
        """JSON-RPC messages of a JSON or SSE body (unparseable parts are skipped)."""
        texts = [line[5:].strip() for line in self.body.splitlines() if line.startswith("data:")] or [self.body]
        found = []
        for text in texts:
            try:
                found.append(json.loads(text))
            except (ValueError, RecursionError):
                continue
        return found

    @property
    def rpc_error_codes(self) -> list[int]:
        return [
            m["error"].get("code") for m in self.messages if isinstance(m, dict) and isinstance(m.get("error"), dict)
        ]

    @property
    def tool_result(self) -> dict[str, Any] | None:
        for message in self.messages:
            if isinstance(message, dict) and isinstance(message.get("result"), dict):
                return message["result"]
        return None

    @property
    def refused(self) -> bool:
        """A 4xx, a JSON-RPC error, or a tool result with ``isError``: the input was turned away."""
        if 400 <= self.status < 500 or self.rpc_error_codes:
            return True
        result = self.tool_result
        return bool(result and result.get("isError"))


def refused(reply: Reply) -> bool:
    return reply.refused


def turned_away(reply: Reply) -> bool:
    """Refused, or (2025) acknowledged with an empty 202 as a message that needs no answer."""
    return reply.refused or (reply.status == 202 and not reply.body)


# -- the JSON-RPC body -------------------------------------------------------------------
def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def body_cases(era: str) -> list[tuple[str, str, Any, bool, Callable[[Reply], bool] | None]]:
    """(class, label, body, raw, expectation) for one era; ``raw`` bodies are sent as they are."""
    meta = {"_meta": CLIENT_META} if era == MODERN else {}

    def call(name: Any, arguments: Any = None, **extra: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, **meta, **extra}
        if arguments is not None:
            params["arguments"] = arguments
        return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}

    def raw_call(arguments_text: str, name: str = "typed") -> str:
        params = f'{{"name":"{name}","arguments":{arguments_text}'
        if era == MODERN:
            params += f',"_meta":{json.dumps(CLIENT_META)}'
        return f'{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{params}}}}}'

    good = {"count": 1, "ratio": 0.5, "flag": True, "mode": "fast"}
    cases: list[tuple[str, str, Any, bool, Callable[[Reply], bool] | None]] = []
    for label, text in [
        ("empty", ""),
        ("open brace", "{"),
        ("prose", "not json at all"),
        ("truncated", json.dumps(call("echo", {"text": "x"}))[:-3]),
        ("trailing garbage", json.dumps(call("echo", {"text": "x"})) + "}}"),
        ("single quotes", "{'jsonrpc': '2.0'}"),
        ("NUL bytes", "\x00\x00\x00"),
        ("BOM then JSON", "\ufeff" + json.dumps(call("echo", {"text": "x"}))),
    ]:
        cases.append(("malformed JSON", label, text, True, refused))
    cases.append(("malformed JSON", "invalid UTF-8", b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', True, refused))
    for label, value in [
        ("empty object", {}),
        ("number", 1),
        ("string", "tools/call"),
        ("null", None),
        ("jsonrpc 1.0", {"jsonrpc": "1.0", "id": 1, "method": "tools/list"}),
        ("method not a string", {"jsonrpc": "2.0", "id": 1, "method": 5}),
        ("object id", {"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}),
        ("float id", {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}),
        ("a response", {"jsonrpc": "2.0", "id": 1, "result": {}}),
        ("params a list", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1, 2]}),
        ("params a string", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "echo"}),
        ("no params", {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
    ]:
        cases.append(("not JSON-RPC", label, value, False, turned_away))
    for label, method in [("unknown", "tools/explode"), ("empty", ""), ("rpc.", "rpc.discover"), ("long", "m" * 5000)]:
        cases.append(
            ("unknown method", label, {"jsonrpc": "2.0", "id": 1, "method": method, "params": meta}, False, refused)
        )
    cases.append(("batch", "two calls", [call("echo", {"text": "a"}), call("echo", {"text": "b"})], False, turned_away))
    cases.append(("batch", "empty", [], False, turned_away))
    for label, arguments in [("list", [1, 2]), ("string", "text"), ("number", 5), ("true", True)]:
        cases.append(("non-object arguments", label, call("echo", arguments), False, refused))
    for label, arguments in [
        ("integer as string", {**good, "count": "3"}),
        ("fractional integer", {**good, "count": 1.5}),
        ("boolean for integer", {**good, "count": True}),
        ("string for number", {**good, "ratio": "half"}),
        ("string for boolean", {**good, "flag": "yes"}),
        ("enum outside", {**good, "mode": "reckless"}),
        ("enum wrong type", {**good, "mode": 1}),
        ("object for string", {**good, "mode": {"nested": "object"}}),
        ("missing field", {"count": 1}),
        ("null field", {**good, "count": None}),
    ]:
        cases.append(("wrong types", label, call("typed", arguments), False, refused))
    cases.append(
        (
            "wrong types",
            "huge integer (valid JSON Schema integer)",
            call("typed", {**good, "count": 10**400}),
            False,
            None,
        )
    )
    cases.append(("extra fields", "one", call("typed", {**good, "extra": 1}), False, refused))
    cases.append(
        ("extra fields", "fifty", call("typed", {**good, **{f"extra_{i}": i for i in range(50)}}), False, refused)
    )
    cases.append(("extra fields", "params-level", call("echo", {"text": "x"}, unexpected={"a": 1}), False, None))
    cases.append(("huge strings", "900 KB valid text", call("measure", {"text": "x" * 900_000}), False, None))
    cases.append(
        ("huge strings", "900 KB for an integer", call("typed", {**good, "count": "9" * 900_000}), False, refused)
    )
    cases.append(("huge strings", "900 KB for an enum", call("typed", {**good, "mode": "m" * 900_000}), False, refused))
    cases.append(("huge field names", "200 KB name", call("echo", {"text": "x", "k" * 200_000: 1}), False, refused))
    cases.append(
        (
            "huge field names",
            "5000 long names",
            call("echo", {f"{i:05d}" + "k" * 100: 1 for i in range(5000)}),
            False,
            refused,
        )
    )
    for depth in (100, 1_000, 10_000, 100_000):
        cases.append(
            ("deep nesting", f"arguments depth {depth}", raw_call('{"count":' + nested(depth) + "}"), True, refused)
        )
    cases.append(
        (
            "deep nesting",
            "envelope depth 10000",
            '{"jsonrpc":"2.0","id":1,"method":' + nested(10_000) + "}",
            True,
            refused,
        )
    )
    for label, literal in [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e999", "1e999")]:
        arguments = '{"count":1,"ratio":' + literal + ',"flag":true,"mode":"fast"}'
        cases.append(("NaN and Infinity", label, raw_call(arguments), True, refused))
    for label, escape in [("lone high", "\\ud800"), ("lone low", "\\udfff"), ("reversed pair", "\\udc00\\ud800")]:
        cases.append(("lone surrogates", label, raw_call('{"text":"a' + escape + 'b"}', name="echo"), True, None))
    cases.append(("lone surrogates", "in the tool name", raw_call('{"text":"x"}', name="ech\\ud800o"), True, refused))
    for label, name in [
        ("unknown", "no-such-tool"),
        ("empty", ""),
        ("not a string", 5),
        ("null", None),
        ("200 KB tool name", "t" * 200_000),
        ("path-like", "../../etc/passwd"),
    ]:
        cases.append(("unknown tool", label, call(name, {}), False, refused))
    return cases
