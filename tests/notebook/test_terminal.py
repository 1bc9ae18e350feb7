"""Terminal IPython, for real (a pty running ``ipython``): Ctrl-C, the text view, text prompts, ``%fusion serve``."""

import re
import sys
from pathlib import Path

import pexpect
import pytest
from desktop_host import entry_of, host_client

from fusion_nb.mcp import connect

pytestmark = [pytest.mark.kernel, pytest.mark.asyncio_only]  # jupyter_client's async API is asyncio-only

IPYTHON = str(Path(sys.executable).with_name("ipython"))
PROMPT = re.compile(r"In \[\d+\]: ")
SLOW = (
    "get_ipython().run_cell_magic('fusion_tool', 'slow', 'import anyio\\ntry:\\n    print(\"started\", flush=True)\\n"
    '    await anyio.sleep(3600)\\nfinally:\\n    print("cleaned up", flush=True)\')'
)
STEPS = (
    "get_ipython().run_cell_magic('fusion_tool', 'steps', 'import anyio\\nfor i in range(5):\\n"
    '    yield progress((i + 1) * 20, f"step {i + 1}")\\n    await anyio.sleep(0.25)\\nreturn "walked"\')'
)


@pytest.fixture
def ipython(tmp_path):
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "TERM": "dumb", "COLUMNS": "100", "LINES": "40"}
    child = pexpect.spawn(
        IPYTHON,
        ["--simple-prompt", "--no-banner", "--colors=NoColor", "--HistoryManager.enabled=False"],
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 100),
    )
    child.expect(PROMPT)
    try:
        yield child
    finally:
        child.sendline("exit")
        child.expect(pexpect.EOF)
        child.close()
        assert not child.isalive()


def run(child, line):
    child.sendline(line)
    child.expect(PROMPT)
    return child.before


def test_ctrl_c_cancels_the_awaited_call_and_its_cleanup_runs_before_the_prompt(ipython):
    run(ipython, "%load_ext fusion_nb")
    run(ipython, SLOW)
    ipython.sendline("await slow()")
    ipython.expect("started")
    ipython.sendintr()
    ipython.expect(PROMPT)
    shown = ipython.before
    assert "cleaned up" in shown and shown.index("cleaned up") < shown.index("Stopped:"), shown
    assert "Stopped: slow was stopped; its cleanup ran." in shown
    assert "Traceback" not in shown and "asyncio" not in shown, shown
    assert "[]" in run(ipython, "import fusion_nb; print(fusion_nb.default_app.active_calls)")


def test_the_text_view_rewrites_one_line_on_a_tty(ipython):
    run(ipython, "%load_ext fusion_nb")
    run(ipython, STEPS)
    shown = run(ipython, "await steps()")
    view = shown[shown.index("steps:") - 1 : shown.index("Out[")]
    assert view.count("\r") >= 2, repr(view)  # rewritten in place
    assert view.count("\n") <= 2, repr(view)  # ended once (a pty turns \n into \r\n)
    assert "steps: ✔ done 100%" in view and "'walked'" in shown


REFUND = (
    "get_ipython().run_cell_magic('fusion_tool', 'refund', "
    '\'if input_response("confirm").action == "missing":\\n'
    '    return require_input.elicit("Refund 12.50 to ACME?", {"confirm": ask.boolean("Approve the refund"), '
    '"seats": ask.integer("Seats").min(1).max(50).default(1)})\\n'
    'answer = input_response("confirm")\\n'
    'return f"{answer.action} {answer.content}"\')'
)
APPROVE = r"Approve the refund \[y/n\]: "
SEATS = r"Seats \(1 to 50\) \[1\]: "


def test_a_tool_that_asks_gets_a_text_prompt_answered_by_typing(ipython):
    run(ipython, "%load_ext fusion_nb")
    run(ipython, REFUND)
    ipython.sendline("await refund()")
    ipython.expect("refund asks: Refund 12.50 to ACME?")
    ipython.expect(APPROVE)
    ipython.sendline("y")
    ipython.expect(SEATS)
    ipython.sendline("99")  # out of bounds: said so, and asked again
    ipython.expect(r'"Seats" expected at most 50, got 99')
    ipython.expect(SEATS)
    ipython.sendline("3")
    ipython.expect(PROMPT)
    assert "Out[" in ipython.before and "accept {'confirm': True, 'seats': 3}" in ipython.before, ipython.before
    assert "ELICITATION_UNSUPPORTED" not in ipython.before
    ipython.sendline("await refund()")
    ipython.expect(APPROVE)
    ipython.sendline("!decline")
    ipython.expect(PROMPT)
    assert "'decline None'" in ipython.before, ipython.before
    ipython.sendline("await refund()")
    ipython.expect(APPROVE)
    ipython.sendeof()  # Ctrl-D dismisses
    ipython.expect(PROMPT)
    assert "(dismissed)" in ipython.before and "'cancel None'" in ipython.before, ipython.before


