"""Shared plumbing of the reliability suite: budgets, figures, leak detectors, process probes.

Why one module: every part of the suite (bad input, stdio faults, load, engine faults)
records into the same figures table and judges replies with the same detectors, so
two runs are comparable and a detector fixed once is fixed everywhere.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Environment switch for the long budget (``make reliability`` also passes ``--reliability-long``).
LONG_ENV = "FUSION_RELIABILITY_LONG"
#: Environment override for where the figures JSON goes (``--reliability-figures`` wins).
FIGURES_ENV = "FUSION_RELIABILITY_FIGURES"


@dataclass(frozen=True)
class Budget:
    """How much work each part does: bounded for ``make test``, long for ``make reliability``.

    Every loop of the suite takes its count from here, and every wait has a deadline,
    so a run's length is bounded whatever the code under test does.
    """

    long: bool
    generated_requests: int
    load_clients: tuple[int, ...]
    load_rounds: int
    calls_per_client: int
    soak_calls: int
    #: long runs connect every client afresh each round; bounded runs keep sessions (connecting is costly)
    reconnect_each_round: bool

    @classmethod
    def choose(cls, long: bool) -> Budget:
        if long:
            return cls(
                long=True,
                generated_requests=600,
                load_clients=(10, 50, 200),
                load_rounds=5,
                calls_per_client=4,
                soak_calls=2_000,
                reconnect_each_round=True,
            )
        return cls(
            long=False,
            generated_requests=100,
            load_clients=(10, 50),
            load_rounds=3,
            calls_per_client=1,
            soak_calls=200,
            reconnect_each_round=False,
        )


def option(config: Any, name: str) -> Any:
    """A command-line option of this suite, or ``None`` when the suite was collected from a parent directory.

    (pytest registers a conftest's options only when its directory is on the command line.)
    """
    try:
        return config.getoption(name)
    except ValueError:
        return None


def long_budget(config: Any) -> bool:
    """``--reliability-long`` or ``FUSION_RELIABILITY_LONG=1``: the budget of ``make reliability``."""
    return bool(option(config, "--reliability-long")) or os.environ.get(LONG_ENV, "") not in ("", "0")


# -- figures ------------------------------------------------------------------------------
@dataclass
class CaseClass:
    """Tally of one class of hostile input: how many were tried and what went wrong."""

    tried: int = 0
    server_errors: int = 0  # 5xx or JSON-RPC internal error
    leaked: int = 0  # traceback, path, module path or memory address in a reply
    oversized: int = 0
    hung: int = 0  # no answer within the case's deadline


@dataclass
class LoadRound:
    """One round of the load test: what ran, how fast, and what was left behind."""

    era: str
    clients: int
    round: int
    calls: int
    aborted: int
    protocol_errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    rss_mb: float
    server_tracebacks: int = 0
    leaks: list[str] = field(default_factory=list)

    @property
    def calls_per_second(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0


class Figures:
    """The suite's figures, filled by the tests and printed/written at the end of the run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.classes: dict[str, CaseClass] = {}
        self.rounds: list[LoadRound] = []
        self.limits: dict[str, tuple[int, int]] = {}  # tool -> (peak concurrent bodies, limit)
        self.never_settled = 0
        self.entered = 0
        self.cleaned = 0
        self.leaks: list[str] = []
        self.notes: list[str] = []
        self.attacks: dict[str, dict[str, Any]] = {}  # attack -> {figure: value}, printed every run

    def case(self, name: str) -> CaseClass:
        with self._lock:
            return self.classes.setdefault(name, CaseClass())

    def peak(self, tool: str, peak: int, limit: int) -> None:
        with self._lock:
            old = self.limits.get(tool, (0, limit))[0]
            self.limits[tool] = (max(old, peak), limit)

    def attack(self, name: str, **figures: Any) -> None:
        """Record what one attack did (e.g. ``header flood``: bytes sent, RSS before and after)."""
        with self._lock:
            self.attacks.setdefault(name, {}).update(figures)

    @property
    def empty(self) -> bool:
        return not (self.classes or self.rounds or self.limits or self.notes or self.entered or self.attacks)

    def as_json(self) -> dict[str, Any]:
        return {
            "classes": {name: vars(c) for name, c in sorted(self.classes.items())},
            "totals": {
                "cases": sum(c.tried for c in self.classes.values()),
                "server_errors_5xx": sum(c.server_errors for c in self.classes.values()),
                "internal_text_leaked": sum(c.leaked for c in self.classes.values()),
                "oversized_replies": sum(c.oversized for c in self.classes.values()),
                "hung": sum(c.hung for c in self.classes.values()),
                "leaks_found": len(self.leaks) + sum(len(r.leaks) for r in self.rounds),
                "never_settled_calls": self.never_settled,
                "handlers_entered": self.entered,
                "cleanups_finished": self.cleaned,
            },
            "peak_concurrent_bodies": {tool: {"peak": p, "limit": lim} for tool, (p, lim) in self.limits.items()},
            "load": [
                {**vars(r), "calls_per_second": round(r.calls_per_second, 1)}
                for r in sorted(self.rounds, key=lambda r: (r.era, r.clients, r.round))
            ],
            "attacks": {name: dict(figures) for name, figures in sorted(self.attacks.items())},
            "leaks": self.leaks,
            "notes": self.notes,
        }

    def table(self) -> str:
        data = self.as_json()
        lines = ["", "fusion-nb reliability figures", "=" * 29]
        lines.append(f"{'class of input':<34}{'tried':>7}{'5xx':>6}{'leaked':>8}{'big':>5}{'hung':>6}")
        for name, c in data["classes"].items():
            lines.append(
                f"{name:<34}{c['tried']:>7}{c['server_errors']:>6}{c['leaked']:>8}{c['oversized']:>5}{c['hung']:>6}"
            )
        totals = data["totals"]
        lines.append("")
        for key, value in totals.items():
            lines.append(f"{key.replace('_', ' '):<34}{value:>7}")
        if data["peak_concurrent_bodies"]:
            lines.append("")
            lines.append(f"{'peak concurrent bodies':<34}{'peak':>7}{'limit':>6}")
            for tool, row in sorted(data["peak_concurrent_bodies"].items()):
                lines.append(f"{tool:<34}{row['peak']:>7}{row['limit']:>6}")
        if data["load"]:
            lines.append("")
            lines.append(
                f"{'era':<6}{'N':>5}{'round':>6}{'calls':>7}{'abort':>6}{'err':>5}"
                f"{'calls/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'RSS MB':>8}{'leaks':>6}{'tracebacks':>11}"
            )
            for r in data["load"]:
                lines.append(
                    f"{r['era']:<6}{r['clients']:>5}{r['round']:>6}{r['calls']:>7}{r['aborted']:>6}"
                    f"{r['protocol_errors']:>5}{r['calls_per_second']:>9.1f}{r['p50_ms']:>8.1f}"
                    f"{r['p99_ms']:>8.1f}{r['rss_mb']:>8.1f}{len(r['leaks']):>6}{r['server_tracebacks']:>11}"
                )
        if data["attacks"]:
            lines.append("")
            lines.append(f"{'attack':<34}figures")
            for name, figures in data["attacks"].items():
                shown = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in figures.items())
                lines.append(f"{name:<34}{shown}")
        for leak in data["leaks"]:
            lines.append(f"leak: {leak}")
        for note in data["notes"]:
            lines.append(f"note: {note}")
        return "\n".join(lines)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.as_json(), indent=2, sort_keys=True) + "\n")


