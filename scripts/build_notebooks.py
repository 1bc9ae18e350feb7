"""Write the teaching notebooks from the cell lists below, then execute them in place.

The stored outputs are what nbval compares against in ``make test``; rebuild after
changing a notebook or a repr: ``.venv/bin/python scripts/build_notebooks.py [names]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1] / "notebooks"


def md(text: str):
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str):
    return nbformat.v4.new_code_cell(text.strip())


NOTEBOOKS: dict[str, list] = {}

NOTEBOOKS["01-quickstart"] = [
    md("""
# 01 · Quickstart: a first tool in two minutes

fusion-nb turns this kernel into a host for MCP tools. Load the extension once per kernel:
"""),
    code("%load_ext fusion_nb"),
    md("""
A `%%fusion_tool` cell defines a tool. The first line is its name; the body is the handler.
`input` holds the validated arguments and `ctx` the call's context. A leading docstring is
the description agents see. The cell shows the tool's card (with a **Run** form).
"""),
    code('''
%%fusion_tool greet
"""Greet someone by name."""
return "Hello from the kernel!"
'''),
    md("Call it from any later cell, in one line. The call's live view appears in the cell:"),
    code("await greet()"),
    md("""
Arguments come from a *builder* header: `f.query` (read-only), `f.action`, or `f.mutation`
(destructive, serialised). Each `with_*` adds a validated field.
"""),
    code('''
%%fusion_tool f.query("math.add").with_integer("a", "First number").with_integer("b", "Second number", default=2)
"""Add two integers."""
return input.a + input.b
'''),
    code("await math_add(a=40)"),
    md("Bad input never reaches the handler: the caller gets one sentence naming the field."),
    code("""
from fusion_nb import ToolError

try:
    await math_add(a="forty")
except ToolError as error:
    print(error.code, "-", error.message)
"""),
    md("`%fusion list` shows every tool of this kernel; `%fusion?` explains the other commands."),
    code("%fusion list"),
]

NOTEBOOKS["02-streaming-progress"] = [
    md("""
# 02 · Streaming progress

A handler that `yield`s is a stream: each `yield progress(percent, message)` moves the bar.
Anything else yielded is ignored. `return value` is still the response.
"""),
    code("%load_ext fusion_nb\nimport anyio"),
    code('''
%%fusion_tool f.action("report.generate").with_string("quarter", "e.g. 2026Q3")
"""Build the quarterly report."""
await anyio.sleep(0.2)                  # load rows
yield progress(30, "rows loaded")
await anyio.sleep(0.2)                  # render charts
yield progress(90, "charts rendered")
return f"report for {input.quarter}: 3 charts"
'''),
    code('await report_generate(quarter="2026Q3")'),
    md("""
Progress never goes backwards (MCP requires increasing values): a lower value is dropped.
Listen to the events yourself with `app.call(..., on_progress=...)`:
"""),
    code("""
import fusion_nb

events = []
result = await fusion_nb.default_app.call("report.generate", {"quarter": "2026Q4"}, on_progress=events.append)
print(result.value)
for event in events:
    print(f"{event.percent:5.1f}%  {event.message}")
"""),
    md("""
A flood of yields is cheap: the bar coalesces its updates (about 20 widget messages a
second at most) and always ends on the exact final state.
"""),
    code('''
%%fusion_tool f.action("flood").with_integer("n")
"""Yield a lot of progress."""
for i in range(input.n):
    yield progress(100 * (i + 1) / input.n)
    if i % 1000 == 0:
        await anyio.sleep(0)
return input.n
'''),
    code("await flood(n=100_000)"),
]

NOTEBOOKS["03-cancellation"] = [
    md("""
# 03 · Cancellation: interrupt, Cancel, timeouts, cleanup

Every call owns one abort signal. The kernel's **interrupt** button, a call view's
**Cancel** button, a timeout and an MCP client's cancellation all abort it; the call settles
at once with `CANCELLED` (or `TIMEOUT`) and the handler's `finally` still runs.
"""),
    code("%load_ext fusion_nb\nimport anyio"),
    code('''
%%fusion_tool f.action("sync.database").with_integer("rows")
"""Copy rows slowly; always release the connection."""
try:
    for n in range(input.rows):
        await anyio.sleep(0.05)
        yield progress(100 * (n + 1) / input.rows, f"{n + 1} rows")
    return "copied"
finally:
    print("connection released")
'''),
    md("""
Start a call in the background with `.start(...)`; it returns the call's handle. Pressing
the view's **Cancel** button does the same as `call.cancel()`:
"""),
    code("""
import fusion_nb

