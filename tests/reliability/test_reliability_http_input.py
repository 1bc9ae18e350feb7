"""Bad input over real HTTP: hostile requests against ``http_app()`` served by uvicorn on loopback.

Every case must end in a 4xx or a tool error (never a 5xx or a JSON-RPC internal
error), carry no traceback, file path, module path or memory address, stay small,
and leave the server answering a normal call. Each class counts its cases into the
figures table; a class's test fails listing every case that broke a rule.
"""

from __future__ import annotations

import functools
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from reliability_app import SECRET_PATH
from reliability_cases import CLIENT_META, LEGACY, MODERN, Reply, body_cases, refused
from reliability_served import ThreadServed, thread_served
from reliability_support import FIGURES, internal_text

pytestmark = pytest.mark.reliability

#: No reply to a hostile request needs more than this (validation messages are bounded near 1 KB).
MAX_REPLY_BYTES = 16 * 1024
#: A reply that has not come within this many seconds counts as a hang.
CASE_DEADLINE = 15.0


# -- requests ----------------------------------------------------------------------------
def modern_headers(token: str | None, method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(extra)
    return headers


def modern_call(name: Any, arguments: Any = None, *, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "_meta": CLIENT_META, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


class Attacker:
    """A blocking client of one served app that also judges every reply against the rules."""

    def __init__(self, served: ThreadServed) -> None:
        self.served = served
        self.http = httpx.Client(timeout=CASE_DEADLINE)
        self._session: str | None = None

    def close(self) -> None:
        self.http.close()

    # -- sending ----------------------------------------------------------------------
    def post(self, content: bytes | str | Iterator[bytes], headers: dict[str, str], url: str | None = None) -> Reply:
        response = self.http.post(url or self.served.url, content=content, headers=headers)
        return Reply(response.status_code, response.content.decode("utf-8", "replace"))

    def modern(self, body: Any, *, method: str = "tools/call", name: str | None = None, raw: bool = False) -> Reply:
        """A 2026 request: ``body`` as JSON (``raw``: already text or bytes)."""
        if name is None and isinstance(body, dict) and isinstance(body.get("params"), dict):
            candidate = body["params"].get("name")
            name = candidate if isinstance(candidate, str) and len(candidate) < 200 else None
        content = body if raw else json.dumps(body)
        return self.post(content, modern_headers(self.served.token, method, name))

    def legacy_headers(self) -> dict[str, str]:
        if self._session is None:
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "reliability", "version": "0"},
                },
            }
            headers = {
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {self.served.token}",
            }
            response = self.http.post(self.served.url, json=init, headers=headers)
            assert response.status_code == 200, response.text
            self._session = response.headers["mcp-session-id"]
            headers.update({"Mcp-Session-Id": self._session, "MCP-Protocol-Version": LEGACY})
            self.http.post(
                self.served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
            )
        return {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {self.served.token}",
            "Mcp-Session-Id": self._session,
            "MCP-Protocol-Version": LEGACY,
        }

    def legacy(self, body: Any, *, raw: bool = False) -> Reply:
        """A 2025 request on this attacker's session."""
        return self.post(body if raw else json.dumps(body), self.legacy_headers())

    def send(self, era: str, body: Any, *, raw: bool = False) -> Reply:
        if era == MODERN:
            parsed = body
            if raw:
                try:
                    parsed = json.loads(body)
                except (ValueError, RecursionError):
                    parsed = None
            method = parsed.get("method") if isinstance(parsed, dict) else None
            if not (isinstance(method, str) and _header_safe(method) and len(method) < 100):
                method = "tools/call"
            name = None
            if isinstance(parsed, dict) and isinstance(parsed.get("params"), dict):
                candidate = parsed["params"].get("name")
                if isinstance(candidate, str) and _header_safe(candidate) and len(candidate) < 200:
                    name = candidate
            return self.modern(body, method=method, name=name, raw=raw)
        return self.legacy(body, raw=raw)

    def healthy(self) -> bool:
        """A normal call succeeds: the server is still serving after the last case."""
        try:
            reply = self.modern(modern_call("echo", {"text": "still here"}))
        except httpx.HTTPError:
            return False
        result = reply.tool_result
        return reply.status == 200 and bool(result) and result.get("content", [{}])[0].get("text") == "still here"

    # -- judging ----------------------------------------------------------------------
    def judge(
        self,
        klass: str,
        label: str,
        attempt: Callable[[], Reply],
        *,
        expect: Callable[[Reply], bool] | None = None,
        problems: list[str],
    ) -> Reply | None:
        """Run one case, apply every rule, count it under ``klass``; broken rules go to ``problems``."""
        tally = FIGURES.case(klass)
        tally.tried += 1
        try:
            reply = attempt()
        except (httpx.TimeoutException, TimeoutError):
            tally.hung += 1
            problems.append(f"{label}: no reply within {CASE_DEADLINE:g} s")
            reply = None
        except (httpx.HTTPError, OSError) as exc:
            tally.server_errors += 1
            problems.append(f"{label}: connection failed ({type(exc).__name__})")
            reply = None
        if reply is not None:
            if reply.status >= 500 or -32603 in reply.rpc_error_codes:
                tally.server_errors += 1
                problems.append(f"{label}: server error {reply.status} {reply.body[:200]!r}")
            leaked = internal_text(reply.body)
            if leaked or SECRET_PATH in reply.body:
                tally.leaked += 1
                FIGURES.leaks.append(f"{klass}/{label}: {', '.join(leaked) or 'secret path'}")
                problems.append(f"{label}: internal text in the reply ({', '.join(leaked)}): {reply.body[:300]!r}")
            if len(reply.body.encode()) > MAX_REPLY_BYTES:
                tally.oversized += 1
                problems.append(f"{label}: reply of {len(reply.body.encode())} bytes (bound {MAX_REPLY_BYTES})")
            if expect is not None and not expect(reply):
                problems.append(f"{label}: unexpected reply {reply.status} {reply.body[:200]!r}")
        if not self.healthy():
            problems.append(f"{label}: a normal call failed afterwards")
        return reply