#: The one figures object of this pytest process (the conftest prints and writes it).
FIGURES = Figures()


# -- raw HTTP clients ---------------------------------------------------------------------
def mcp_headers(token: str | None, **extra: str) -> dict[str, str]:
    """The headers of a raw POST to an MCP endpoint: JSON in, JSON or events out, the bearer token."""
    return {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **({"Authorization": f"Bearer {token}"} if token else {}),
        **extra,
    }


# -- what a client must never see ---------------------------------------------------------
_INTERNAL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("traceback", re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")),
    ("file path", re.compile(r"(?:^|[\s'\"(=:,\[])/(?:[\w.@+-]+/)+[\w.@+-]*")),
    ("windows path", re.compile(r"\b[A-Za-z]:\\\\?[\w.-]+\\")),
    (
        "module path",
        re.compile(
            r"\b(?:fusion_nb|mcp_types|mcp\.(?:server|shared|client|types)|starlette|uvicorn|anyio|"
            r"pydantic_core|httpx|httpcore|asyncio|trio|builtins|json\.decoder)\.[A-Za-z_]"
        ),
    ),
    ("memory address", re.compile(r"\b0x[0-9a-fA-F]{6,}\b")),
    ("site-packages", re.compile(r"site-packages|dist-packages")),
)


def internal_text(body: str) -> list[str]:
    """The kinds of internal text found in a reply body (empty when it is clean)."""
    return [kind for kind, pattern in _INTERNAL_PATTERNS if pattern.search(body)]