call = sync_database.start(rows=1000)
await anyio.sleep(0.3)
call.cancel()
result = await call.wait()          # settled at once...
print(result.error.code, "-", result.error.message)
await fusion_nb.default_app.wait_background()   # ...while the cleanup finishes in the background
"""),
    md("""
**Interrupt.** While a cell awaits a call, the toolbar's interrupt button (■) cancels it
within a fraction of a second, and the cell stops with `CancelledError`. While no cell runs,
the interrupt button cancels the calls running in the background.

**Timeouts** abort a call the same way:
"""),
    code('''
%%fusion_tool f.action("slow.lookup").timeout(0.2)
"""Never answers in time."""
try:
    await anyio.sleep(60)
finally:
    print("lookup cleaned up")
'''),
    code("""
from fusion_nb import ToolError

try:
    await slow_lookup()
except ToolError as error:
    print(error.code, "-", error.message)
await fusion_nb.default_app.wait_background()
"""),
    md("""
**Sync code** runs in a worker thread (it cannot be killed): the call settles at once and
the thread stops cooperatively when it checks `ctx.signal`:
"""),
    code("import threading, time\nstopped = threading.Event()"),
    code('''
%%fusion_tool f.action("crunch").timeout(0.3)
"""CPU-bound work that checks the abort signal."""
done = 0
while not ctx.signal.aborted:
    time.sleep(0.01)
    done += 1
print("thread noticed the abort and stopped")
stopped.set()
return done
'''),
    code("""
try:
    await crunch()
except ToolError as error:
    print(error.code)
await anyio.to_thread.run_sync(stopped.wait, 10)
"""),
]

NOTEBOOKS["04-interactive-input"] = [
    md("""
# 04 · Interactive input: confirmations, multi-round flows, URL mode

A tool that needs a person's decision returns a **request** instead of blocking. Whoever
drives the call collects the answer and runs the handler again from the top, with the
answer readable via `read_input`. In JupyterLab the request is an inline form under the call.

This notebook runs unattended in the test suite, so it scripts the answers. Comment out
the `script_answers(...)` lines to answer the forms yourself.
"""),
    code("%load_ext fusion_nb\nfrom fusion_nb.notebook import script_answers\nscript_answers({'confirm': True})"),
    code("""
INVOICES = {"inv-7": {"id": "inv-7", "amount_cents": 1250, "customer": "ACME"}}
"""),
    code('''
%%fusion_tool f.mutation("billing.refund").with_string("id", "Invoice ID").interactive()
"""Refund an invoice once a person approves it."""
invoice = INVOICES[input.id]
approved = read_input("confirm")
if approved is None:
    return require_input.elicit(
        f"Refund {invoice['amount_cents'] / 100:.2f} to {invoice['customer']}?",
        {"confirm": ask.boolean("Approve the refund")},
        state={"invoice": invoice["id"]},
    )
return f"refunded {invoice['amount_cents']} cents" if approved else "refund declined"
'''),
    code('await billing_refund(id="inv-7")'),
    md("""
## A multi-round flow with state

Answers accumulate across the rounds of one call, and `read_request_state()` returns the
`state` given with the previous request (the same JSON value).
"""),
    code('''
%%fusion_tool f.action("onboard")
"""Ask for a name, then a plan."""
name, plan = read_input("name"), read_input("plan")
if name is None:
    return require_input.elicit("What is your name?", {"name": ask.string("Full name")}, state={"step": 1})
if plan is None:
    return require_input.elicit(f"Which plan for {name}?", {"plan": ask.enum(["free", "pro"], "Plan").default("free"),
                                                             "seats": ask.integer("Seats").min(1).max(50).default(1)}, state={"step": 2})
return f"{name} on {plan} with {read_input('seats')} seat(s) after step {read_request_state()['step']}"
'''),
    code("""
script_answers({"name": "Ada", "plan": "pro", "seats": 3})
await onboard()
"""),
    md("""
## URL mode

`require_input.url` asks the person to visit a page (OAuth consent, a payment form). Only
`https://` URLs (or `http://` to localhost) are allowed.
"""),
    code('''
%%fusion_tool f.action("connect.calendar")
"""Connect a calendar after OAuth consent."""
if input_response("consent").action == "missing":
    return require_input.url("Allow access to your calendar", "https://accounts.example.com/consent?client=fusion", key="consent")
return "connected" if read_input("consent") else f"not connected ({input_response('consent').action})"
'''),
    code("""
script_answers({"consent": True})
print(await connect_calendar())
script_answers({"consent": "decline"})
print(await connect_calendar())
"""),
    md(
        "Without any way to ask (no widget frontend, no scripted answers), a call fails at once with `ELICITATION_UNSUPPORTED` instead of hanging."
    ),
]

NOTEBOOKS["05-serving-to-agents"] = [
    md("""
