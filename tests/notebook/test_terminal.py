"""Terminal IPython, for real (a pty running ``ipython``): Ctrl-C, the one-line text view, ``%fusion serve``."""

import re
import sys
from pathlib import Path

import pexpect
import pytest

pytestmark = pytest.mark.kernel

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
    assert "cleaned up" in shown and shown.index("cleaned up") < shown.index("KeyboardInterrupt"), shown
    assert "KeyboardInterrupt: slow was interrupted; its cleanup ran." in shown
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


def test_serve_refuses_in_one_sentence(ipython):
    run(ipython, "%load_ext fusion_nb")
    shown = run(ipython, "%fusion serve").strip()
    assert shown.endswith(
        "%fusion serve needs a Jupyter kernel, whose event loop keeps running between cells; "
        "in a terminal serve the notebook with `fusion-nb serve notebook.ipynb` instead."
    ), shown
    assert "Error" not in shown
