"""The command line itself: help, exit codes, ``check`` and the headless start-up rule."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from served import DATA, REPO, run_cli

from fusion_nb.cli import COMMANDS


def test_help_lists_every_command_and_exits_0():
    done = run_cli("--help")
    assert done.returncode == 0
    for command in ("serve", "check", "connect", "export"):
        assert f"    {command}" in done.stdout
    for command in ("serve", "check", "connect", "export"):
        sub = run_cli(command, "--help")
        assert sub.returncode == 0 and f"usage: fusion-nb {command}" in sub.stdout


def imported_modules(importtime: str) -> set[str]:
    """The modules a process imported, from its ``-X importtime`` lines on stderr."""
    return {line.rpartition("|")[2].strip() for line in importtime.splitlines() if line.startswith("import time:")}


def test_help_and_argument_parsing_never_import_the_mcp_sdk():
    """``fusion-nb --help`` and every command's parser skip the SDK (0.68 s of a 0.72 s ``--help``).

    ``-X importtime`` lists every module the real process imported; ``connect``'s bridge and
    the notebook host load it only when they run.
    """
    for argv in (["--help"], ["frobnicate"], *([command, "--help"] for command in COMMANDS)):
        done = run_cli(*argv, PYTHONPROFILEIMPORTTIME="1")
        assert done.returncode in (0, 2) and "usage: fusion-nb" in done.stdout + done.stderr, argv
        modules = imported_modules(done.stderr)
        assert "fusion_nb.cli" in modules, done.stderr[-2000:]  # (the listing is there)
        sdk = sorted(m for m in modules if m.split(".")[0] in ("mcp", "mcp_types"))
        assert sdk == [], f"fusion-nb {' '.join(argv)} imported {len(sdk)} SDK modules: {', '.join(sdk[:4])}..."


def test_usage_errors_exit_2_on_stderr():
    for argv in ([], ["frobnicate"], ["serve"], ["serve", "x.py", "--transport", "smoke-signals"]):
        done = run_cli(*argv)
        assert done.returncode == 2, argv
        assert done.stdout == "" and "usage: fusion-nb" in done.stderr


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "fusion-nb"
    assert script.exists() or shutil.which("fusion-nb")


def test_check_reports_cells_and_tools_and_never_performs_a_demo_call(tmp_path):
    ledger = tmp_path / "ledger"
    done = run_cli("check", str(DATA / "destructive.ipynb"), FUSION_NB_TEST_LEDGER=str(ledger))
    assert done.returncode == 0, done.stderr
    # the destructive demo cells stopped at their call; the fusion:run cell ran for real
    assert ledger.read_text() == "fixture loaded\n"
    lines = done.stdout.splitlines()
    demo = next(line for line in lines if "cell   6" in line)
    assert "skipped" in demo and "calls tool 'billing.refund'" in demo and "fusion:run" in demo
    assert "skipped" in next(line for line in lines if "cell   7" in line)
    assert "tagged fusion:skip" in done.stdout
    assert "ran" in next(line for line in lines if "cell   8" in line)
    swallowed = next(line for line in lines if "cell  10" in line)  # `except BaseException` cannot hide the call
    assert "skipped" in swallowed and "billing.refund" in swallowed
    # every door is guarded: the app's own call, another app made in a cell, an MCP client on the app
    for number, tool in (("11", "billing.refund"), ("12", "wipe"), ("13", "billing.refund")):
        line = next(line for line in lines if f"cell  {number}" in line)
        assert "skipped" in line and f"calls tool '{tool}'" in line
    assert "billing.refund  [destructive]" in done.stdout and '"id"' in done.stdout


def test_a_refused_call_is_one_line_of_cell_output_not_a_formatted_traceback(tmp_path):
    """IPython formats a traceback twice per failing cell (to show, and to keep in the history):
    for a skipped demo cell that was most of ``fusion-nb serve``'s own start-up (issue 27)."""
    done = run_cli("check", str(DATA / "destructive.ipynb"), "--verbose", FUSION_NB_TEST_LEDGER=str(tmp_path / "l"))
    assert done.returncode == 0, done.stderr
    refused = [line for line in done.stderr.splitlines() if line.startswith("StartupCallRefused: ")]
    assert refused[:3] == [
        "StartupCallRefused: tool calls are not performed during headless start-up (tool 'billing.refund')",
        "StartupCallRefused: tool calls are not performed during headless start-up (tool 'billing.refund')",
        "StartupCallRefused: tool calls are not performed during headless start-up (tool 'wipe')",
    ]
    assert not re.search(r"^StartupCallRefused\s+Traceback", done.stderr, re.MULTILINE), done.stderr[:2000]


