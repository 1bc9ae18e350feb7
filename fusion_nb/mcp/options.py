"""The options of the MCP faces, defined once: ``ServerOptions`` and ``HttpOptions``.

``fusion_nb.mcp.mcp_server`` / ``serve_stdio`` take ``ServerOptions``' fields as keyword
arguments, ``fusion_nb.mcp.http_app`` takes ``HttpOptions``', and so do ``Fusion.mcp_server``
and ``Fusion.http_app``: each is written as ``build(subject, options)`` and given its
keywords by ``with_options``, so the facade cannot drift from the layer (it did, twice).
Every option is checked here, before anything is built, each refusal one sentence naming
the option, what it takes and what it was given.

This module imports no SDK: the facade in ``fusion_nb`` uses it at import time.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import urlsplit

__all__ = ["HttpOptions", "OAuthSettings", "ServerOptions", "check_tokens", "parse_tokens", "with_options"]

_P = ParamSpec("_P")
_O = TypeVar("_O")
_S = TypeVar("_S")
_R = TypeVar("_R")

#: seconds a question to the client (a 2025 elicitation) waits by default, on every transport
ANSWER_TIMEOUT = 600.0

#: items per page of tools/list, resources/list, resources/templates/list and prompts/list by default: a list
#: this long or shorter is one page, so a client that never follows ``nextCursor`` still sees all of it
PAGE_SIZE = 1000
#: tasks per page of tasks/list by default: a client's whole list within the default bound (``Tasks.max_per_owner``)
TASK_PAGE_SIZE = 100

_WORKER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


def with_options(options: Callable[_P, _O]) -> Callable[[Callable[[_S, _O], _R]], Callable[Concatenate[_S, _P], _R]]:
    """Turn ``build(subject, options)`` into ``build(subject, **fields)``, the fields being ``options``'.

    Type checkers see the options' fields as the keyword arguments (through the
    ``ParamSpec``), and so do ``help()`` and a notebook's tooltip (through the
    signature set here): one definition serves both the facade and the layer.
    """

    def decorate(build: Callable[[_S, _O], _R]) -> Callable[Concatenate[_S, _P], _R]:
        @functools.wraps(build)
        def call(subject: _S, /, *args: _P.args, **fields: _P.kwargs) -> _R:
            return build(subject, options(*args, **fields))

        first = next(iter(inspect.signature(build).parameters.values()))
        fields_ = inspect.signature(options).parameters.values()
        call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [first.replace(kind=inspect.Parameter.POSITIONAL_ONLY), *fields_],
            return_annotation=inspect.signature(build).return_annotation,
        )
        return call

    return decorate


def _positive(name: str, value: object, unit: str, *, optional: bool = False) -> None:
    """Refuse ``value`` unless it is a positive finite number (or ``None`` when ``optional``)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value > 0):
        also = " or None" if optional else ""
        raise ValueError(f"{name} must be a positive number of {unit}{also}, got {value!r}")


