"""The "everything" app the official conformance suite is run against, as a user would write it.

Only fusion-nb's public API (``fusion_nb``, ``fusion_nb.engine``): the names and answers are
those of the suite's reference server (``examples/servers/typescript/everything-server.ts`` of
modelcontextprotocol/conformance), so its scenarios find what they look for. Served by
``fusion-nb serve tests/conformance/everything_app.py:app`` (see test_conformance.py).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio

from fusion_nb import (
    Audio,
    EmbeddedResource,
    Fusion,
    Image,
    ToolError,
    ask,
    input_response,
    progress,
    read_input,
    require_input,
    respond,
)

# The reference server's 1x1 PNG and a minimal WAV header (the suite checks types and mime types).
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
PNG_B64 = base64.b64encode(PNG).decode()
WAV_B64 = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA="
WAV = base64.b64decode(WAV_B64)


app = Fusion("fusion-nb-conformance", version="1.0.0")
f = app.f


@f.query("test_simple_text").describe("Tests simple text content response").handle
async def simple_text(input: Any, ctx: Any) -> Any:
    return "This is a simple text response for testing."


@f.query("test_image_content").describe("Tests image content response").handle
async def image_content(input: Any, ctx: Any) -> Any:
    return Image(PNG)


@f.query("test_audio_content").describe("Tests audio content response").handle
async def audio_content(input: Any, ctx: Any) -> Any:
    return Audio(WAV)


@f.query("test_embedded_resource").describe("Tests embedded resource content response").handle
async def embedded_resource(input: Any, ctx: Any) -> Any:
    return EmbeddedResource("test://embedded-resource", text="This is an embedded resource content.")


@f.query("test_multiple_content_types").describe("Tests response with text, image and resource").handle
async def multiple_content_types(input: Any, ctx: Any) -> Any:
    data = json.dumps({"test": "data", "value": 123})
    return [
        "Multiple content types test:",
        Image(PNG),
        EmbeddedResource("test://mixed-content-resource", text=data, mime_type="application/json"),
    ]


@f.action("test_tool_with_logging").describe("Tests tool that emits log messages during execution").handle
async def tool_with_logging(input: Any, ctx: Any) -> Any:
    for step, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if step:
            await anyio.sleep(0.05)
        ctx.log("info", message)
    return "Tool with logging executed successfully"


@f.action("test_tool_with_progress").describe("Tests tool that reports progress notifications").handle
async def tool_with_progress(input: Any, ctx: Any) -> Any:
    for value in (0, 50, 100):
        if value:
            await anyio.sleep(0.05)
        yield progress(value, f"Completed step {value} of 100")
    yield respond("progress reported")


@f.query("test_error_handling").describe("Tests error response handling").handle
async def error_handling(input: Any, ctx: Any) -> Any:
    raise ToolError("INTERNAL_ERROR", "This tool intentionally returns an error for testing")


@(
    f.action("test_elicitation")
    .describe("Tests server-initiated elicitation (user input request)")
    .with_string("message", "The message to show the user")
    .interactive()
    .handle
)
async def elicitation(input: Any, ctx: Any) -> Any:
    if input_response("response").action == "missing":
        return require_input.elicit(input.message, {"response": ask.string("User's response")})
    answer = input_response("response")
    return f"User response: action={answer.action}, content={json.dumps(answer.content or {})}"


@f.action("test_elicitation_sep1034_defaults").describe("Tests elicitation with default values").interactive().handle
async def elicitation_defaults(input: Any, ctx: Any) -> Any:
    if input_response("name").action == "missing":
        return require_input.elicit(
            "Please review and update the form fields with defaults",
            {
                "name": ask.string("User name").default("John Doe").optional(),
                "age": ask.integer("User age").default(30).optional(),
                "score": ask.number("User score").default(95.5).optional(),
                "status": ask.enum(["active", "inactive", "pending"], "User status").default("active").optional(),
                "verified": ask.boolean("Verification status").default(True).optional(),
            },
        )
    answer = input_response("name")
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content or {})}"


@f.action("test_elicitation_sep1330_enums").describe("Tests elicitation with enum schemas").interactive().handle
async def elicitation_enums(input: Any, ctx: Any) -> Any:
    if input_response("untitledSingle").action == "missing":
        options = ["option1", "option2", "option3"]
        titled = {"value1": "First Option", "value2": "Second Option", "value3": "Third Option"}
        return require_input.elicit(
            "Please select options from the enum fields",
            {
                "untitledSingle": ask.enum(options, "Select one option").optional(),
                "titledSingle": ask.enum(titled, "Select one option with titles").optional(),
                "legacyEnum": ask.enum({"opt1": "Option One", "opt2": "Option Two", "opt3": "Option Three"})
                .as_enum_names()
                .optional(),
                "untitledMulti": ask.choices(options, "Select multiple options").min(1).max(3).optional(),
                "titledMulti": ask.choices(titled, "Select multiple options with titles").optional(),
            },
        )
    answer = input_response("untitledSingle")
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content or {})}"


# The input schema as raw JSON Schema 2020-12 (the suite's json-schema-2020-12 scenario), kept as written.
CONTACT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@(
    f.query("json_schema_2020_12_tool")
    .describe("Tool with a JSON Schema 2020-12 input")
    .with_schema(CONTACT_SCHEMA)
    .handle
)
async def json_schema_tool(input: Any, ctx: Any) -> Any:
    return f"Contact {input.get('name', 'someone')} by {input.get('contactMethod', 'email')}"


# SEP-2243: parameters mirrored into Mcp-Param-* headers, checked against the body by the server.
@(
    f.query("test_custom_headers")
    .describe("A tool whose region and priority are mirrored into Mcp-Param headers")
    .with_string("region", "Where to run", header="Region")
    .with_integer("priority", "How urgent", default=1, header="Priority")
    .with_boolean("verbose", "Say more", default=False, header="Verbose")
    .with_string("query", "Not mirrored", default="")
    .handle
)
async def custom_headers(input: Any, ctx: Any) -> Any:
    return f"region={input.region} priority={input.priority}"


# 2026-07-28 multi-round input (SEP-2322), as far as fusion-nb offers it.
@f.action("test_input_required_result_elicitation").describe("MRTR: asks for a name").interactive().handle
async def mrtr_elicitation(input: Any, ctx: Any) -> Any:
    name = read_input("name")
    if name is None:
        return require_input.elicit("What is your name?", {"name": ask.string("Your name")}, key="user_name")
    return f"Hello, {name}!"


@f.action("test_input_required_result_multi_round").describe("MRTR: two rounds").interactive().handle
async def mrtr_multi_round(input: Any, ctx: Any) -> Any:
    if read_input("name") is None:
        return require_input.elicit("What is your name?", {"name": ask.string("Your name")}, state={"round": 1})
    if read_input("color") is None:
        return require_input.elicit("Favourite colour?", {"color": ask.string("Colour")}, state={"round": 2})
    return f"{read_input('name')} likes {read_input('color')}"


@f.action("test_input_required_result_request_state").describe("MRTR: keeps request state").interactive().handle
async def mrtr_request_state(input: Any, ctx: Any) -> Any:
    if read_input("ok") is None:
        return require_input.elicit("Confirm?", {"ok": ask.boolean("OK")}, state={"kind": "request-state"})
    return f"confirmed={read_input('ok')}"


@f.action("test_input_required_result_tampered_state").describe("MRTR: sealed request state").interactive().handle
async def mrtr_tampered_state(input: Any, ctx: Any) -> Any:
    if read_input("ok") is None:
        return require_input.elicit("Confirm?", {"ok": ask.boolean("OK")}, state={"secret": "server-only"})
    return "state verified"


@f.action("test_input_required_result_capabilities").describe("MRTR: a person, else the model").interactive().handle
async def mrtr_capabilities(input: Any, ctx: Any) -> Any:
    if read_input("name") is None and read_input("guess") is None:
        return require_input.first(
            require_input.elicit("What is your name?", {"name": ask.string("Your name")}),
            require_input.sample("Suggest a name", max_tokens=20, key="guess"),
        )
    return f"Hello, {read_input('name') or read_input('guess')['content'].get('text', '')}!"


@f.action("test_missing_capability").describe("Needs the client's model").interactive().handle
async def missing_capability(input: Any, ctx: Any) -> Any:
    if read_input("sample") is None:
        return require_input.sample("Say hello", max_tokens=20)
    return "Success"


@f.action("test_sampling").describe("Asks the client's model").with_string("prompt", "What to ask").handle
async def sampling(input: Any, ctx: Any) -> Any:
    reply = read_input("sample")
    if reply is None:
        return require_input.sample(input.prompt, max_tokens=100)
    return f"LLM response: {reply['content'].get('text', '')}"


@f.action("test_input_required_result_sampling").describe("MRTR: asks the client's model").handle
async def mrtr_sampling(input: Any, ctx: Any) -> Any:
    reply = read_input("capital_question")
    if reply is None:
        return require_input.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return reply["content"].get("text", "")


@f.action("test_input_required_result_list_roots").describe("MRTR: asks for the client's roots").handle
async def mrtr_list_roots(input: Any, ctx: Any) -> Any:
    roots = read_input("client_roots")
    if roots is None:
        return require_input.roots(key="client_roots")
    return "roots: " + ", ".join(root["uri"] for root in roots["roots"])


@f.action("test_input_required_result_multiple_inputs").describe("MRTR: several requests at once").handle
async def mrtr_multiple_inputs(input: Any, ctx: Any) -> Any:
    if read_input("client_roots") is None:
        return require_input.all(
            require_input.elicit("What is your name?", {"name": ask.string("Your name")}, key="user_name"),
            require_input.sample("Say hello", max_tokens=50, key="greeting"),
            require_input.roots(key="client_roots"),
            state={"asked": "all"},
        )
    return f"{read_input('name')}: {read_input('greeting')['content'].get('text', '')}"


@app.prompt("test_input_required_result_prompt")
def input_required_prompt() -> Any:
    """A prompt that asks for context first (SEP-2322 on prompts/get)."""
    context = read_input("context")
    if context is None:
        return require_input.elicit("What context should this prompt use?", {"context": ask.string("Context")})
    return f"Prompt rendered with the caller-supplied context: {context}"


# -- resources ---------------------------------------------------------------------------
app.resource("test://static-text", "This is the content of the static text resource.", mime_type="text/plain")
app.resource("test://static-binary", PNG, mime_type="image/png", description="A static binary resource (image)")
app.resource("test://watched-resource", "Watched resource content", mime_type="text/plain")
app.resource("test://stateless-static-text", "Stateless static text resource.", mime_type="text/plain")


@app.resource(
    "test://template/{id}/data",
    mime_type="application/json",
    complete=lambda argument, value, context: [id for id in ("1", "2", "42") if id.startswith(value)],
)
def template_data(id: str) -> Any:
    """A resource template with parameter substitution."""
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


# -- prompts -----------------------------------------------------------------------------
app.prompt("test_simple_prompt", "This is a simple prompt for testing.", description="A prompt without arguments")


def suggest(argument: str, value: str, context: Any) -> list[str]:
    """Completion for the prompt's arguments: a few words starting with what was typed."""
    return [word for word in ("paris", "parrot", "python") if word.startswith(value)]