def test_check_json(tmp_path):
    done = run_cli("check", str(DATA / "destructive.ipynb"), "--json", FUSION_NB_TEST_LEDGER=str(tmp_path / "l"))
    report = json.loads(done.stdout)
    assert report["ok"] is True
    statuses = [cell["status"] for cell in report["cells"]]
    assert statuses == ["ran", "ran", "ran", "skipped", "skipped", "ran", "ran"] + ["skipped"] * 4
    tools = {tool["name"]: tool for tool in report["tools"]}
    assert tools["billing.refund"]["annotations"]["destructiveHint"] is True
    assert tools["billing.refund"]["input_schema"]["required"] == ["id"]


def test_a_failing_cell_stops_start_up_with_one_message():
    for command in ("check", "serve"):
        done = run_cli(command, str(DATA / "failing.ipynb"))
        assert done.returncode == 1, done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("fusion-nb: error:")]
        assert len(errors) == 1, done.stderr
        assert "cell 3 ('# load the settings')" in errors[0]
        assert "KeyError" in errors[0] and "tag it fusion:skip" in errors[0]
        assert "Traceback" not in done.stderr and "Traceback" not in done.stdout


def test_sources_that_are_not_there_are_one_sentence():
    cases = {
        "missing.ipynb": "no such notebook",
        "missing.py": "no such file",
        "no_such_pkg.tools": "no module named 'no_such_pkg.tools'",
        "service_app:nothing": "'nothing' is not a fusion-nb app",
        "not a module!": "neither a .ipynb or .py path nor a module name",
    }
    for source, expected in cases.items():
        done = run_cli("check", source)
        assert done.returncode == 1, source
        assert expected in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_module_sources(tmp_path):
    for source in ("service_app", "service_app:app", str(DATA / "service_app.py")):
        done = run_cli("check", source)
        assert done.returncode == 0, done.stderr
        assert "two.rounds" in done.stdout


def test_stdio_rejects_http_only_options():
    done = run_cli("serve", "service_app", "--workers", "2")
    assert done.returncode == 1 and "--workers applies to --transport http only" in done.stderr


def test_repo_relative_paths_work_from_the_repo():
    assert (REPO / "notebooks" / "01-quickstart.ipynb").exists()
    done = run_cli("check", "notebooks/01-quickstart.ipynb")
    assert done.returncode == 0 and "math.add" in done.stdout


def test_a_cell_reading_stdin_fails_instead_of_eating_the_wire(tmp_path):
    notebook = tmp_path / "asks.ipynb"
    source = 'name = input("Name? ")'
    cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": source}
    notebook.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    done = run_cli("serve", str(notebook), input_text='{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
    assert done.returncode == 1
    assert "cell 1 ('name = input(\"Name? \")'): EOFError" in done.stderr
    assert done.stdout == ""


def test_progress_lines_of_processes_sharing_stderr_never_run_together():
    """Workers share the supervisor's stderr, often unbuffered (``PYTHONUNBUFFERED``): each line is one write."""
    import os
    import subprocess

    script = "from fusion_nb.cli.service import log_to_stderr\nfor i in range(3000): log_to_stderr(f'worker {i} ready')"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    read_end, write_end = os.pipe()
    workers = [subprocess.Popen([sys.executable, "-c", script], stderr=write_end, env=env) for _ in range(2)]
    os.close(write_end)
    with os.fdopen(read_end, "rb") as shared:
        lines = shared.read().decode().splitlines()
    assert [worker.wait(timeout=60) for worker in workers] == [0, 0]
    assert len(lines) == 6000
    malformed = [line for line in lines if not re.fullmatch(r"fusion-nb: worker \d+ ready", line)]
    assert malformed == [], malformed[:3]