def _positive_count(name: str, value: object, unit: str) -> None:
    """Refuse ``value`` unless it is ``None`` or a whole number of 1 or more."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a whole number of {unit} (1 or more) or None, got {value!r}")


def check_tokens(tokens: Mapping[str, str]) -> None:
    """Refuse named tokens that cannot stand for distinct clients (never quoting a secret)."""
    if not tokens:
        raise ValueError("tokens= needs at least one name=token pair.")
    seen: set[str] = set()
    for name, token in tokens.items():
        if not name or not isinstance(name, str):
            raise ValueError("every token needs a non-empty name (the client id it stands for).")
        if not isinstance(token, str) or not token:
            raise ValueError(f"the token named {name!r} is empty.")
        if token in seen:
            raise ValueError(f"the token named {name!r} is also given under another name; each must be unique.")
        seen.add(token)


def parse_tokens(text: str, where: str, *, separators: str = ",\n") -> dict[str, str]:
    """Named tokens from ``name=token`` entries (split on ``separators``; blank and ``#`` entries skipped).

    ``where`` begins every refusal (``FUSION_NB_TOKENS``, a file's path); a refusal names
    the entry's position, never its secret.
    """
    tokens: dict[str, str] = {}
    entries = re.split("|".join(map(re.escape, separators)), text)
    for position, entry in enumerate(entries, start=1):
        entry = entry.strip()
        if not entry or entry.startswith("#"):
            continue
        name, sep, token = entry.partition("=")
        if not sep or not name.strip() or not token.strip():
            raise ValueError(f"{where}: entry {position} is not name=token (expected alice=<token>,ci=<token>).")
        if name.strip() in tokens:
            raise ValueError(f"{where}: the name {name.strip()!r} appears twice.")
        tokens[name.strip()] = token.strip()
    if not tokens:
        raise ValueError(f"{where}: no name=token entry.")
    check_tokens(tokens)
    return tokens


_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

#: JWT signature algorithms accepted by default: asymmetric only (the issuer publishes public keys), never ``none``
DEFAULT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


def _http_url(name: str, value: object, *, origin_only: bool = False) -> str:
    """``value`` as an https URL (http only on a loopback host), refused in one sentence otherwise."""
    shown = f"{value!r:.80}"
    if not isinstance(value, str):
        raise ValueError(f"{name} must be an https URL, got {shown}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} must be an https URL, got {shown}")
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
        raise ValueError(f"{name} must be https (http only on loopback), got {shown}")
    if parts.query or parts.fragment:
        raise ValueError(f"{name} must have no query or fragment, got {shown}")
    if origin_only and parts.path not in ("", "/"):
        raise ValueError(f"{name} must be an origin such as https://nb.example.com, without a path; got {shown}")
    return value.rstrip("/") if origin_only else value


@dataclass(frozen=True, kw_only=True)
class OAuthSettings:
    """OAuth resource-server mode: accept the access tokens an outside authorization server issues.

    fusion-nb never becomes an authorization server: it reads ``issuer_url``'s metadata
    (RFC 8414, else OpenID discovery) for its keys, checks each JWT's signature
    (``algorithms``, never ``none``), ``iss``, ``aud`` (``audience``, by default the
    server's own MCP URL, RFC 8707) and ``exp``/``nbf`` within ``leeway`` seconds, and
    asks the issuer (RFC 7662 introspection, as ``client_id``/``client_secret``) about a
    token that is not a JWT. A token signed by a key it does not know makes it re-read
    the keys, at most once per ``key_refresh_interval`` seconds; every request to the
    issuer waits at most ``timeout`` seconds. Every call needs ``required_scopes``; a
    tool's own (``.scopes(...)`` on its builder) come on top. ``token_verifier``
    (an SDK ``TokenVerifier``) replaces the built-in check.
    """

    issuer_url: str
    audience: str | None = None
    required_scopes: Sequence[str] = ()
    algorithms: Sequence[str] = DEFAULT_ALGORITHMS
    leeway: float = 30.0
    key_refresh_interval: float = 30.0
    client_id: str | None = None
    client_secret: str | None = None
    timeout: float = 5.0
    token_verifier: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "issuer_url", _http_url("issuer_url", self.issuer_url))
        if self.audience is not None and (not isinstance(self.audience, str) or not self.audience):
            raise ValueError(
                f"audience must be a non-empty string (this server's resource URL), got {self.audience!r:.80}"
            )
        for name in ("required_scopes", "algorithms"):
            given = getattr(self, name)
            if isinstance(given, str) or not all(isinstance(item, str) and item and " " not in item for item in given):
                raise ValueError(f"{name} must be a list of names without spaces, got {given!r:.80}")
            object.__setattr__(self, name, tuple(given))
        refused = [alg for alg in self.algorithms if alg.lower() == "none" or alg.startswith("HS")]
        if refused or not self.algorithms:
            raise ValueError(
                f"algorithms must name asymmetric signature algorithms (RS256, ES256, EdDSA ...), "
                f"got {refused[:1] or '[]'}: 'none' proves nothing and HS* would need the issuer's secret"
            )
        if isinstance(self.leeway, bool) or not isinstance(self.leeway, int | float) or not 0 <= self.leeway <= 300:
            raise ValueError(f"leeway must be a number of seconds from 0 to 300, got {self.leeway!r}")
        _positive("key_refresh_interval", self.key_refresh_interval, "seconds")
        _positive("timeout", self.timeout, "seconds")
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("client_secret needs client_id (the client this server introspects tokens as).")
        if self.token_verifier is not None and not callable(getattr(self.token_verifier, "verify_token", None)):
            raise ValueError("token_verifier must have an async verify_token(token) method (the SDK's TokenVerifier).")


@dataclass(frozen=True, kw_only=True)
class ServerOptions:
    """How the SDK server for an app behaves, on every transport (``mcp_server``, ``serve_stdio``).

    ``request_state_keys`` (at least 32 bytes each; the first seals, all unseal)
    protect the state 2026-era clients carry between input rounds; give the same
    keys to every process behind one endpoint. Without keys a process-local key is
    made. ``request_state_ttl`` is how long, in seconds, a client may take to answer.

    ``progress_interval`` is the minimum gap, in seconds, between two progress
    notifications of one call; ``telemetry=True`` keeps the SDK's OpenTelemetry
    middleware (off by default: it records spans on every call). A 2025 question to
    the client (an elicitation) waits at most ``answer_timeout`` seconds, on stdio
    as over HTTP (``None``: for ever); then the call fails in one sentence.

    ``page_size`` is how many items one page of a list holds (tools, resources,
    templates, prompts, tasks); a longer list is paged with ``nextCursor``. By default
    (``None``) a page holds up to 1,000 tools, resources, templates or prompts, for
    clients that never ask for a next page, and up to 100 tasks (a client's whole
    list within the default task bound).
    """

    progress_interval: float = 0.05
    page_size: int | None = None
    telemetry: bool = False
    request_state_keys: Sequence[bytes | str] | None = None
    request_state_ttl: float = 600.0
    answer_timeout: float | None = ANSWER_TIMEOUT

    def __post_init__(self) -> None:
        interval = self.progress_interval
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not interval >= 0:
            raise ValueError(f"progress_interval must be a number of seconds (0 or more), got {interval!r}")
        _positive("request_state_ttl", self.request_state_ttl, "seconds")
        size = self.page_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ValueError(f"page_size must be a whole number of items (1 or more) or None, got {size!r}")
        _positive("answer_timeout", self.answer_timeout, "seconds", optional=True)
        keys = self.request_state_keys
        if keys is not None:
            if isinstance(keys, str | bytes):
                raise ValueError("request_state_keys must be a list of keys, not one key (wrap it: [key]).")
            for position, key in enumerate(keys):
                size = len(key.encode() if isinstance(key, str) else key) if isinstance(key, str | bytes) else -1
                if size < 32:
                    got = f"{size} bytes" if size >= 0 else f"a value of type {type(key).__name__}"
                    raise ValueError(f"request_state_keys[{position}] must be a key of 32 bytes or more, got {got}")
            object.__setattr__(self, "request_state_keys", tuple(keys) or None)


@dataclass(frozen=True, kw_only=True)
class HttpOptions(ServerOptions):
    """How ``http_app`` serves an app over Streamable HTTP (``ServerOptions`` plus these).

    Clients authenticate with a bearer token: either one ``token`` (generated when
    neither is given; its client id is ``fusion-nb-client``) or named ``tokens``
    (``{"alice": "...", "ci": "..."}``, see ``tokens_from_env``), each its own
    client id; ``auth=False`` serves without one. ``host`` is the interface served
    (the Host and Origin headers accepted: loopback names, ``host``, and
    ``allowed_hosts`` / ``allowed_origins``); ``path`` the MCP endpoint's.

    Bodies over ``max_body_bytes`` get 413; a body not complete within
    ``body_timeout`` seconds gets 408. ``json_response=True`` answers with plain
    JSON: no progress and no live elicitation there. ``stateless=True`` makes
    2025-era sessions per-request (2026 is always per-request). At most
    ``max_sessions`` 2025-era sessions are open at once (503 beyond); one with
    nothing in flight for ``session_idle_timeout`` seconds ends (``None``: no
    limit). One credential holds at most ``max_sessions_per_owner`` of them and
    ``max_listens_per_owner`` 2026 ``subscriptions/listen`` streams.
    ``worker_name`` (letters, digits, ``-``, ``_``) begins every 2025 session id as
    ``NAME.``, so a load balancer can send a session's requests to its worker.

    ``oauth`` (``OAuthSettings``) replaces bearer tokens by an outside authorization
    server's access tokens and publishes the RFC 9728 metadata they need; ``public_url``
    (an origin such as ``https://nb.example.com``, required with ``oauth``) is where
    clients reach this server, named in every document and accepted as a Host.
    """

    host: str = "127.0.0.1"
    token: str | None = None
    tokens: Mapping[str, str] | None = None
    auth: bool = True
    json_response: bool = False
    stateless: bool = False
    max_body_bytes: int = 1_000_000
    body_timeout: float = 30.0
    allowed_hosts: Sequence[str] | None = None
    allowed_origins: Sequence[str] | None = None
    path: str = "/mcp"
    max_sessions: int | None = 10_000
    session_idle_timeout: float | None = 30 * 60
    max_sessions_per_owner: int | None = 1_000
    max_listens_per_owner: int | None = 100
    worker_name: str | None = None
    oauth: OAuthSettings | None = None
    public_url: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.public_url is not None:
            object.__setattr__(self, "public_url", _http_url("public_url", self.public_url, origin_only=True))
        if self.oauth is not None:
            if not isinstance(self.oauth, OAuthSettings):
                raise ValueError(f"oauth must be an OAuthSettings, got {type(self.oauth).__name__}")
            if self.token is not None or self.tokens is not None or not self.auth:
                given = "token=" if self.token is not None else "tokens=" if self.tokens is not None else "auth=False"
                raise ValueError(f"oauth= and {given} contradict each other: pick one way to authenticate clients.")
            if self.public_url is None:
                raise ValueError("oauth= needs public_url=, the origin clients reach this server at (https://...).")
        if not isinstance(self.host, str) or not self.host:
            raise ValueError(f"host must be an interface name or address, got {self.host!r}")
        if self.token is not None and self.tokens is not None:
            raise ValueError("pass token= (one client) or tokens= (named clients), not both.")
        if self.token is not None and (not isinstance(self.token, str) or not self.token):
            raise ValueError("token must be a non-empty string (or None: one is generated).")
        if self.tokens is not None:
            check_tokens(self.tokens)
            object.__setattr__(self, "tokens", dict(self.tokens))
        if isinstance(self.max_body_bytes, bool) or not isinstance(self.max_body_bytes, int):
            raise ValueError(f"max_body_bytes must be a whole number of bytes, got {self.max_body_bytes!r}")
        _positive("max_body_bytes", self.max_body_bytes, "bytes")
        _positive("body_timeout", self.body_timeout, "seconds")
        for name in ("allowed_hosts", "allowed_origins"):
            given = getattr(self, name)
            if given is not None:
                if isinstance(given, str) or not all(isinstance(item, str) for item in given):
                    raise ValueError(f"{name} must be a list of strings, got {given!r:.80}")
                object.__setattr__(self, name, tuple(given))
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise ValueError(f"path must start with '/', got {self.path!r:.80}")
        _positive_count("max_sessions", self.max_sessions, "sessions")
        _positive("session_idle_timeout", self.session_idle_timeout, "seconds", optional=True)
        _positive_count("max_sessions_per_owner", self.max_sessions_per_owner, "sessions")
        _positive_count("max_listens_per_owner", self.max_listens_per_owner, "streams")
        if self.worker_name is not None and not (
            isinstance(self.worker_name, str) and _WORKER_NAME.fullmatch(self.worker_name)
        ):
            shown = str(self.worker_name)[:40]
            raise ValueError(f"worker_name must be 1 to 32 letters, digits, - or _, got {shown!r}.")

    @property
    def back_channel_refusal(self) -> str | None:
        """The words naming a mode that leaves 2025-era calls no back channel (refusals quote them)."""
        modes = [
            *(["answers with single JSON responses (json_response=True)"] if self.json_response else []),
            *(["keeps no 2025-11-25 sessions (stateless=True)"] if self.stateless else []),
        ]
        return " and ".join(modes) or None
