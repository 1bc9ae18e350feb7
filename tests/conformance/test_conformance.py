"""The official MCP conformance suite against a real ``fusion-nb serve`` of the "everything" app.

``@modelcontextprotocol/conformance`` and the Node 22 it needs are pinned in package.json here
and installed by ``make conformance`` (the system's Node 20 is not used). Each requirement set
runs at its own wire (2025-11-25 with the handshake, 2026-07-28 stateless; the 2026 set also
runs the tasks extension's scenarios, unscored by the suite but checked here). Not everything
passes yet (issue #46): ``GAPS`` lists every failing check with the gap it names, and the test
fails on any failure not listed AND on any listed check that now passes, so the list only
shrinks. Pass counts per set are printed (``-s``). Takes about 35 s (the suite's own waits).
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

_REQUIRED_CAPABILITY = "2026: a missing client capability is an isError result, not -32021 with requiredCapabilities"
_TASKS = "tasks follow the draft at experimental-ext-tasks@07bf500, the suite reads SEP-2663 as it is now"

#: every failing check, as "<requirement set> <scenario>:<check id>", with the gap it names
GAPS: dict[str, str] = {
    "2026-07-28 server-stateless:sep-2575-server-rejects-undeclared-capability": _REQUIRED_CAPABILITY,
    "2026-07-28 server-stateless:sep-2575-missing-capability-http-400": _REQUIRED_CAPABILITY,
    "2026-07-28 input-required-result-capability-check:sep-2322-respect-client-capabilities": _REQUIRED_CAPABILITY,
    # The tasks extension (run by the 2026 set, unscored by the suite, held to this list here).
    "2026-07-28 tasks-capability-negotiation:sep-2663-tasks-methods-non-declaring": (
        _TASKS + ": tasks/get, update, cancel from a request without the extension answer -32602, not -32021"
    ),
    "2026-07-28 tasks-dispatch-and-envelope:sep-2663-tasks-result-removed-method-not-found": (
        _TASKS + ": tasks/result is still served on 2026 (-32602 for its params, not -32601)"
    ),
    "2026-07-28 tasks-dispatch-and-envelope:tasks-removed-tasks-list": _TASKS + ": tasks/list still answers on 2026",
    "2026-07-28 tasks-dispatch-and-envelope:tasks-result-type-complete-on-non-task-responses": (
        _TASKS + ": tasks/update with an unknown key is refused, not acknowledged"
    ),
    "2026-07-28 tasks-lifecycle:sep-2663-tasks-get-status-failed": (
        _TASKS + ": a crashed handler ends completed with an isError result, not failed with an inlined error"
    ),
    "2026-07-28 tasks-mrtr-composition:sep-2663-mrtr-synchronous-before-task-creation": (
        _TASKS + ": a required task tool that asks for input creates the task first (no InputRequiredResult round)"
    ),
    "2026-07-28 tasks-mrtr-input:sep-2663-tasks-get-status-input-required": (
        _TASKS + ": the task's question is not surfaced as input_required the way the suite drives it"
    ),
    "2026-07-28 tasks-mrtr-input:tasks-mrtr-partial-fulfillment": _TASKS + ": one input request per round",
    "2026-07-28 tasks-mrtr-input:tasks-mrtr-tasks-update-resumes": (
        _TASKS + ": tasks/update with empty inputResponses is refused, not acknowledged"
    ),
    "2026-07-28 tasks-request-headers:sep-2663-server-rejects-mismatched-mcp-name-on-tasks-get": (
        _TASKS + ": Mcp-Name is not checked on tasks/*"
    ),
    "2026-07-28 tasks-required-task-error:sep-2663-server-returns-missing-capability-when-required": (
        _TASKS + ": a required task tool called without the extension answers -32003, not -32021"
    ),
}


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
