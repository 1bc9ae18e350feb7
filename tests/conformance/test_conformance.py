"""The official MCP conformance suite against a real ``fusion-nb serve`` of the "everything" app.

``@modelcontextprotocol/conformance`` and the Node 22 it needs are pinned in package.json here
and installed by ``make conformance`` (the system's Node 20 is not used). Each requirement set
runs at its own wire (2025-11-25 with the handshake, 2026-07-28 stateless; the 2026 set also
runs the tasks extension's scenarios, unscored by the suite but checked here). Every check
passes (issue #46): ``GAPS`` would list a failing check with the gap it names; the test fails
on any failure not listed AND on any listed check that now passes, so the list only shrinks.
Pass counts per set are printed (``-s``). Takes about 35 s (the suite's own waits).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).parent
REPO = HERE.parent.parent
BIN = HERE / "node_modules" / ".bin"
PACKAGE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance"


#: every failing check, as "<requirement set> <scenario>:<check id>", with the gap it names
GAPS: dict[str, str] = {}  # (empty: every check passes; a new gap is listed here with its reason)


def _failures(results: Path, era: str) -> tuple[set[str], dict[str, tuple[int, int]]]:
    """The failing checks of one run, and per scenario (checks passed, checks failed)."""
    failing: set[str] = set()
    counts: dict[str, tuple[int, int]] = {}
    for checks_file in sorted(results.glob("server-*/checks.json")):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks_file.parent.name)
        passed = failed = 0
        for check in json.loads(checks_file.read_text()):
            if check["status"] in ("FAILURE", "ERROR"):
                failed += 1
                failing.add(f"{era} {scenario}:{check['id']}")
            elif check["status"] == "SUCCESS":
                passed += 1
        counts[scenario] = (passed, failed)
    return failing, counts


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``fusion-nb serve`` of everything_app.py over HTTP on a free loopback port."""
    if not (BIN / "node").exists() or not PACKAGE.is_dir():
        pytest.fail("The pinned conformance suite is not installed: run `make conformance`.")
    log = tmp_path_factory.mktemp("serve") / "stderr.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSION_NB_")}
    app = str(HERE / "everything_app.py") + ":app"
    command = [sys.executable, "-m", "fusion_nb", "serve", app, "--transport", "http", "--port", "0", "--no-auth"]
    with log.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while (found := re.search(r"at (http://127\.0\.0\.1:\d+/mcp)", log.read_text())) is None:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)


def run_suite(url: str, era: str, out: Path) -> tuple[set[str], dict[str, tuple[int, int]]]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    command = [str(BIN / "conformance"), "server", "--url", url, "--requirements", era, "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=HERE, timeout=300)
    assert "=== SUMMARY ===" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    return _failures(out, era)


def scored(era: str) -> set[str]:
    """The scenarios a requirement set scores (its ``server`` list; ``not_scored`` is reported apart)."""
    return set(yaml.safe_load((PACKAGE / "requirements" / f"{era}.yaml").read_text())["server"])


@pytest.mark.timeout(600)  # two suite runs of about 15 s each, with the suite's own waits; slower under load
def test_official_conformance_suite(server_url: str, tmp_path: Path) -> None:
    failing: set[str] = set()
    for era in ("2025-11-25", "2026-07-28"):
        era_failing, counts = run_suite(server_url, era, tmp_path / era)
        failing |= era_failing
        required = scored(era)
        scored_counts = [counts[s] for s in counts if s in required]
        clean = sum(1 for _, failed in scored_counts if not failed)
        tasks = [counts[s] for s in counts if s.startswith("tasks-")]
        print(f"\nconformance {era}: {clean} of {len(scored_counts)} scored scenarios pass", end="")
        if tasks:
            print(f"; tasks extension: {sum(p for p, _ in tasks)} checks pass, {sum(f for _, f in tasks)} fail", end="")
    print()
    new = sorted(failing - GAPS.keys())
    fixed = sorted(GAPS.keys() - failing)
    assert not new, "new conformance failures (fix them, or list them in GAPS with the gap they name):\n" + "\n".join(
        new
    )
    assert not fixed, "these listed checks pass now: remove them from GAPS:\n" + "\n".join(fixed)
