"""A module app for the tasks-across-workers tests: task tools whose answers say which worker ran them.

``work`` takes ``n`` steps of ``delay`` seconds with progress and answers its worker's pid
(each step, and its end as "done", appended to the file ``log`` names, if any: how a test
counts the work a frozen worker did);
``hold`` says "holding on PID" and waits until it is cancelled, and its cleanup writes
"cleaned by PID" to the file named by ``mark`` (aside, then renamed: a reader polling for the
file from another process never sees it half-written); ``brief`` holds as ``hold`` does under
a ttl of 1.5 s, and its cleanup takes 0.5 s before it writes its mark (the time it ended);
``confirm`` asks for input as a task;
``echo`` is a plain call (it needs no task store, so it answers while Redis is away).

One client creates the 1,000 tasks of the volume test, so the app holds more than the default
per-client bound (100) of tasks.
"""

import os
import time
from pathlib import Path

import anyio

from fusion_nb import Fusion, ask, progress, read_input, require_input, respond
from fusion_nb.engine import tasks_of

app = Fusion("tasks-across-workers", grace=2.0)
tasks_of(app).max_per_owner = tasks_of(app).max_total = 4_000


@app.f.query("echo").with_string("text", "Text to echo").handle
async def echo(input, ctx):
    return {"text": input.text, "pid": os.getpid()}


@(
    app.f.action("work")
    .with_integer("n", "Steps")
    .with_number("delay", "Seconds per step", default=0.05)
    .with_string("log", "File each step is appended to", default="")
    .task(ttl=600, poll_interval=0.1)
    .handle
)
async def work(input, ctx):
    for step in range(input.n):
        await anyio.sleep(input.delay)
        note(input.log, f"{os.getpid()} {time.time()} step {step + 1}")
        yield progress(100 * (step + 1) / max(input.n, 1), f"step {step + 1} of {input.n}")
    note(input.log, f"{os.getpid()} {time.time()} done")
    yield respond({"steps": input.n, "pid": os.getpid()})


def note(path: str, line: str) -> None:
    if path:
        with open(path, "a") as log:
            log.write(line + "\n")


@app.f.action("hold").with_string("mark", "File the cleanup writes").task(ttl=600, poll_interval=0.1).handle
async def hold(input, ctx):
    try:
        yield progress(0, f"holding on {os.getpid()}")
        await anyio.sleep_forever()
    finally:
        aside = Path(input.mark + ".part")
        aside.write_text(f"cleaned by {os.getpid()}")
        aside.replace(input.mark)


@app.f.action("brief").with_string("mark", "File the cleanup writes").task(ttl=1.5, poll_interval=0.1).handle
async def brief(input, ctx):
    try:
        yield progress(0, f"holding on {os.getpid()}")
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.5)  # a cleanup that takes a while
        aside = Path(input.mark + ".part")
        aside.write_text(f"{os.getpid()} {time.time()}")
        aside.replace(input.mark)


@app.f.action("confirm").task(ttl=600, poll_interval=0.1).handle
async def confirm(input, ctx):
    go = read_input("go")
    if go is None:
        return require_input.elicit(f"Go ahead on {os.getpid()}?", {"go": ask.boolean("Proceed")})
    return {"go": go, "pid": os.getpid()}
