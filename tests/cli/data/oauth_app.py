"""A module app for the OAuth tests: a plain call, a scoped tool, tasks (one held until cancelled), an elicitation."""

import anyio

from fusion_nb import Fusion, ask, progress, read_input, require_input, respond

app = Fusion("oauth-test")


@app.f.query("echo").with_string("text", "Text to echo").handle
async def echo(input, ctx):
    return {"text": input.text}


@app.f.mutation("report").scopes("reports:write").handle
async def report(input, ctx):
    return {"written": True}


@app.f.action("work").with_integer("n", "Steps").task(ttl=600, poll_interval=0.1).handle
async def work(input, ctx):
    for step in range(input.n):
        await anyio.sleep(0.05)
        yield progress(100 * (step + 1) / input.n, f"step {step + 1}")
    yield respond({"steps": input.n})


@app.f.action("confirm").interactive().handle
async def confirm(input, ctx):
    go = read_input("go")
    if go is None:
        return require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")})
    return {"go": go}


@app.f.action("hold").task(ttl=600, poll_interval=0.1).handle
async def hold(input, ctx):
    await anyio.sleep_forever()
    return "never"