@pytest.fixture
def attacker(served: ThreadServed) -> Iterator[Attacker]:
    a = Attacker(served)
    yield a
    a.close()
    assert served.app.active_calls == [], f"calls left running: {served.app.active_calls}"


def _header_safe(text: str) -> bool:
    """Whether ``text`` can travel as an HTTP header value unchanged (clients refuse the rest)."""
    return bool(text) and text.isascii() and text.isprintable() and text == text.strip()


def status_is(*codes: int) -> Callable[[Reply], bool]:
    return lambda reply: reply.status in codes


# -- transport and authentication --------------------------------------------------------
def test_authentication_and_transport_guards(attacker: Attacker, served: ThreadServed) -> None:
    problems: list[str] = []
    body = json.dumps(modern_call("echo", {"text": "x"}))
    token = served.token
    cases: list[tuple[str, dict[str, str], str | None, Callable[[Reply], bool]]] = [
        ("no token", modern_headers(None, "tools/call", "echo"), None, status_is(401)),
        ("wrong token", modern_headers("not-the-token", "tools/call", "echo"), None, status_is(401)),
        (
            "bearer without token",
            modern_headers(None, "tools/call", "echo", Authorization="Bearer"),
            None,
            status_is(401),
        ),
        (
            "basic scheme",
            modern_headers(None, "tools/call", "echo", Authorization=f"Basic {token}"),
            None,
            status_is(401),
        ),
        (
            "token in the query string",
            modern_headers(None, "tools/call", "echo"),
            f"{served.url}?access_token={token}&token={token}",
            status_is(401),
        ),
        (
            "lowercase scheme",
            modern_headers(None, "tools/call", "echo", Authorization=f"bearer {token}"),
            None,
            lambda r: r.status in (200, 401),
        ),
        ("bad Host", modern_headers(token, "tools/call", "echo", Host="evil.example:80"), None, status_is(421)),
        ("bad Origin", modern_headers(token, "tools/call", "echo", Origin="http://evil.example"), None, status_is(403)),
        (
            "null Origin",
            modern_headers(token, "tools/call", "echo", Origin="null"),
            None,
            lambda r: 400 <= r.status < 500,
        ),
        (
            "wrong content type",
            modern_headers(token, "tools/call", "echo", **{"Content-Type": "text/plain"}),
            None,
            lambda r: 400 <= r.status < 500,
        ),
        (
            "unknown protocol version",
            modern_headers(token, "tools/call", "echo", **{"MCP-Protocol-Version": "1999-01-01"}),
            None,
            lambda r: 400 <= r.status < 500,
        ),
        (
            "Mcp-Name disagrees with the body",
            modern_headers(token, "tools/call", "crash"),
            None,
            lambda r: 400 <= r.status < 500,
        ),
    ]
    for label, headers, url, expect in cases:
        klass = "auth" if "token" in label or "scheme" in label or "bearer" in label else "transport headers"
        attacker.judge(
            klass, label, functools.partial(attacker.post, body, headers, url), expect=expect, problems=problems
        )
    attacker.judge(
        "transport headers",
        "missing Host",
        lambda: raw_exchange(served.port, b"POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"),
        expect=lambda r: 400 <= r.status < 500,
        problems=problems,
    )
    assert not problems, "\n".join(problems)


