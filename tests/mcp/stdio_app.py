"""Module the stdio tests run as a subprocess: ``python -u -m fusion_nb.mcp.stdio stdio_app:app``."""

from fusion_mcp_testapp import make_app

app, probe = make_app("mcp-stdio-test")
