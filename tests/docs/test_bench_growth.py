"""benchmarks/growth.py runs and reads every size it names (a benchmark nobody runs rots)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NO_LISTS = ["--max-list-tools", "0", "--max-tasks", "0"]  # (the lists section has its own test)
SMALL_LISTS = ["--max-tools", "-1", "--max-list-tools", "100", "--max-tasks", "100"]  # (no tools section)


def test_the_growth_benchmark_reads_tables_and_says_where_each_was_cut():
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "growth.py"),
            "--rounds",
            "1",
            "--max-rows",
            "100000",
            "--max-tools",
            "10",
            *NO_LISTS,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("| 1")]
    assert [line.split(" | ")[:2] for line in rows] == [
        ["| 10,000", "csv"],
        ["| 10,000", "json"],
        ["| 100,000", "csv"],
        ["| 100,000", "json"],
    ]
    assert "# cut: rows 0-" in rows[2] and "cut: rows 0-" in rows[3] and "1.00x" in rows[2]
    assert_tool_rows(run.stdout)


def assert_tool_rows(printed: str) -> None:
    """The tools section: each server at 0 and 10 registered tools, a figure in every column where it applies."""
    rows = [
        line.split(" | ") for line in printed.splitlines() if line.startswith(("| fusion-nb |", "| SDK", "| FastMCP"))
    ]
    assert [(row[0], row[1]) for row in rows] == [
        (f"| {server}", count) for count in ("0", "10") for server in ("fusion-nb", "SDK lowlevel", "FastMCP")
    ]
    for row in rows:
        figures = row[2:] if row[1] != "0" else row[5:6]  # with no other tool: only tools/call p50
        assert all(float(figure.strip(" |")) >= 0 for figure in figures), row


def test_the_growth_benchmark_lists_tools_and_tasks_beside_the_sdk():
    """The lists section at its two smallest sizes: tools/list beside the SDK's servers, tasks/list in memory
    and (when Debian's redis-server is here) through Redis."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "growth.py"), "--rounds", "1", "--max-rows", "0", *SMALL_LISTS],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split(" | ") for line in run.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    tools = [(row[0], row[1]) for row in rows if row[0] in ("| fusion-nb", "| SDK lowlevel", "| FastMCP (MCPServer)")]
    assert tools == [
        (server, count)
        for count in ("10", "100")
        for server in ("| fusion-nb", "| SDK lowlevel", "| FastMCP (MCPServer)")
    ]
    assert all(row[-1] == "1 |" for row in rows if row[0] == "| fusion-nb")  # 100 tools: one page by default
    stores = [row[0] for row in rows if row[0] in ("| memory", "| Redis")]
    assert stores[:1] == ["| memory"] and (stores[1:] == ["| Redis"] or "Redis: skipped" in run.stdout)
