"""The task tools interop clients drive (served over HTTP in-process, or over stdio as ``tasks_app:app``).

``train`` works ``seconds`` in ten steps with progress; ``stuck`` waits until it is
cancelled and its cleanup writes "cleaned" to the file named by ``mark``, so a client
outside the process can see that its cleanup ran (the file appears whole, by rename).
"""

from pathlib import Path

import anyio

from fusion_nb import Fusion, progress, respond

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
