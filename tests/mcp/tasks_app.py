"""The task tools interop clients drive (served over HTTP in-process, or over stdio as ``tasks_app:app``).

``train`` works ``seconds`` in ten steps with progress; ``stuck`` waits until it is
cancelled and its cleanup writes "cleaned" to the file named by ``mark``, so a client
outside the process can see that its cleanup ran (the file appears whole, by rename).

``listen_app()`` is a fresh app for the task-status-on-listen tests (served in the test's
process, where its server can be observed): ``report``, ``forever`` and ``confirm``, each
polled only every 30 s, so what the client hears came on its listen stream.
"""

from pathlib import Path

import anyio

from fusion_nb import Fusion, ask, progress, read_input, require_input, respond

app = Fusion("mcp-tasks-test", grace=2.0)


@app.f.action("train").with_number("seconds").task(ttl=600, poll_interval=0.1).handle
async def train(input, ctx):
    for step in range(1, 11):
        await anyio.sleep(input.seconds / 10)
        yield progress(step * 10, f"step {step} of 10")
    yield respond(f"trained for {input.seconds} s")


@app.f.action("stuck").with_string("mark").task("required", poll_interval=0.1).handle
async def stuck(input, ctx):
    try:
        await anyio.sleep_forever()
    finally:
        # Written aside and renamed: the client polls for the file and must never read it half-written.
        aside = Path(input.mark + ".part")
        aside.write_text("cleaned")
        aside.replace(input.mark)


def listen_app() -> Fusion:
    app = Fusion("task-listen", grace=2.0)

    @app.f.action("report").with_number("seconds").task(poll_interval=30).handle
    async def report(input, ctx):
        for step in (1, 2):
            await anyio.sleep(input.seconds / 2)
            yield progress(step * 50, f"half {step} of 2")
        yield respond(f"report after {input.seconds} s")

    @app.f.action("forever").task("required", poll_interval=30).handle
    async def forever(input, ctx):
        await anyio.sleep_forever()

    @app.f.action("confirm").task(poll_interval=30).handle
    async def confirm(input, ctx):
        go = read_input("go")
        return f"go={go}" if go is not None else require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")})

    return app


#: one task tool that asks for input, polled every 0.1 s (``fusion-nb connect``'s 2025 tasks/result asks the host)
asking = Fusion("mcp-tasks-asking", grace=2.0)


@asking.f.action("confirm").task(poll_interval=0.1).handle
async def confirm(input, ctx):
    go = read_input("go")
    return f"go={go}" if go is not None else require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")})


@asking.f.query("hello").handle
def hello(input, ctx):
    return "hello"
