"""The terminal channel asks only where a person can type: a pipe or a service gets ``None`` at once."""

import io

import pytest

from fusion_nb import Fusion, ask, input_response, require_input
from fusion_nb.notebook.terminal import TerminalInputChannel

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # jupyter_client's async API is asyncio-only


async def test_without_a_tty_the_call_fails_fast_instead_of_waiting_for_typing():
    channel = TerminalInputChannel(stdin=io.StringIO("y\n"), stdout=io.StringIO())
    assert channel.available is False
    app = Fusion("t", input_channel=channel)

    @app.f.action("confirm").handle
    def confirm(input, ctx):
        return require_input.elicit("Sure?", {"confirm": ask.boolean("OK")})

    result = await app.call("confirm", {})
    assert result.error is not None and result.error.code == "ELICITATION_UNSUPPORTED"


@pytest.mark.parametrize("reopens", [True, False], ids=["terminal-reopened", "cannot-reopen"])
async def test_a_question_at_a_terminal_leaves_stdin_blocking_for_ipythons_prompt(monkeypatch, reopens):
    """IPython's own prompt reads the same open file: with its non-blocking flag set, even for one read by the
    question's thread, that prompt's next read is an end of input ("Do you really want to exit?"). The terminal
    is read through a descriptor of its own; where it cannot be opened again, stdin is switched for each read only.
    """
    import os
    import pty

    terminal, typed_into = pty.openpty()
    switched: list[tuple[int, bool]] = []
    real_set_blocking = os.set_blocking

    def set_blocking(fd: int, blocking: bool) -> None:
        switched.append((fd, blocking))
        real_set_blocking(fd, blocking)

    def no_name(fd: int) -> str:
        raise OSError("no name for this terminal")

    monkeypatch.setattr(os, "set_blocking", set_blocking)
    if not reopens:
        monkeypatch.setattr(os, "ttyname", no_name)
    try:
        with open(typed_into, closefd=False) as stdin, open(typed_into, "w", closefd=False) as stdout:
            channel = TerminalInputChannel(stdin=stdin, stdout=stdout)
            assert channel.available
            app = Fusion("t", input_channel=channel)

            @app.f.action("confirm").handle
            def confirm(input, ctx):
                if input_response("confirm").action == "missing":
                    return require_input.elicit("Sure?", {"confirm": ask.boolean("OK")})
                answer = input_response("confirm")
                return f"{answer.action} {answer.content}"

            os.write(terminal, b"y\n")  # typed ahead: the line waits in the terminal until the question reads it
            result = await app.call("confirm", {})
        assert result.error is None and result.value == "accept {'confirm': True}", result
        on_stdin = [blocking for fd, blocking in switched if fd == typed_into]
        if reopens:
            assert on_stdin == []
        else:  # each switch undone at once: non-blocking, then back, per read
            assert on_stdin and on_stdin == [False, True] * (len(on_stdin) // 2)
        assert os.get_blocking(typed_into)
    finally:
        os.close(terminal)
        os.close(typed_into)
