"""benchmarks/stdio.py measures the seed (MCP Fusion) only when told where it is built; CI has no build.

Without ``--seed-dir`` or ``FUSION_NB_SEED_DIR`` nothing about the run changes; with a folder
that holds no build, one line says why and the run goes on without the seed's rows.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the benchmark script's names (it is a script, not a package module)
bench_stdio = SimpleNamespace(**runpy.run_path(str(ROOT / "benchmarks" / "stdio.py"), run_name="bench_stdio"))


def test_without_the_option_or_the_variable_the_seed_is_not_run(monkeypatch, capsys) -> None:
    monkeypatch.delenv("FUSION_NB_SEED_DIR", raising=False)
    assert bench_stdio.seed_option(bench_stdio.arguments().parse_args([])) is None
    assert capsys.readouterr().out == ""


def test_a_folder_without_a_build_is_one_skip_line(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setenv("FUSION_NB_SEED_DIR", str(tmp_path))
    assert bench_stdio.seed_option(bench_stdio.arguments().parse_args([])) is None
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        f"### MCP Fusion (seed): skipped (no built MCP Fusion in {tmp_path.resolve()}"
        " (packages/core/dist/index.js; see this file's docstring))"
    )


def test_a_built_seed_is_served_by_the_seed_script(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    (tmp_path / "packages" / "core" / "dist").mkdir(parents=True)
    (tmp_path / "packages" / "core" / "dist" / "index.js").write_text("export {};\n")
    seed_dir = bench_stdio.seed_option(bench_stdio.arguments().parse_args(["--seed-dir", str(tmp_path)]))
    assert seed_dir == tmp_path.resolve()
    argv = bench_stdio.server_argv(bench_stdio.SEED_SERVER, seed_dir)
    assert argv == ["node", str(ROOT / "benchmarks" / "stdio_seed_server.mjs"), str(seed_dir)]


def test_the_seed_row_can_be_the_table_baseline() -> None:
    latencies = {"fusion-nb": [100e-6] * 3, bench_stdio.SEED_SERVER: [200e-6] * 3}
    rates = {"fusion-nb": [3000.0], bench_stdio.SEED_SERVER: [1000.0]}
    text = bench_stdio.table("t", latencies, rates, 32, "seed", None, bench_stdio.SEED_SERVER)
    assert "| fusion-nb | 100 | 100 | 0.50x | 3,000 | 3.00x |" in text.splitlines()


def test_rows_are_paired_with_the_seed_round_by_round() -> None:
    """Median of the per-round ratios (not of pooled times), its range, and the rounds at or below."""
    round_p50s = {
        "fusion-nb": [90e-6, 110e-6, 95e-6, 200e-6],
        "other": [300e-6, 300e-6, 300e-6, 300e-6],
        bench_stdio.SEED_SERVER: [100e-6, 100e-6, 100e-6, 100e-6],
    }
    lines = bench_stdio.paired_by_round(round_p50s, bench_stdio.SEED_SERVER).splitlines()
    assert lines[0].startswith(f"p50 paired by round against {bench_stdio.SEED_SERVER} (4 rounds)")
    assert lines[2:] == ["- fusion-nb: 1.02x [0.90-2.00], 2 of 4", "- other: 3.00x [3.00-3.00], 0 of 4"]


@pytest.mark.parametrize("where", [["--seed-dir", "{missing}"], []])
def test_the_script_runs_through_without_a_seed_build(tmp_path, where) -> None:
    """Nothing measured (every count 0): the run prints the anchor and, given a folder, the skip line."""
    missing = tmp_path / "no-seed"
    flags = ["--rounds", "0", "--client-rounds", "0", "--ts-rounds", "0", "--startup", "0"]
    argv = [sys.executable, str(ROOT / "benchmarks" / "stdio.py"), *flags, *(w.format(missing=missing) for w in where)]
    env = {name: value for name, value in os.environ.items() if name != "FUSION_NB_SEED_DIR"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr
    skipped = [line for line in done.stdout.splitlines() if "MCP Fusion (seed): skipped" in line]
    assert len(skipped) == (1 if where else 0), done.stdout
    assert "### Anchor: the seed framework's quoted figures (from another machine)" in done.stdout


def test_startup_rows_are_measured_interleaved_and_the_table_gives_fusion_nbs_share(monkeypatch) -> None:
    """One real start-up of each row (no seed build here): the serve row answers, the SDK's import exits.

    fusion-nb is measured with its bytecode compiled, as installed (not compiling each module per start).
    """
    compiled = Path(importlib.util.cache_from_source(str(ROOT / "fusion_nb" / "mcp" / "pipe.py")))
    compiled.unlink(missing_ok=True)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # (the processes measured write none themselves)
    seconds = bench_stdio.startup(ROOT / "notebooks" / "01-quickstart.ipynb", 1)
    assert compiled.is_file()
    serve = "fusion-nb serve notebooks/01-quickstart.ipynb"
    assert list(seconds) == [serve, bench_stdio.SDK_IMPORT]
    assert all(len(runs) == 1 and 0 < runs[0] < 60 for runs in seconds.values())
    text = bench_stdio.startup_table({serve: [0.70, 0.60, 0.65], bench_stdio.SDK_IMPORT: [0.50, 0.55, 0.52]})
    assert f"| {serve} | 0.650 | 0.600 |" in text.splitlines()
    assert text.splitlines()[-1] == (  # paired: 0.20, 0.05, 0.13; fastest: 0.60 - 0.50
        "fusion-nb's own share (serve minus the SDK's import): 0.130 s, the median of the paired runs; "
        "0.100 s, fastest minus fastest"
    )


@pytest.mark.parametrize("name", [*bench_stdio.SERVERS, bench_stdio.TEXT_ECHO])
def test_every_server_row_answers_a_call_on_both_eras(name) -> None:
    """Each server the benchmark starts serves the echo tool (a row whose child crashes has no figures to print;
    the SDK-transport row's writer once lacked the async context manager the SDK's dispatcher enters)."""
    for era in (bench_stdio.LEGACY, bench_stdio.MODERN):
        pipe = bench_stdio.RawPipe(bench_stdio.child_argv(name), era)
        try:
            assert len(pipe.sequential(3)) == 3
        finally:
            pipe.close()
