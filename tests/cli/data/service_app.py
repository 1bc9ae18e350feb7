"""A module app for the CLI tests: slow tools (one silent) with observable cleanup, two rounds, echo, progress."""

import os
from pathlib import Path

import anyio

from fusion_nb import Fusion, ask, progress, read_input, read_request_state, require_input, respond

app = Fusion("cli-test")
MARKS = Path(os.environ.get("FUSION_NB_TEST_MARKS", os.devnull))


def mark(text: str) -> None:
    with MARKS.open("a") as marks:
        marks.write(f"{os.getpid()} {text}\n")


@app.f.query("echo").with_string("text", "Text to echo").handle
async def echo(input, ctx):
    return {"text": input.text, "pid": os.getpid()}


@app.f.action("slow").with_string("tag", "Label for the marks file").handle
async def slow(input, ctx):
    mark(f"started {input.tag}")
    try:
        yield progress(10, "started")
        await anyio.sleep(3600)
    finally:
        mark(f"cleanup {input.tag}")


@app.f.action("quiet").with_string("tag", "Label for the marks file").handle
async def quiet(input, ctx):
    """Marks its start, then waits without a word: its POST's answer is pending JSON, not a stream."""
    mark(f"started {input.tag}")
    try:
        await anyio.sleep(3600)
    finally:
        mark(f"cleanup {input.tag}")
    return "never"


@app.f.action("steps").with_integer("n", "Steps").with_number("delay", "Seconds per step", default=0.05).handle
async def steps(input, ctx):
    for step in range(input.n):
        await anyio.sleep(input.delay)
        yield progress(100 * (step + 1) / input.n, f"step {step + 1}")
    yield respond({"steps": input.n, "pid": os.getpid()})


@app.f.action("two.rounds").interactive().handle
async def two_rounds(input, ctx):
    first, second = read_input("first"), read_input("second")
    if first is None:
        return require_input.elicit("First?", {"first": ask.string("First answer")}, state={"round1_pid": os.getpid()})
    if second is None:
        state = read_request_state()
        return require_input.elicit(
            "Second?", {"second": ask.string("Second answer")}, state={**state, "round2_pid": os.getpid()}
        )
    return {"answers": [first, second], **read_request_state(), "round3_pid": os.getpid()}
