"""``HttpOptions`` / ``ServerOptions``: every option is checked before anything is built, each in one sentence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fusion_mcp_testapp import make_app

from fusion_nb import Fusion
from fusion_nb.mcp import HttpOptions, ServerOptions, http_app, mcp_server

BAD: list[tuple[dict[str, Any], str]] = [
    ({"body_timeout": 0}, "body_timeout must be a positive number of seconds, got 0"),
    ({"body_timeout": float("inf")}, "body_timeout must be a positive number of seconds, got inf"),
    ({"max_body_bytes": 0}, "max_body_bytes must be a positive number of bytes, got 0"),
    ({"max_body_bytes": 1.5}, "max_body_bytes must be a whole number of bytes, got 1.5"),
    ({"token": "x" * 32, "tokens": {"a": "y" * 32}}, r"pass token= \(one client\) or tokens= .*, not both"),
    ({"token": ""}, "token must be a non-empty string"),
    ({"tokens": {}}, "tokens= needs at least one name=token pair"),
    ({"tokens": {"a": "same", "b": "same"}}, "each must be unique"),
    ({"path": "mcp"}, "path must start with '/', got 'mcp'"),
    ({"host": ""}, "host must be an interface name or address"),
    ({"allowed_hosts": "api.example.com"}, "allowed_hosts must be a list of strings"),
    ({"max_sessions": 0}, r"max_sessions must be a whole number of sessions \(1 or more\) or None, got 0"),
    ({"max_sessions_per_owner": True}, "max_sessions_per_owner must be a whole number of sessions"),
    ({"max_listens_per_owner": -1}, "max_listens_per_owner must be a whole number of streams"),
    ({"session_idle_timeout": -1}, "session_idle_timeout must be a positive number of seconds or None, got -1"),
    ({"answer_timeout": float("nan")}, "answer_timeout must be a positive number of seconds or None, got nan"),
    ({"worker_name": "a.b"}, r"worker_name must be 1 to 32 letters, digits, - or _, got 'a.b'"),
    ({"progress_interval": -0.1}, r"progress_interval must be a number of seconds \(0 or more\), got -0.1"),
    ({"request_state_ttl": 0}, "request_state_ttl must be a positive number of seconds, got 0"),
    ({"request_state_keys": "k" * 40}, "request_state_keys must be a list of keys, not one key"),
    ({"request_state_keys": ["short"]}, r"request_state_keys\[0\] must be a key of 32 bytes or more, got 5 bytes"),
    ({"request_state_keys": ["k" * 32, 7]}, r"request_state_keys\[1\] must be .*, got a value of type int"),
]


class Watched(Fusion):
    """An app that records whether a server was built for it (a server subscribes to its tool changes)."""

    subscribed = 0

    def on_tools_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        self.subscribed += 1
        return super().on_tools_changed(listener)


@pytest.mark.parametrize(("options", "refusal"), BAD, ids=[next(iter(o)) for o, _ in BAD])
def test_a_bad_option_is_one_sentence_and_nothing_is_built(options, refusal):
    app = Watched("options")
    with pytest.raises(ValueError, match=refusal) as refused:
        http_app(app, **options)
    message = str(refused.value)
    assert "\n" not in message and len(message) < 200
    assert app.subscribed == 0, "a server was built before the options were checked"
    with pytest.raises(ValueError, match=refusal):
        app.http_app(**options)  # the facade checks the same way


def test_a_named_secret_is_never_quoted():
    with pytest.raises(ValueError) as refused:
        HttpOptions(tokens={"alice": "secret-of-alice-0123456789", "bob": "secret-of-alice-0123456789"})
    assert "secret-of-alice" not in str(refused.value)


def test_the_server_options_are_checked_for_every_transport():
    app, _ = make_app()
    with pytest.raises(ValueError, match="request_state_ttl must be a positive number"):
        mcp_server(app, request_state_ttl=-1)
    with pytest.raises(ValueError, match="progress_interval must be a number"):
        app.mcp_server(progress_interval="fast")  # type: ignore[arg-type]


def test_the_options_are_normalised_and_kept_on_the_app():
    app, _ = make_app()
    keys = ["k" * 32]
    served = http_app(app, request_state_keys=keys, allowed_hosts=["api.example.com:*"], tokens={"ci": "t" * 32})
    assert served.options.request_state_keys == ("k" * 32,)
    assert served.options.allowed_hosts == ("api.example.com:*",)
    assert served.token is None and served.tokens == {"ci": "t" * 32}
    assert isinstance(served.options, ServerOptions)
    assert served.options.back_channel_refusal is None
    both = http_app(app, json_response=True, stateless=True, auth=False)
    assert both.endpoint is None and both.tokens == {}
    assert both.options.back_channel_refusal == (
        "answers with single JSON responses (json_response=True) and keeps no 2025-11-25 sessions (stateless=True)"
    )