def test_oversized_bodies_are_413(attacker: Attacker) -> None:
    problems: list[str] = []
    big = json.dumps(modern_call("measure", {"text": "x" * 1_200_000})).encode()

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must count streamed bytes
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    headers = modern_headers(attacker.served.token, "tools/call", "measure")
    attacker.judge(
        "oversized body", "declared", lambda: attacker.post(big, headers), expect=status_is(413), problems=problems
    )
    attacker.judge(
        "oversized body", "chunked", lambda: attacker.post(chunks(), headers), expect=status_is(413), problems=problems
    )
    lying = {**headers, "Content-Length": "10"}
    attacker.judge(
        "oversized body",
        "Content-Length smaller than the body",
        lambda: raw_exchange(
            attacker.served.port,
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + b"".join(f"{k}: {v}\r\n".encode() for k, v in lying.items())
            + b"\r\n"
            + big[:5000],
        ),
        expect=lambda r: 400 <= r.status < 500,
        problems=problems,
    )
    assert not problems, "\n".join(problems)


def test_a_stalled_body_is_dropped_with_408() -> None:
    """A request that promises a body and never sends it must not hold its connection (issue 11: 408)."""
    problems: list[str] = []
    with thread_served(body_timeout=1.0) as served:
        attacker = Attacker(served)
        try:
            headers = modern_headers(served.token, "tools/call", "echo")
            head = (
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
                + b"Content-Length: 100\r\n\r\n"
                + b'{"jsonrpc":'
            )
            attacker.judge(
                "stalled body",
                "promised 100 bytes, sent 11",
                lambda: raw_exchange(served.port, head, deadline=10.0),
                expect=status_is(408),
                problems=problems,
            )
        finally:
            attacker.close()
    assert not problems, "\n".join(problems)


def raw_exchange(port: int, request: bytes, *, deadline: float = CASE_DEADLINE) -> Reply:
    """Send raw bytes on a fresh loopback connection and read one HTTP response (bounded in time)."""
    with socket.create_connection(("127.0.0.1", port), timeout=deadline) as sock:
        sock.sendall(request)
        data = b""
        end = time.monotonic() + deadline
        while b"\r\n\r\n" not in data or not _complete(data):
            sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                raise TimeoutError("no complete response") from None
            if not chunk:
                break
            data += chunk
    if not data:
        raise ConnectionResetError("the server closed the connection without a response")
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return Reply(status, body.decode("utf-8", "replace"))


