"""The terminal channel asks only where a person can type: a pipe or a service gets ``None`` at once."""

import io

import pytest

from fusion_nb import Fusion, ask, require_input
from fusion_nb.notebook.terminal import TerminalInputChannel

pytestmark = pytest.mark.anyio


async def test_without_a_tty_the_call_fails_fast_instead_of_waiting_for_typing():
    channel = TerminalInputChannel(stdin=io.StringIO("y\n"), stdout=io.StringIO())
    assert channel.available is False
    app = Fusion("t", input_channel=channel)

    @app.f.action("confirm").handle
    def confirm(input, ctx):
        return require_input.elicit("Sure?", {"ok": ask.boolean("OK")})

    result = await app.call("confirm", {})
    assert result.error is not None and result.error.code == "ELICITATION_UNSUPPORTED"
