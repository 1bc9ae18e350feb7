"""The app the reliability suite attacks: a few tools shaped like real ones, instrumented from inside.

Every body counts itself in and out (``Tally``), so the suite can compare entered
handlers with finished cleanups and measure how many bodies of one tool ran at
once, as seen by the bodies themselves rather than by the engine's own bookkeeping.
When ``FUSION_RELIABILITY_LOG`` names a file (the stdio subprocess), each entry and
cleanup is also appended there, so a parent process can observe cleanup after its
child has exited.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

from fusion_nb import (
    Fusion,
    ToolError,
    ask,
    input_response,
    progress,
    read_input,
    read_request_state,
    require_input,
    respond,
)

#: The concurrency limit of the ``limited`` tool (bodies counted inside must never exceed it).
LIMITED_MAX_ACTIVE = 3
#: A secret-looking path the ``crash`` tool's exception names; it must never reach a client.
SECRET_PATH = "/srv/acme/secrets/db-credentials.ini"


class Tally:
    """Bodies entered, cleanups finished, and the peak number of bodies running at once per tool."""

    def __init__(self, log_path: str | None = None) -> None:
        self._lock = threading.Lock()
        self.entered = 0
        self.cleaned = 0
        self.running: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self._log = Path(log_path) if log_path else None

    def enter(self, tool: str) -> None:
        with self._lock:
            self.entered += 1
            self.running[tool] += 1
            self.peak[tool] = max(self.peak[tool], self.running[tool])
        self._write(f"entered {tool}")

    def leave(self, tool: str) -> None:
        with self._lock:
            self.cleaned += 1
            self.running[tool] -= 1
        self._write(f"cleaned {tool}")

    def _write(self, line: str) -> None:
        if self._log is not None:
            with self._log.open("a") as out:  # one short append per event: visible after a crash too
                out.write(line + "\n")

    def reset_peaks(self) -> None:
        with self._lock:
            self.peak.clear()


def make_reliability_app(name: str = "reliability", tally: Tally | None = None) -> tuple[Fusion, Tally]:
    """A fresh app with the tools every part of the suite uses, and the tally its bodies write to."""
    tally = tally or Tally(os.environ.get("FUSION_RELIABILITY_LOG"))
    app = Fusion(name, grace=2.0)
    f = app.f

    @f.query("echo").describe("Echo the text back.").with_string("text", "What to echo").handle
    async def echo(input: Any, ctx: Any) -> Any:
        tally.enter("echo")
        try:
            return input.text
        finally:
            tally.leave("echo")

    @f.query("measure").describe("Length of the text.").with_string("text", "Any text").handle
    async def measure(input: Any, ctx: Any) -> Any:
        return {"length": len(input.text)}

    @(
        f.query("typed")
        .describe("Takes one field of each kind; answers ok.")
        .with_integer("count", "A whole number")
        .with_number("ratio", "Any number")
        .with_boolean("flag", "Yes or no")
        .with_enum("mode", ["fast", "safe"], "How to run")
        .handle
    )
    async def typed(input: Any, ctx: Any) -> Any:
        return "ok"

    @(
        f.action("stream")
        .describe("Report progress for a number of steps, then answer.")
        .with_integer("steps", "How many steps", default=5)
        .with_number("delay", "Seconds per step", default=0.01)
        .handle
    )
    async def stream(input: Any, ctx: Any) -> Any:
        tally.enter("stream")
        try:
            for step in range(1, input.steps + 1):
                await anyio.sleep(input.delay)
                yield progress(100 * step / input.steps, f"step {step}")
            yield respond(f"streamed {input.steps}")
        finally:
            tally.leave("stream")

    @(
        f.action("limited")
        .describe("A scarce resource: at most a few at once.")
        .with_number("delay", "Seconds of work", default=0.02)
        .concurrency(LIMITED_MAX_ACTIVE, 10_000)
        .handle
    )
    async def limited(input: Any, ctx: Any) -> Any:
        tally.enter("limited")
        try:
            await anyio.sleep(input.delay)
            return "done"
        finally:
            tally.leave("limited")

    @(
        f.mutation("wipe")
        .describe("A destructive change: one at a time.")
        .with_number("delay", "Seconds of work", default=0.01)
        .handle
    )
    async def wipe(input: Any, ctx: Any) -> Any:
        tally.enter("wipe")
        try:
            await anyio.sleep(input.delay)
            return "wiped"
        finally:
            tally.leave("wipe")

    @f.action("hang").describe("Report progress once, then wait until cancelled.").handle
    async def hang(input: Any, ctx: Any) -> Any:
        tally.enter("hang")
        try:
            yield progress(1, "entered")
            await anyio.sleep_forever()
        finally:
            tally.leave("hang")

    @f.action("flood").describe("Yield many progress steps as fast as possible.").handle
    async def flood(input: Any, ctx: Any) -> Any:
        tally.enter("flood")
        try:
            for step in range(1, 200_001):
                yield progress(step / 2_000)
                await anyio.lowlevel.checkpoint()
            yield respond("flooded")
        finally:
            tally.leave("flood")

    @f.action("crash").describe("Fail with an unexpected exception that names a secret path.").handle
    async def crash(input: Any, ctx: Any) -> Any:
        raise FileNotFoundError(2, "No such file or directory", SECRET_PATH)

    @f.action("refuse").describe("Fail with the author's own error.").handle
    async def refuse(input: Any, ctx: Any) -> Any:
        raise ToolError("QUOTA_EXCEEDED", "The daily quota is used up.", recovery="Try again tomorrow.")

    def approval(tool: str) -> Any:
        async def handler(input: Any, ctx: Any) -> Any:
            approved = read_input("confirm")
            if approved is None:
                action = input_response("confirm").action
                if action != "missing":
                    return f"{tool} {action}"
                return require_input.elicit(
                    f"{tool} {input.id}?", {"confirm": ask.boolean("Approve")}, state={"id": input.id}
                )
            return f"{tool} done {read_request_state()['id']}" if approved else f"{tool} declined"

        return handler

    f.mutation("refund").describe("Refund once a person approves.").with_string("id", "Invoice").interactive().handle(
        approval("refund")
    )
    f.mutation("delete").describe("Delete once a person approves.").with_string("id", "Record").interactive().handle(
        approval("delete")
    )
    return app, tally