@app.prompt("test_prompt_with_arguments", complete=suggest)
def prompt_with_arguments(arg1: str, arg2: str) -> Any:
    """A prompt with required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt("test_prompt_with_embedded_resource")
def prompt_with_embedded_resource(resourceUri: str) -> Any:
    """A prompt that includes an embedded resource."""
    return [
        {"role": "user", "content": EmbeddedResource(resourceUri, text="Embedded resource content for testing.")},
        {"role": "user", "content": "Please process the embedded resource above."},
    ]


@app.prompt("test_prompt_with_image")
def prompt_with_image() -> Any:
    """A prompt that includes image content."""
    return [
        {"role": "user", "content": Image(PNG)},
        {"role": "user", "content": "Please analyze the image above."},
    ]


# -- the tasks extension's fixtures (SEP-2663 scenarios) -----------------------------------
@f.query("greet").describe("Sync-only: says hello.").with_string("name", "Who to greet").handle
async def greet(input: Any, ctx: Any) -> Any:
    return f"Hello, {input.name}!"


@(
    f.action("slow_compute")
    .describe("Task-supporting: sleeps the given seconds, then answers.")
    .with_number("seconds", "How long to work", default=0)
    .task(mode="optional")
    .handle
)
async def slow_compute(input: Any, ctx: Any) -> Any:
    await anyio.sleep(input.seconds)
    return f"Computed after {input.seconds} seconds"


@f.action("failing_job").describe("Task-only: ends with a tool error.").task(mode="required").handle
async def failing_job(input: Any, ctx: Any) -> Any:
    raise ToolError("INTERNAL_ERROR", "failing_job failed on purpose")


@f.action("protocol_error_job").describe("Task-supporting: crashes.").task(mode="optional").handle
async def protocol_error_job(input: Any, ctx: Any) -> Any:
    raise RuntimeError("protocol_error_job crashed on purpose")


@(
    f.action("confirm_delete")
    .describe("Task-supporting: asks once.")
    .with_string("filename", "The file to delete")
    .interactive()
    .task(mode="optional")
    .handle
)
async def confirm_delete(input: Any, ctx: Any) -> Any:
    if read_input("confirm") is None:
        return require_input.elicit("Delete the file?", {"confirm": ask.boolean("Delete")})
    return "deleted" if read_input("confirm") else "kept"


@f.action("multi_input").describe("Task-supporting: asks two things.").interactive().task(mode="optional").handle
async def multi_input(input: Any, ctx: Any) -> Any:
    if read_input("name") is None:
        return require_input.all(
            require_input.elicit("Your name?", {"name": ask.string("Name")}, key="name"),
            require_input.elicit("Go ahead?", {"confirm": ask.boolean("Confirm")}, key="confirm"),
        )
    return f"{read_input('name')} confirmed: {read_input('confirm')}"


@f.action("test_tool_with_task").describe("Task-only: asks a name, then works.").interactive().task("required").handle
async def tool_with_task(input: Any, ctx: Any) -> Any:
    if read_input("name") is None:
        return require_input.elicit("What is your name?", {"name": ask.string("Your name")})
    return f"Hello, {read_input('name')}!"