def _complete(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return True  # no length: the server closes after the body (or sends none)


@pytest.mark.parametrize("era", [MODERN, LEGACY])
def test_hand_written_bodies(attacker: Attacker, era: str) -> None:
    problems: list[str] = []
    for klass, label, body, raw, expect in body_cases(era):
        attacker.judge(
            klass,
            f"{era} {label}",
            functools.partial(attacker.send, era, body, raw=raw),
            expect=expect,
            problems=problems,
        )
    assert not problems, "\n".join(problems)


def test_an_unexpected_exception_reaches_the_client_without_internal_text(attacker: Attacker) -> None:
    """INTERNAL_ERROR names the exception class, the tool and an error id, never ``str(exc)`` (issue 10)."""
    problems: list[str] = []
    for era in (MODERN, LEGACY):
        reply = attacker.judge(
            "unexpected exception",
            f"{era} crash",
            functools.partial(attacker.send, era, (modern_call if era == MODERN else legacy_call)("crash", {})),
            expect=refused,
            problems=problems,
        )
        if reply is not None:
            text = json.dumps(reply.tool_result)
            if "FileNotFoundError" not in text or "crash" not in text:
                problems.append(f"{era}: INTERNAL_ERROR should name the exception class and tool: {text[:300]}")
        reply = attacker.judge(
            "unexpected exception",
            f"{era} author's ToolError",
            functools.partial(attacker.send, era, (modern_call if era == MODERN else legacy_call)("refuse", {})),
            expect=lambda r: "The daily quota is used up." in r.body,
            problems=problems,
        )
    assert not problems, "\n".join(problems)


def legacy_call(name: Any, arguments: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}


# -- sealed request state (2026) ----------------------------------------------------------
def first_round(attacker: Attacker, tool: str = "refund", record: str = "inv-7") -> str:
    reply = attacker.modern(modern_call(tool, {"id": record}))
    result = reply.tool_result
    assert result is not None and result.get("resultType") == "input_required", reply.body[:500]
    return result["requestState"]


def answer(state: str, *, tool: str = "refund", record: str = "inv-7", responses: Any = None) -> dict[str, Any]:
    if responses is None:
        responses = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    return modern_call(tool, {"id": record}, requestState=state, inputResponses=responses)


def not_acted_on(reply: Reply) -> bool:
    """The handler did not act on the answer (no refund or deletion happened)."""
    return "refund done" not in reply.body and "delete done" not in reply.body


def was_refused(reply: Reply) -> bool:
    """Refused, and the handler did not act on the answer."""
    return reply.refused and not_acted_on(reply)


def started_over(reply: Reply) -> bool:
    """Refused, or treated as no state at all: a fresh input request, nothing acted on."""
    result = reply.tool_result or {}
    return not_acted_on(reply) and (reply.refused or result.get("resultType") == "input_required")


def test_sealed_request_state_attacks(attacker: Attacker) -> None:
    problems: list[str] = []
    state = first_round(attacker)
    flipped = state[:-6] + ("A" if state[-6] != "A" else "B") + state[-5:]
    other_state = first_round(attacker, "delete")
    with thread_served(request_state_keys=[b"k" * 32]) as foreign_server:
        foreign = Attacker(foreign_server)
        try:
            foreign_state = first_round(foreign)
        finally:
            foreign.close()
    cases = [
        ("tampered", answer(flipped)),
        ("truncated", answer(state[: len(state) // 2])),
        ("plaintext", answer(json.dumps({"pending": {"key": "confirm"}}))),
        ("empty", answer("")),
        ("not a string", answer(12345)),  # type: ignore[arg-type]
        ("foreign key", answer(foreign_state)),
        ("other tool", answer(state, tool="delete")),
        ("other tool's state", answer(other_state)),
        ("other arguments", answer(state, record="inv-8")),
        ("huge", answer("v1." + "A" * 500_000)),
    ]
    for label, body in cases:
        expect = started_over if label == "empty" else was_refused
        attempt = functools.partial(attacker.modern, body)
        attacker.judge("request state", label, attempt, expect=expect, problems=problems)
    for label, responses in [
        ("string for boolean", {"confirm": {"action": "accept", "content": {"confirm": "yes"}}}),
        ("unknown action", {"confirm": {"action": "maybe", "content": {"confirm": True}}}),
        ("content a list", {"confirm": {"action": "accept", "content": [True]}}),
        ("answer a string", {"confirm": "yes"}),
        ("responses a list", [{"action": "accept"}]),
    ]:

        def wrong(r: Any = responses) -> Reply:  # the first round is asked afresh for each answer
            return attacker.modern(answer(first_round(attacker), responses=r))

        attacker.judge(
            "wrong answers",
            label,
            wrong,
            expect=was_refused,
            problems=problems,
        )
    accepted = attacker.modern(answer(first_round(attacker)))
    assert "refund done inv-7" in accepted.body, accepted.body[:300]  # the genuine answer still works
    # A field the form never asked for is dropped, not refused (SEP-2322: extra parameters are ignored):
    # the handler sees the form's own fields only, so the call goes as the genuine answer does.
    extra = {"confirm": {"action": "accept", "content": {"confirm": True, "admin": True}}}
    ignored = attacker.modern(answer(first_round(attacker), responses=extra))
    assert "refund done inv-7" in ignored.body, ignored.body[:300]
    assert not problems, "\n".join(problems)


def test_expired_request_state_is_refused() -> None:
    problems: list[str] = []
    with thread_served(request_state_ttl=0.5) as served:
        attacker = Attacker(served)
        try:
            state = first_round(attacker)
            time.sleep(1.0)  # the clock must pass the state's expiry; nothing to wait on but time
            attacker.judge(
                "request state",
                "expired",
                lambda: attacker.modern(answer(state)),
                expect=was_refused,
                problems=problems,
            )
        finally:
            attacker.close()
    assert not problems, "\n".join(problems)


def test_request_state_is_bound_to_the_token_that_minted_it() -> None:
    """Several named tokens (issue 11: ``tokens=``); state sealed under one is refused under another."""
    problems: list[str] = []
    tokens = {"alice": "a" * 40, "bob": "b" * 40}
    with thread_served(tokens=tokens) as served:
        attacker = Attacker(served)
        try:
            served.token = tokens["alice"]
            state = first_round(attacker)
            served.token = tokens["bob"]
            attacker.judge(
                "request state",
                "other token",
                lambda: attacker.modern(answer(state)),
                expect=was_refused,
                problems=problems,
            )
        finally:
            attacker.close()
    assert not problems, "\n".join(problems)


# -- generated requests ------------------------------------------------------------------
JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
TOOL_NAMES = st.sampled_from(["echo", "measure", "typed", "stream", "refund", "crash", "refuse", "nope", ""])
METHODS = st.sampled_from(
    ["tools/call", "tools/list", "initialize", "ping", "resources/read", "tools/call "]
) | st.text(max_size=20)


@st.composite
def generated_requests(draw: st.DrawFn) -> tuple[str, str | bytes]:
    """An era and a request body: mostly tools/call with hostile arguments, sometimes any JSON at all."""
    era = draw(st.sampled_from([MODERN, LEGACY]))
    shape = draw(st.sampled_from(["call", "call", "call", "envelope", "anything", "bytes"]))
    if shape == "bytes":
        return era, draw(st.binary(max_size=200))
    if shape == "anything":
        return era, json.dumps(draw(JSON_VALUE))
    params: dict[str, Any] = {}
    if era == MODERN:
        params["_meta"] = draw(st.sampled_from([CLIENT_META, {}, {"io.modelcontextprotocol/protocolVersion": 5}]))
    if shape == "call":
        params["name"] = draw(TOOL_NAMES | st.text(max_size=10))
        params["arguments"] = draw(
            st.dictionaries(
                st.sampled_from(["text", "count", "ratio", "flag", "mode", "steps", "id"]) | st.text(max_size=8),
                JSON_VALUE,
                max_size=5,
            )
            | JSON_VALUE
        )
        method: Any = "tools/call"
    else:
        params.update(draw(st.dictionaries(st.text(max_size=8), JSON_VALUE, max_size=3)))
        method = draw(METHODS | JSON_VALUE)
    body: dict[str, Any] = {
        "jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0"])),
        "method": method,
        "params": params,
    }
    request_id = draw(st.integers(0, 2**31) | st.text(max_size=8) | st.none())
    if request_id is not None:
        body["id"] = request_id
    return era, json.dumps(body)


def test_generated_requests(attacker: Attacker, budget: Any) -> None:
    """Hypothesis-made requests, fixed seed: at least 100 in ``make test``, 600 in ``make reliability``."""
    problems: list[str] = []
    count = [0]

    @seed(15)
    @settings(max_examples=budget.generated_requests, suppress_health_check=list(HealthCheck))
    @given(request=generated_requests())
    def probe(request: tuple[str, str | bytes]) -> None:
        era, body = request
        count[0] += 1
        attacker.judge(
            "generated (hypothesis)",
            f"#{count[0]} {era} {body[:80]!r}",
            lambda: attacker.send(era, body, raw=True),
            problems=problems,
        )

    probe()
    assert count[0] >= budget.generated_requests * 0.9, f"only {count[0]} generated requests ran"
    assert not problems, f"{len(problems)} of {count[0]} generated requests broke a rule:\n" + "\n".join(problems[:30])
