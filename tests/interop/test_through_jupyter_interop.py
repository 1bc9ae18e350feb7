"""Both TypeScript SDKs on a notebook's tools through a real Jupyter server's URL (issue 47).

``jupyter server`` under ``/user/alice/`` with a token (tests/jupyter_serving.py), the
notebook's kernel opened through the sessions API, ``%fusion serve`` in it; ``jupyter.mjs``
takes the Jupyter URL the serve cell printed and, on SDK 1.x (2025-11-25) and 2.x (2026-07-28),
calls with progress, cancels a call whose cleanup then runs in the kernel, answers an
elicitation, reads a shared variable, gets a prompt, runs a task (1.x's task runtime), and is
refused without or with a wrong Jupyter token; after ``%fusion stop`` each SDK's error says the
kernel is not serving. The Python SDK's side is
tests/notebook/test_through_jupyter.py.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
from jupyter_serving import TOKEN, jupyter_server, notebook_kernel
from test_interop import ERAS, run_node

from fusion_nb.jupyter_server_extension import NOT_SERVING

pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]  # uvicorn, and the kernel harness

CELLS = [
    "%load_ext fusion_nb\nimport anyio\nstates = {}\nscores = [1, 2, 3]",
    '%%fusion_tool f.query("shout").with_string("text")\n"""Upper-case a text."""\n'
    'yield progress(50, "half")\nawait anyio.sleep(0)\nreturn input.text.upper()',
    '''%%fusion_tool f.query("stall")
"""Wait until cancelled."""
states["state"] = "entered"
try:
    await anyio.sleep(3600)
finally:
    states["state"] = "cleaned"''',
    '%%fusion_tool f.query("probe")\n"""Where stall is."""\nreturn str(states.get("state"))',
    '''%%fusion_tool f.mutation("billing.refund").with_string("id", "Invoice ID").interactive()
"""Refund an invoice after a person approves it."""
approved = read_input("confirm")
if approved is None:
    return require_input.elicit(f"Refund {input.id}?", {"confirm": ask.boolean("Approve")}, state={"id": input.id})
return f"refunded {read_request_state()['id']}" if approved else "declined"''',
    '''%%fusion_tool f.action("report").with_number("seconds").task(poll_interval=0.2)
"""A job run as a task."""
await anyio.sleep(input.seconds)
return f"report after {input.seconds} s"''',
    '%%fusion_prompt review\n"""Review a function."""\nReview {function}.',
    "%fusion share scores",
]


async def test_typescript_sdks_through_the_jupyter_server(node, tmp_path):
    with jupyter_server(tmp_path) as server:
        http = httpx.AsyncClient(headers={"Authorization": f"token {TOKEN}"}, timeout=60)
        async with http, notebook_kernel(http, server) as (_, kernel):
            for cell in CELLS:
                await kernel.run(cell)
            served = await kernel.run("%fusion serve")
            printed = re.search(r"Through the Jupyter server \([^)]*\): (\S+)", served.stdout)
            assert printed is not None and printed.group(1) == server.endpoint(), served.stdout
            for sdk in ("v1", "v2"):
                seen = json.loads(await run_node(node, "jupyter.mjs", sdk, printed.group(1), TOKEN))
                assert seen["protocol"] == ERAS[sdk]
                assert {"shout", "stall", "billing.refund", "report"} <= set(seen["tools"]), seen["tools"]
                assert seen["shout"] == {"text": "VIA JUPYTER", "progress": [50]}, seen["shout"]
                cancel = seen["cancel"]
                assert cancel["entered"] == "entered" and "abort" in cancel["error"].lower(), cancel
                assert cancel["cleaned"] == "cleaned", cancel
                assert seen["elicitation"] == {"text": "refunded inv-7", "asked": ["Refund inv-7?"]}, seen
                assert "1" in seen["resource"] and "3" in seen["resource"], seen["resource"]
                assert seen["prompt"] == "Review f."
                if sdk == "v1":
                    assert seen["task"]["messages"][0] == "taskCreated", seen["task"]
                    assert seen["task"]["text"] == "report after 2.0 s", seen["task"]
                for case in ("missing", "wrong"):  # the Jupyter server's own auth refuses them
                    refused = seen["refused"][case]
                    assert refused["status"] in (401, 403) or re.search(r"HTTP 40[13]\b", refused["message"]), refused
            await kernel.run("%fusion stop")
            for sdk in ("v1", "v2"):  # the extension's one sentence reaches the TypeScript SDK's error too
                seen = json.loads(await run_node(node, "jupyter.mjs", sdk, printed.group(1), TOKEN, "stopped"))
                assert NOT_SERVING in seen["stopped"], seen
