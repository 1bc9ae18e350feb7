"""benchmarks/growth.py runs and reads every size it names (a benchmark nobody runs rots)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_growth_benchmark_reads_tables_and_says_where_each_was_cut():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "growth.py"), "--rounds", "1", "--max-rows", "100000"],
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