def test_ctrl_c_at_a_prompt_cancels_the_call_and_the_next_line_goes_to_ipython(ipython):
    """The reader thread stops with the call: it must not eat what is typed at IPython's prompt next."""
    run(ipython, "%load_ext fusion_nb")
    run(ipython, REFUND)
    ipython.sendline("await refund()")
    ipython.expect(APPROVE)
    ipython.sendintr()
    ipython.expect(PROMPT)
    assert "Stopped: refund was stopped" in ipython.before, ipython.before
    assert "alive 42" in run(ipython, "print('alive', 6 * 7)")
    assert "alive 43" in run(ipython, "print('alive', 6 * 7 + 1)")


@pytest.mark.anyio
async def test_fusion_serve_works_from_terminal_ipython(ipython):
    """No kernel loop runs between a terminal's cells: the server has its own thread, and serves while idle."""
    run(ipython, "%load_ext fusion_nb")
    run(ipython, STEPS)
    shown = run(ipython, "%fusion serve")
    url = re.search(r"MCP endpoint: (\S+)", shown).group(1)
    token = re.search(r"Bearer token: (\S+)", shown).group(1)
    assert "%fusion stop ends it" in shown and "needs a Jupyter kernel" not in shown, shown
    async with connect(url, token) as client:  # the prompt is idle: nothing of IPython's runs
        assert [tool.name for tool in (await client.list_tools()).tools] == ["steps"]
        assert (await client.call_tool("steps", {})).content[0].text == "walked"
    async with host_client(entry_of(shown)) as client:  # the Claude Desktop entry, as pasted
        assert (await client.call_tool("steps", {})).content[0].text == "walked"
    assert "'walked'" in run(ipython, "await steps()"), "cells still call tools while serving"
    assert "Stopped serving" in run(ipython, "%fusion stop")


def test_an_address_that_cannot_be_served_is_one_usage_line(ipython):
    """``%fusion serve --host`` on an address this machine does not have: one line, no traceback."""
    run(ipython, "%load_ext fusion_nb")
    shown = run(ipython, "%fusion serve --host 203.0.113.1 --port 8765")
    assert "UsageError: %fusion serve: cannot listen on 203.0.113.1:8765: Cannot assign requested address" in shown
    assert "Traceback" not in shown and "----" not in shown, shown
    assert "not serving" in run(ipython, "%fusion status")


ORDER = (
    "get_ipython().run_cell_magic('fusion_tool', 'order', "
    '\'if input_response("color").action == "missing":\\n'
    '    return require_input.elicit("Your order?", {"color": ask.enum({"r": "Red", "b": "Blue"}, "Color"), '
    '"toppings": ask.choices({"c": "Cheese", "h": "Ham", "o": "Olives"}, "Toppings").max(2)})\\n'
    'return (read_input("color"), read_input("toppings"))\')'
)


def test_choices_are_typed_as_labels_or_values_separated_by_commas(ipython):
    """SEP-1330 enums at a text prompt: labels shown, a label or a value accepted, picks by commas, bounds said."""
    run(ipython, "%load_ext fusion_nb")
    run(ipython, ORDER)
    ipython.sendline("await order()")
    ipython.expect(r"Color \(Red/Blue\): ")
    ipython.sendline("blue")
    toppings = r"Toppings \(Cheese, Ham, Olives; at most 2, separated by commas\): "
    ipython.expect(toppings)
    ipython.sendline("cheese, h, olives")
    ipython.expect(r'"Toppings" expected at most 2 picks, got 3')
    ipython.expect(toppings)
    ipython.sendline("Cheese, o")
    ipython.expect(PROMPT)
    assert "('b', ['c', 'o'])" in ipython.before, ipython.before


def test_a_page_size_that_is_no_count_is_one_usage_line(ipython):
    """``%fusion serve --page-size`` reaches the server's options: a bad one is refused before anything binds."""
    run(ipython, "%load_ext fusion_nb")
    shown = run(ipython, "%fusion serve --page-size 0")
    assert "UsageError: %fusion serve: page_size must be a whole number of items (1 or more) or None, got 0" in shown
    assert "Traceback" not in shown and "----" not in shown, shown
    assert "not serving" in run(ipython, "%fusion status")
