"""Bad input in one sentence, tool metadata, middleware and presenters."""

import pytest
from pydantic import BaseModel

from fusion_nb import ToolError, progress, respond
from fusion_nb.engine import INTERNAL_ERROR, INVALID_INPUT, UNKNOWN_TOOL

pytestmark = pytest.mark.anyio


@pytest.fixture
def invoice_tool(app):
    @(
        app.f.mutation("billing.refund")
        .describe("Refund an invoice")
        .with_string("id", "Invoice ID")
        .with_integer("cents", "Amount")
        .with_enum("reason", ["duplicate", "fraud"], "Why")
        .with_boolean("notify", optional=True)
        .handle
    )
    async def refund(input, ctx):
        return {"id": input.id, "cents": input.cents, "notify": input.notify}

    return refund


async def test_unknown_tool_names_the_tool_and_the_alternatives(app, invoice_tool):
    result = await app.call("billing.refnd", {})
    assert result.error.code == UNKNOWN_TOOL
    assert result.error.message == (
        'There is no tool named "billing.refnd" (did you mean "billing.refund"? available tools: billing.refund).'
    )
    far = await app.call("weather", {})  # no near name: the list alone
    assert far.error.message == 'There is no tool named "weather" (available tools: billing.refund).'


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"cents": 5, "reason": "fraud"}, 'field "id" is required but was not sent'),
        (
            {"id": "A1", "cents": 5, "reason": "fraud", "amount": 3},
            'field "amount" is not accepted (known fields: id, cents, reason, notify), got 3 (int)',
        ),
        (
            {"id": "A1", "cents": "five", "reason": "fraud"},
            "field \"cents\" expected an integer, got 'five' (str)",
        ),
        ({"id": 7, "cents": 5, "reason": "fraud"}, 'field "id" expected a string, got 7 (int)'),
        (
            {"id": "A1", "cents": 5, "reason": "whim"},
            "field \"reason\" expected 'duplicate' or 'fraud', got 'whim' (str)",
        ),
    ],
)
async def test_invalid_input_is_one_sentence_naming_tool_field_expected_and_sent(app, invoice_tool, args, expected):
    result = await app.call("billing.refund", args)
    assert result.is_error and result.error.code == INVALID_INPUT
    assert result.error.message == f'Invalid input for tool "billing.refund": {expected}.'
    assert "\n" not in result.content[0]["text"]


async def test_several_bad_fields_are_all_named_and_handler_never_runs(app):
    ran = []
    app.f.action("t").with_integer("a").with_integer("b").handle(lambda input, ctx: ran.append(1))
    result = await app.call("t", {"a": "x"})
    assert 'field "a"' in result.error.message and 'field "b" is required' in result.error.message
    assert (await app.call("t", ["not", "an", "object"])).error.message.startswith(
        'Invalid input for tool "t": expected an object'
    )
    assert ran == []


async def test_tool_exposes_metadata_and_schemas(app, invoice_tool):
    tool = invoice_tool
    assert (tool.name, tool.description, tool.verb) == ("billing.refund", "Refund an invoice", "mutation")
    assert tool.annotations == {"destructiveHint": True}
    schema = tool.input_schema
    assert schema["type"] == "object" and set(schema["required"]) == {"id", "cents", "reason"}
    assert schema["properties"]["reason"]["enum"] == ["duplicate", "fraud"]
    assert schema["properties"]["id"]["description"] == "Invoice ID"
    assert schema["additionalProperties"] is False
    assert tool.output_schema is None
    assert await tool(id="A1", cents=5, reason="fraud") == {"id": "A1", "cents": 5, "notify": None}


