"""Who called: the client's declared name, as the notebook's activity panel shows it."""

from types import SimpleNamespace

from mcp_types import Implementation

from fusion_nb.mcp.server import client_label


def ctx_with(info):
    return SimpleNamespace(session=SimpleNamespace(client_params=SimpleNamespace(client_info=info)))


def test_the_label_is_name_and_version():
    assert client_label(ctx_with(Implementation(name="claude-code", version="2.1.0"))) == "claude-code 2.1.0"


def test_a_clients_label_is_bounded_and_printable():
    """A client chooses its name: it cannot flood a row or put control characters in it."""
    label = client_label(ctx_with(Implementation(name="x\x1b[31m" + "y" * 500, version="1")))
    assert len(label) == 60 and label.endswith("…") and "\x1b" not in label


def test_no_client_info_no_label():
    assert client_label(SimpleNamespace(session=SimpleNamespace(client_params=None))) is None
