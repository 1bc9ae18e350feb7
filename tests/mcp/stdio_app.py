"""Module the stdio tests run as a subprocess: ``python -u -m fusion_nb.mcp.stdio stdio_app:app``.

``linger`` reports progress, then waits until cancelled; its cleanup writes the
file named by ``FUSION_NB_TEST_CLEANUP_MARK`` so a test outside the process can see it ran.
"""

import os
from pathlib import Path

import anyio
from fusion_mcp_testapp import make_app

from fusion_nb import progress

app, probe = make_app("mcp-stdio-test")


@app.f.action("chatty").describe("Log a line at info and one at error.").handle
async def chatty(input, ctx):
    ctx.log("info", "step", n=1)
    ctx.log("error", "bad row")
    return "done"


@app.f.action("linger").describe("Report progress, then wait until cancelled; cleanup leaves a mark.").handle
async def linger(input, ctx):
    yield progress(1, "entered")
    try:
        await anyio.sleep_forever()
    finally:
        mark = os.environ.get("FUSION_NB_TEST_CLEANUP_MARK")
        if mark:
            Path(mark).write_text("cleaned")


@(
    app.f.query("lone.surrogate")
    .describe("Return text holding a lone surrogate (as a file name read with surrogateescape).")
    .handle
)
async def lone_surrogate(input, ctx):
    return "a\udcffb"