# -- process probes -----------------------------------------------------------------------
def open_fds() -> int:
    """File descriptors this process holds (sockets, pipes, files)."""
    return len(os.listdir("/proc/self/fd"))


def rss_mb() -> float:
    """Resident set size of this process in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``; 0 for no values."""
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[min(98, max(0, round(q * 100) - 1))]


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass (thread-side waits only)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# -- engine state ---------------------------------------------------------------------------
#: What ``app.stats()`` must report as zero once an app is idle (requested from the engine).
IDLE_STATS = (  # app.stats(): slots_* sum every tool's concurrency limit and mutation serializer
    "active_calls",
    "background_tasks",
    "slots_active",
    "slots_queued",
    "threads_running",
    "threads_abandoned",
)


def engine_residue(app: Any) -> list[str]:
    """Everything the engine still holds after a round, through its public API (``app.stats()``)."""
    residue = []
    if app.active_calls:
        residue.append(f"active calls: {app.active_calls}")
    if app.background_tasks:
        residue.append(f"background tasks: {app.background_tasks}")
    stats = app.stats()
    for name in IDLE_STATS:
        value = getattr(stats, name)
        if value:
            residue.append(f"{name}={value}")
    return residue


# -- comparing two runs -----------------------------------------------------------------------
def compare(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Side-by-side totals and load rows of two figures JSON files (``python reliability_support.py a b``)."""
    lines = [f"{'figure':<40}{'before':>12}{'after':>12}"]
    for key in sorted(set(before.get("totals", {})) | set(after.get("totals", {}))):
        lines.append(
            f"{key:<40}{before.get('totals', {}).get(key, '-')!s:>12}{after.get('totals', {}).get(key, '-')!s:>12}"
        )

    def rows(data: dict[str, Any]) -> dict[tuple[str, int, int], dict[str, Any]]:
        return {(r["era"], r["clients"], r["round"]): r for r in data.get("load", [])}

    old, new = rows(before), rows(after)
    for key in sorted(set(old) | set(new)):
        for field_name in ("calls_per_second", "p50_ms", "p99_ms", "rss_mb"):
            a = old.get(key, {}).get(field_name)
            b = new.get(key, {}).get(field_name)
            label = f"{key[0]} N={key[1]} round {key[2]} {field_name}"
            shown_a = f"{a:.1f}" if isinstance(a, float | int) else "-"
            shown_b = f"{b:.1f}" if isinstance(b, float | int) else "-"
            lines.append(f"{label:<40}{shown_a:>12}{shown_b:>12}")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 3:
        raise SystemExit("usage: python tests/reliability/reliability_support.py BEFORE.json AFTER.json")
    print(compare(json.loads(Path(sys.argv[1]).read_text()), json.loads(Path(sys.argv[2]).read_text())))