async def test_verbs_annotations_and_docstring_description(app):
    @app.f.query("q").idempotent().open_world().handle
    async def q(input, ctx):
        """Look something up."""

    assert q.annotations == {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": True}
    assert q.description == "Look something up."
    assert app.f.action("a").read_only().destructive(False).handle(lambda i, c: None).annotations == {
        "readOnlyHint": True,
        "destructiveHint": False,
    }


async def test_with_model_and_returns(app):
    class Query(BaseModel):
        city: str
        days: int = 3

    class Forecast(BaseModel):
        city: str
        temps: list[float]

    @app.f.query("weather").with_model(Query).returns(Forecast).handle
    async def weather(input, ctx):
        return {"city": input.city, "temps": [20.5] * input.days}

    assert weather.output_schema["properties"]["temps"]["type"] == "array"
    result = await app.call("weather", {"city": "Oslo", "days": 2})
    assert result.structured_content == {"city": "Oslo", "temps": [20.5, 20.5]}
    assert isinstance(result.value, Forecast)
    bad = await app.call("weather", {"city": "Oslo", "extra": 1})
    assert bad.error.code == INVALID_INPUT and 'field "extra" is not accepted' in bad.error.message


async def test_output_not_matching_returns_model_is_an_internal_error(app):
    class Out(BaseModel):
        n: int

    app.f.action("bad").returns(Out).handle(lambda input, ctx: {"n": "not a number"})
    result = await app.call("bad")
    assert result.error.code == INTERNAL_ERROR and "does not match its output model Out" in result.error.message


async def test_a_result_that_contains_itself_is_one_sentence_not_an_error_id(app):
    """Issue 44: a self-containing value read as ``Tool failed with ValueError (error id ...)``."""
    loop: dict = {"a": 1}
    loop["self"] = loop
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    app.f.action("loop").handle(lambda input, ctx: loop)
    app.f.action("deep").handle(lambda input, ctx: deep)
    for name, kind in (("loop", "dict"), ("deep", "list")):
        result = await app.call(name)
        assert result.error.code == INTERNAL_ERROR
        assert result.error.message == (
            f'Tool "{name}" returned a {kind} that contains itself or is nested too deep, so it cannot be sent as JSON.'
        )


async def test_redefining_a_tool_replaces_it_and_notifies(app):
    changes = []
    app.on_tools_changed(lambda: changes.append(len(app.tools)))
    app.f.action("t").handle(lambda input, ctx: 1)
    app.f.action("t").handle(lambda input, ctx: 2)
    assert (await app.call("t")).value == 2 and changes == [1, 1]
    assert app.remove("t") and changes == [1, 1, 0]


@pytest.mark.parametrize("kind", ["async", "async_gen", "sync", "sync_gen"])
async def test_middleware_order_and_presenter_apply_to_every_kind(app, kind):
    order = []

    def mw(name):
        async def middleware(ctx, call_next):
            order.append(f"{name} in")
            ctx.state[name] = True
            value = await call_next()
            order.append(f"{name} out")
            return value

        return middleware

    app.use(mw("app"))

    async def plain(input, ctx):
        return sorted(ctx.state)

    async def async_gen(input, ctx):
        yield progress(50)
        yield respond(sorted(ctx.state))

    def sync(input, ctx):
        return sorted(ctx.state)

    def sync_gen(input, ctx):
        yield progress(50)
        return sorted(ctx.state)

    handler = {"async": plain, "async_gen": async_gen, "sync": sync, "sync_gen": sync_gen}[kind]

    app.f.action("t").use(mw("tool1")).use(mw("tool2")).present(lambda value: "state: " + ", ".join(value)).handle(
        handler
    )
    result = await app.call("t")
    assert result.content == [{"type": "text", "text": "state: app, tool1, tool2"}]
    assert order == ["app in", "tool1 in", "tool2 in", "tool2 out", "tool1 out", "app out"]


async def test_middleware_can_short_circuit_and_raise_tool_errors(app):
    async def deny(ctx, call_next):
        raise ToolError("FORBIDDEN", "Not allowed.")

    async def cached(ctx, call_next):
        return "from cache"

    app.f.action("denied").use(deny).handle(lambda i, c: "never")
    app.f.action("cached").use(cached).handle(lambda i, c: "never")
    assert (await app.call("denied")).error.code == "FORBIDDEN"
    assert (await app.call("cached")).value == "from cache"


class Markdown:
    def _repr_markdown_(self):
        return "**bold**"


PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8


@pytest.mark.parametrize(
    ("value", "content", "structured"),
    [
        ("hello", [{"type": "text", "text": "hello"}], None),
        ({"a": 1}, [{"type": "text", "text": '{"a": 1}'}], {"a": 1}),
        ([1, 2], [{"type": "text", "text": "[1, 2]"}], {"result": [1, 2]}),
        (3.5, [{"type": "text", "text": "3.5"}], {"result": 3.5}),
        (None, [], None),
        (PNG, [{"type": "image", "data": "iVBORw0KGgoAAAAAAAAAAA==", "mimeType": "image/png"}], None),
        (Markdown(), [{"type": "text", "text": "**bold**"}], None),
    ],
)
async def test_default_presenter(app, value, content, structured):
    app.f.action("v").handle(lambda input, ctx: value)
    result = await app.call("v")
    assert (result.content, result.structured_content) == (content, structured)


async def test_builder_refuses_mistakes_clearly(app):
    with pytest.raises(ValueError, match="without spaces"):
        app.f.action("two words")
    with pytest.raises(ValueError, match="twice"):
        app.f.action("t").with_string("a").with_integer("a")
    with pytest.raises(ValueError, match="positive"):
        app.f.action("t").timeout(0)
    with pytest.raises(ValueError, match="max_active"):
        app.f.action("t").concurrency(0)
