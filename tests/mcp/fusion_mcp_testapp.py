"""The tools every MCP test serves; also loaded by the stdio subprocess (``stdio_app.py``)."""

from __future__ import annotations

import anyio
from pydantic import BaseModel

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

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


class EchoOut(BaseModel):
    result: str


class Probe:
    """Events a test waits on; created lazily so a module-level app needs no running loop."""

    def __init__(self) -> None:
        self._events: dict[str, anyio.Event] = {}

    def __getitem__(self, name: str) -> anyio.Event:
        if name not in self._events:
            self._events[name] = anyio.Event()
        return self._events[name]


def make_app(name: str = "mcp-test") -> tuple[Fusion, Probe]:
    probe = Probe()
    app = Fusion(name, grace=2.0, context_factory=lambda info: {"info": info})
    f = app.f

    @(
        f.query("echo")
        .describe("Echo the text back.")
        .with_string("text", "What to echo")
        .idempotent()
        .returns(EchoOut)
        .handle
    )
    async def echo(input, ctx):
        return EchoOut(result=input.text)

    @f.action("stall").describe("Report progress once, then wait until cancelled.").handle
    async def stall(input, ctx):
        probe["entered"].set()
        yield progress(5, "entered")
        try:
            await anyio.sleep_forever()
        finally:
            probe["cleaned"].set()

    @f.query("cleaned").describe("Answer once the stall tool's cleanup has run.").handle
    async def cleaned(input, ctx):
        await probe["cleaned"].wait()
        return "cleaned"

    @f.action("flood").describe("Yield 1000 progress steps.").handle
    async def flood(input, ctx):
        for step in range(1, 1001):
            yield progress(step / 10)
            await anyio.lowlevel.checkpoint()
        yield respond("flooded")

    @f.action("burst").describe("Yield 10,000 progress steps without pausing.").handle
    async def burst(input, ctx):
        for step in range(1, 10_001):
            yield progress(step / 100)
        yield respond("burst")

    @f.action("noisy").describe("Progress that goes back and forth.").handle
    async def noisy(input, ctx):
        for value in (10, 5, 10, 30, 20, 30, 60, 100):
            yield progress(value)
            await anyio.lowlevel.checkpoint()
        yield respond("done")

    @f.action("boom").describe("Fail with a ToolError.").handle
    async def boom(input, ctx):
        raise ToolError("QUOTA_EXCEEDED", "The daily quota is used up.", recovery="Try again tomorrow.")

    @f.action("typed_boom").describe("Fail although an output schema is declared.").returns(EchoOut).handle
    async def typed_boom(input, ctx):
        raise ToolError("QUOTA_EXCEEDED", "The daily quota is used up.")

    @f.action("crash").describe("Fail with an unexpected exception.").handle
    async def crash(input, ctx):
        raise ValueError("disk on fire")

    @f.query("picture").describe("Return a PNG.").handle
    async def picture(input, ctx):
        return PNG

    @f.query("whoami").describe("Describe the request the call came from.").handle
    async def whoami(input, ctx):
        info = ctx.state["info"]
        token = info.access_token
        return {
            "protocol": info.protocol_version,
            "http": info.request is not None,
            "client": info.client_info.name if info.client_info else None,
            "token_client": token.client_id if token else None,
        }

    @(
        f.mutation("billing.refund")
        .describe("Refund an invoice once a person approves.")
        .with_string("id", "Invoice ID")
        .interactive()
        .handle
    )
    async def refund(input, ctx):
        approved = read_input("confirm")
        if approved is None:
            action = input_response("confirm").action
            if action != "missing":
                return {"decline": "refund declined", "cancel": "refund cancelled"}[action]
            return require_input.elicit(
                f"Refund invoice {input.id}?",
                {"confirm": ask.boolean("Approve the refund")},
                state={"invoice": input.id},
            )
        return f"refunded {read_request_state()['invoice']}" if approved else "refund declined"

    @f.action("onboard").describe("Three questions, one per round.").handle
    async def onboard(input, ctx):
        name, age, plan = read_input("name"), read_input("age"), read_input("plan")
        if name is None:
            return require_input.elicit("Your name?", {"name": ask.string("Name")}, state={"step": 1})
        if age is None:
            return require_input.elicit(
                f"Age of {name}?", {"age": ask.integer("Age").min(0).max(150)}, state={"step": 2}
            )
        if plan is None:
            return require_input.elicit("Plan?", {"plan": ask.enum(["free", "pro"], "Plan")}, state={"step": 3})
        return f"{name}, {age}, {plan}, last state {read_request_state()}"

    @f.action("connect").describe("OAuth-style consent through a URL.").handle
    async def connect(input, ctx):
        if input_response("consent").action == "missing":
            return require_input.url("Approve access", "https://accounts.example.com/consent", key="consent")
        return "connected" if read_input("consent") else f"not connected ({input_response('consent').action})"

    return app, probe