# 05 · Serving to agents

`%fusion serve` publishes this kernel's tools over MCP (Streamable HTTP) on the kernel's own
event loop: loopback only, behind a generated bearer token, with DNS-rebinding checks. It
prints the endpoint, the token and configuration for Claude Desktop, VS Code and the MCP
Inspector. Calls from agents appear in the activity panel below it, with progress and Cancel.
"""),
    code("%load_ext fusion_nb\nimport anyio"),
    code('''
%%fusion_tool f.query("weather.forecast").with_string("city", "City name").with_integer("days", "Days ahead", default=3)
"""Forecast the weather for a city."""
for day in range(input.days):
    await anyio.sleep(0.05)
    yield progress(100 * (day + 1) / input.days, f"day {day + 1}")
return {"city": input.city, "forecast": ["sunny"] * input.days}
'''),
    code("%fusion serve"),
    md("""
Any MCP client can connect now. To try it without leaving the notebook, use the official
SDK's client against the running server (both protocol eras work):
"""),
    code("""
from fusion_nb.notebook import server

async with server().client() as client:
    tools = await client.list_tools()
    print([tool.name for tool in tools.tools])
    result = await client.call_tool("weather.forecast", {"city": "Oslo", "days": 2})
    print(result.structured_content)

async with server().client(mode="legacy") as client:       # the 2025-11-25 handshake era
    result = await client.call_tool("weather.forecast", {"city": "Lima"})
    print(result.content[0].text)
"""),
    md("""
Redefining a tool cell updates connected clients at once (`notifications/tools/list_changed`).
A cell that blocks in synchronous code (e.g. `time.sleep`) stalls the server too, because
the kernel loop is shared: prefer `await anyio.sleep(...)` in tools and cells.

Stop serving:
"""),
    code("%fusion stop"),
]

NOTEBOOKS["06-notebook-to-module"] = [
    md("""
# 06 · From notebook to module

The same tools as plain Python, for a package or a server process: an app, the decorator
API, and `respond()` for the response of an async generator (Python forbids `return value`
inside one). Test them with `app.call`, no notebook needed.
"""),
    code("""
import anyio
from fusion_nb import Fusion, ask, progress, read_input, require_input, respond

app = Fusion("reports")

@app.f.query("report.generate").describe("Build the quarterly report").with_string("quarter", "e.g. 2026Q3").handle
async def generate(input, ctx):
    await anyio.sleep(0.01)
    yield progress(30, "rows loaded")
    await anyio.sleep(0.01)
    yield progress(90, "charts rendered")
    yield respond({"quarter": input.quarter, "charts": 3})

@app.f.mutation("billing.refund").with_string("id", "Invoice ID").interactive().handle
async def refund(input, ctx):
    if read_input("confirm") is None:
        return require_input.elicit(f"Refund {input.id}?", {"confirm": ask.boolean("Approve")})
    return "refunded" if read_input("confirm") else "declined"

[tool.name for tool in app.tools]
"""),
    md("`app.call` returns a `CallResult`: the value, the MCP content and structured content, and any error."),
    code("""
events = []
result = await app.call("report.generate", {"quarter": "2026Q3"}, on_progress=events.append)
print(result.value)
print(result.content)
print([(e.percent, e.message) for e in events])
"""),
    md("Scripted answers stand in for the person in tests:"),
    code("""
approved = await app.call("billing.refund", {"id": "inv-7"}, answers={"confirm": True})
unanswered = await app.call("billing.refund", {"id": "inv-7"})
print(approved.value, "|", unanswered.error.code)
"""),
    md("""
A `Tool` is awaitable-callable, and the same app serves MCP clients: `app.mcp_server()`
returns the SDK's low-level server and `app.http_app()` a Streamable HTTP ASGI app.
"""),
    code("""
print(await generate(quarter="2026Q4"))
"""),
    code("""
from mcp import Client

async with Client(app.mcp_server()) as client:
    listed = await client.list_tools()
    print([tool.name for tool in listed.tools])
    called = await client.call_tool("report.generate", {"quarter": "2026Q1"})
    print(called.structured_content)
"""),
]


def build(name: str, cells: list) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    path = ROOT / f"{name}.ipynb"
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    nb.metadata.pop("widgets", None)  # widget state is not compared and only bloats the file
    nbformat.write(nb, path)
    return path


def main(names: list[str]) -> None:
    ROOT.mkdir(exist_ok=True)
    for name, cells in NOTEBOOKS.items():
        if names and not any(n in name for n in names):
            continue
        print("built", build(name, cells))


if __name__ == "__main__":
    main(sys.argv[1:])
