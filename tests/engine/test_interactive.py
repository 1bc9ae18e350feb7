"""Multi-round input in the engine: scripted, re-asking, deferred (stateless) and aborted."""

import json
import re
from types import SimpleNamespace

import anyio
import pytest

from fusion_nb import InputResponse, ask, input_response, read_input, read_request_state, require_input, respond
from fusion_nb.engine import (
    CANCELLED,
    ELICITATION_ROUNDS_EXCEEDED,
    ELICITATION_UNSUPPORTED,
    INTERNAL_ERROR,
    INVALID_ANSWER,
    INVALID_INPUT,
    DeferToClient,
    InputChannel,
    form_schema,
    validate_form,
)
from fusion_nb.engine._ask import fields_from_schema  # (the engine's own: a schema read back as fields)

pytestmark = pytest.mark.anyio

INVOICES = {"inv-7": {"id": "inv-7", "amount_cents": 1250, "customer": "ACME"}}


@pytest.fixture
def refund(app):
    processed, entries = [], []

    @app.f.mutation("billing.refund").with_string("id", "Invoice ID").interactive().handle
    async def refund(input, ctx):
        entries.append(read_request_state())
        invoice = INVOICES[input.id]
        approved = read_input("confirm")
        if approved is None:
            if input_response("confirm").action in ("decline", "cancel"):
                return f"refund {input_response('confirm').action}d"
            return require_input.elicit(
                f"Refund {invoice['amount_cents'] / 100:.2f} to {invoice['customer']}?",
                {"confirm": ask.boolean("Approve the refund")},
                state={"invoice": invoice["id"]},
            )
        processed.append(invoice["id"])
        return f"refunded {invoice['amount_cents']} cents" if approved else "refund declined"

    return SimpleNamespace(tool=refund, processed=processed, entries=entries)


async def test_refund_with_scripted_approval(app, refund):
    seen = []
    result = await app.call(
        "billing.refund", {"id": "inv-7"}, answers=lambda request: seen.append(request) or {"confirm": True}
    )
    assert result.value == "refunded 1250 cents"
    assert refund.processed == ["inv-7"]
    assert refund.entries == [None, {"invoice": "inv-7"}], "state comes back as the same JSON value"
    (request,) = seen
    assert request.message == "Refund 12.50 to ACME?"
    assert request.schema == {
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "description": "Approve the refund"}},
        "required": ["confirm"],
    }


async def test_refund_mapping_answers_and_false(app, refund):
    assert (await app.call("billing.refund", {"id": "inv-7"}, answers={"confirm": True})).value == "refunded 1250 cents"
    assert (await app.call("billing.refund", {"id": "inv-7"}, answers={"confirm": False})).value == "refund declined"


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_refund_decline_and_cancel(app, refund, action):
    result = await app.call("billing.refund", {"id": "inv-7"}, answers={"confirm": action})
    assert result.value == f"refund {action}d" and refund.processed == []


async def test_no_channel_fails_fast_without_running_past_the_request(app, refund):
    result = await app.call("billing.refund", {"id": "inv-7"})
    assert result.error.code == ELICITATION_UNSUPPORTED
    assert (
        result.error.message
        == "Tool \"billing.refund\" needs input ('Refund 12.50 to ACME?') but this caller has no way to ask for it."
    )
    assert refund.entries == [None] and refund.processed == []
    partial = await app.call("billing.refund", {"id": "inv-7"}, answers={"other": 1})
    assert partial.error.code == ELICITATION_UNSUPPORTED


async def test_three_rounds_accumulate_answers_and_state(app):
    @app.f.action("signup").handle
    def signup(input, ctx):  # a sync handler: the answers reach worker threads too
        name, age, plan = read_input("name"), read_input("age"), read_input("plan")
        if name is None:
            return require_input.elicit("Your name?", {"name": ask.string("Name")}, state={"step": 1})
        if age is None:
            assert read_request_state() == {"step": 1}
            return require_input.elicit(
                f"Age of {name}?", {"age": ask.integer("Age").min(0).max(150)}, state={"step": 2, "name": name}
            )
        if plan is None:
            assert read_request_state() == {"step": 2, "name": name}
            return require_input.elicit(
                "Plan?",
                {"plan": ask.enum(["free", "pro"], "Plan").default("free"), "note": ask.string().optional()},
                state=[3],
            )
        assert read_request_state() == [3]
        return {"name": name, "age": age, "plan": plan, "note": input_response("note").value}

    asked = []

    def person(request):
        asked.append(request.message)
        return {"Your name?": {"name": "Ada"}, "Age of Ada?": {"age": 36}, "Plan?": {}}[request.message]

    result = await app.call("signup", answers=person)
    assert asked == ["Your name?", "Age of Ada?", "Plan?"]
    assert result.value == {"name": "Ada", "age": 36, "plan": "free", "note": None}


@pytest.fixture
def endless(app):
    @app.f.action("endless").max_rounds(3).handle
    async def endless(input, ctx):
        n = sum(1 for k in range(20) if read_input(f"q{k}") is not None)
        yield respond(require_input.elicit(f"Question {n}", {f"q{n}": ask.string()}))

    @app.f.action("endless8").handle
    async def endless8(input, ctx):
        n = sum(1 for k in range(20) if read_input(f"q{k}") is not None)
        return require_input.elicit(f"Question {n}", {f"q{n}": ask.string()})

    return endless


async def test_round_cap_default_eight_and_per_tool(app, endless):
    asked = []

    def answer(request):
        asked.append(request.message)
        return {next(iter(request.fields)): "x"}

    result = await app.call("endless8", answers=answer)
    assert result.error.code == ELICITATION_ROUNDS_EXCEEDED and len(asked) == 8
    assert result.error.message == 'Tool "endless8" asked for input more than 8 times in one call.'
    asked.clear()
    assert (await app.call("endless", answers=answer)).error.code == ELICITATION_ROUNDS_EXCEEDED and len(asked) == 3
    app.max_rounds = 2
    asked.clear()
    assert (await app.call("endless8", answers=answer)).error.code == ELICITATION_ROUNDS_EXCEEDED and len(asked) == 2


@pytest.fixture
def pick(app):
    @app.f.action("pick").handle
    async def pick(input, ctx):
        if read_input("n") is None:
            return require_input.elicit(
                "Pick", {"n": ask.number("A number").min(1).max(10), "color": ask.enum(["red", "blue"])}
            )
        return (read_input("n"), read_input("color"))

    return pick


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"n": "five", "color": "red"}, "\"n\" expected a number, got 'five'"),
        ({"n": 11, "color": "red"}, '"n" expected at most 10, got 11'),
        ({"n": 0, "color": "red"}, '"n" expected at least 1, got 0'),
        ({"n": 5, "color": "green"}, "\"color\" expected one of 'red', 'blue', got 'green'"),
        ({"n": 5}, '"color" is required but was not answered'),
        ({"n": True, "color": "red"}, '"n" expected a number, got True'),
    ],
)
async def test_invalid_answers_are_refused_where_the_channel_cannot_ask_again(app, pick, answer, problem):
    result = await app.call("pick", answers=answer)
    assert result.error.code == INVALID_ANSWER
    assert result.error.message == f'Invalid answer for tool "pick": {problem}.'


class Person(InputChannel):
    """A channel that can ask again (like a form): it records the problems it was shown."""

    can_reask = True

    def __init__(self, replies):
        self.replies, self.problems = list(replies), []

    async def ask(self, question):
        self.problems.append(list(question.problems) or None)
        return InputResponse("accept", self.replies.pop(0))


async def test_invalid_answers_are_asked_again_where_the_channel_can(app, pick):
    person = Person([{"n": 50, "color": "red"}, {"n": 5, "color": "mauve"}, {"n": 5, "color": "blue"}])
    result = await app.run(app.request("pick", channel=person))
    assert result.value == (5, "blue")
    assert person.problems == [
        None,
        ['"n" expected at most 10, got 50'],
        ["\"color\" expected one of 'red', 'blue', got 'mauve'"],
    ]


async def test_abort_while_waiting_for_answers_cancels_and_cleans_up(app):
    waiting, cleaned = anyio.Event(), []

    class Never(InputChannel):
        async def ask(self, question):
            try:
                waiting.set()
                await anyio.sleep_forever()
            finally:
                cleaned.append("channel")

    @app.f.action("confirm").handle
    async def confirm(input, ctx):
        try:
            if read_input("ok") is None:
                return require_input.elicit("OK?", {"ok": ask.boolean()})
            return "never"
        finally:
            cleaned.append("handler")

    call = app.start(app.request("confirm", channel=Never()))
    await waiting.wait()
    assert call.status == "waiting" and call.request.message == "OK?"
    call.cancel()
    assert (await call.wait()).error.code == CANCELLED
    await app.wait_background(5)
    assert cleaned == ["handler", "channel"]


@pytest.mark.parametrize(
    "url", ["http://example.com/pay", "ftp://example.com", "javascript:alert(1)", "https://", "http://10.0.0.1/x"]
)
async def test_url_mode_refuses_unsafe_urls(app, url):
    @app.f.action("pay").handle
    async def pay(input, ctx):
        return require_input.url("Pay here", url)

    result = await app.call("pay", answers={"url": True})
    assert result.error.code == INTERNAL_ERROR
    assert (
        f"require_input.url refuses {url!r}: only https:// URLs (or http:// to localhost) may be shown to a person"
        in str(result.exception)  # for the author (log, notebook); the client sees only the class and an id
    )
    assert url not in result.error.message


@pytest.mark.parametrize(
    "url",
    ["https://pay.example.com/checkout?id=1", "http://localhost:8888/cb", "http://127.0.0.1/x", "http://[::1]:9/x"],
)
async def test_url_mode_with_safe_urls(app, url):
    @app.f.action("pay").handle
    async def pay(input, ctx):
        if input_response("consent").action == "missing":
            return require_input.url("Approve access", url, key="consent", state={"u": url})
        return (read_input("consent"), input_response("consent").action, read_request_state())

    assert (await app.call("pay", answers={"consent": True})).value == (True, "accept", {"u": url})
    assert (await app.call("pay", answers={"consent": "decline"})).value == (None, "decline", {"u": url})


async def test_deferred_rounds_carry_a_json_continuation(app, refund):
    args = {"id": "inv-7"}
    first = await app.run(app.request("billing.refund", args, channel=DeferToClient()))
    assert not first.is_error and first.input_required is not None
    request, cont = first.input_required["request"], first.input_required["continuation"]
    assert request.message == "Refund 12.50 to ACME?"
    cont = json.loads(json.dumps(cont))  # it travels through the client
    assert cont["tool"] == "billing.refund" and cont["round"] == 1 and cont["pending"]["state"] == {"invoice": "inv-7"}

    done = await app.run(
        app.request(
            "billing.refund",
            args,
            channel=DeferToClient(),
            resume=cont,
            response=InputResponse("accept", {"confirm": True}),
        )
    )
    assert done.value == "refunded 1250 cents"
    assert refund.entries[-1] == {"invoice": "inv-7"}

    bad = await app.run(
        app.request("billing.refund", args, channel=DeferToClient(), resume=cont, response={"confirm": "yes"})
    )
    assert bad.error.code == INVALID_ANSWER and '"confirm" expected true or false' in bad.error.message

    foreign = await app.run(
        app.request("billing.refund", {"id": "inv-8"}, channel=DeferToClient(), resume=cont, response={"confirm": True})
    )
    assert foreign.error.code == INVALID_INPUT and "does not belong to this call" in foreign.error.message
    garbage = await app.run(
        app.request("billing.refund", args, resume={"tool": "billing.refund"}, response={"confirm": True})
    )
    assert garbage.error.code == INVALID_INPUT


async def test_deferred_round_numbers_continue_across_resumes(app, endless):
    cont, n = None, 0
    while True:
        result = await app.run(
            app.request("endless", channel=DeferToClient(), resume=cont, response={f"q{n - 1}": "x"} if cont else None)
        )
        if result.input_required is None:
            break
        cont, n = result.input_required["continuation"], n + 1
    assert result.error.code == ELICITATION_ROUNDS_EXCEEDED and n == 3


def test_form_schema_is_flat_and_complete():
    fields = {
        "name": ask.string("Name").default("Ada"),
        "age": ask.integer("Age").min(0).max(150),
        "ratio": ask.number().describe("Ratio").optional(),
        "ok": ask.boolean("OK"),
        "plan": ask.enum(["free", "pro"], "Plan"),
    }
    assert form_schema(fields) == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Name", "default": "Ada"},
            "age": {"type": "integer", "description": "Age", "minimum": 0, "maximum": 150},
            "ratio": {"type": "number", "description": "Ratio"},
            "ok": {"type": "boolean", "description": "OK"},
            "plan": {"type": "string", "enum": ["free", "pro"], "description": "Plan"},
        },
        "required": ["name", "age", "ok", "plan"],
    }
    with pytest.raises(TypeError):
        ask.string().min(1)
    with pytest.raises(ValueError):
        ask.integer().default("x")


async def test_a_nested_inline_call_sees_only_its_own_answers(app):
    @app.f.action("inner").handle
    async def inner(input, ctx):
        return read_input("confirm")

    @app.f.action("outer").handle
    async def outer(input, ctx):
        if read_input("confirm") is None:
            return require_input.elicit("OK?", {"confirm": ask.boolean()})
        nested = await app.run(app.request("inner"))
        return (read_input("confirm"), nested.value)

    result = await app.run(app.request("outer", answers={"confirm": True}))
    assert result.value == (True, None)
    assert read_input("confirm") is None, "nothing leaks into the caller"


# -- a person's "no" ends the question ----------------------------------------------------


@pytest.fixture
def naive_refund(app):
    """The trap issue 21 found: a handler that only asks while ``read_input`` is ``None``."""
    entries = []

    @app.f.mutation("billing.naive_refund").with_string("id", "Invoice ID").interactive().handle
    async def naive_refund(input, ctx):
        entries.append(input_response("confirm").action)
        approved = read_input("confirm")
        if approved is None:
            return require_input.elicit(f"Refund {input.id}?", {"confirm": ask.boolean("Approve the refund")})
        return "refunded" if approved else "not approved"

    return entries


@pytest.mark.parametrize(
    ("action", "code", "status", "words"),
    [("decline", "DECLINED", "failed", "declined"), ("cancel", CANCELLED, "cancelled", "dismissed")],
)
async def test_asking_again_after_a_decline_or_dismissal_ends_the_call(app, naive_refund, action, code, status, words):
    asked = []
    call = app.start("billing.naive_refund", {"id": "inv-7"}, answers=lambda r: asked.append(r) or action)
    result = await call.wait()
    assert result.error.code == code and call.status == status
    ending = (
        ", so the call ends without asking again." if action == "decline" else " without answering, so the call ends."
    )
    assert result.error.message == f"Tool \"billing.naive_refund\": the person {words} 'Refund inv-7?'{ending}"
    assert len(asked) == 1, "the form is shown once, not again after the person's answer"
    assert naive_refund == ["missing", action], "the handler ran once more and could have handled it"


async def test_a_different_question_after_a_decline_is_asked(app):
    @app.f.action("plan").handle
    async def plan(input, ctx):
        if input_response("pro").action == "missing":
            return require_input.elicit("Go pro?", {"pro": ask.boolean("Upgrade")})
        if read_input("pro") is None and read_input("reason") is None:
            return require_input.elicit("Why not?", {"reason": ask.string("Reason")})
        return read_input("reason")

    answers = {"Go pro?": "decline", "Why not?": {"reason": "too dear"}}
    result = await app.call("plan", answers=lambda request: answers[request.message])
    assert result.value == "too dear"


def test_sep1330_choices_titled_multi_and_legacy_names_round_trip():
    """Every enum shape of MCP 2025-11-25 (SEP-1330): the schema sent, rebuilt from itself, answers checked."""
    fields = {
        "size": ask.enum(["s", "m", "l"]),
        "color": ask.enum({"#f00": "Red", "#00f": "Blue"}, "Color").default("#f00"),
        "plan": ask.enum({"free": "Free", "pro": "Pro"}).as_enum_names(),
        "toppings": ask.choices(["cheese", "ham", "olives"], "Toppings").min(1).max(2),
        "days": ask.choices({"mon": "Monday", "tue": "Tuesday"}).default(["mon"]).optional(),
    }
    schema = form_schema(fields)
    assert schema["properties"] == {
        "size": {"type": "string", "enum": ["s", "m", "l"]},
        "color": {
            "type": "string",
            "oneOf": [{"const": "#f00", "title": "Red"}, {"const": "#00f", "title": "Blue"}],
            "description": "Color",
            "default": "#f00",
        },
        "plan": {"type": "string", "enum": ["free", "pro"], "enumNames": ["Free", "Pro"]},
        "toppings": {
            "type": "array",
            "items": {"type": "string", "enum": ["cheese", "ham", "olives"]},
            "description": "Toppings",
            "minItems": 1,
            "maxItems": 2,
        },
        "days": {
            "type": "array",
            "items": {"anyOf": [{"const": "mon", "title": "Monday"}, {"const": "tue", "title": "Tuesday"}]},
            "default": ["mon"],
        },
    }
    rebuilt = fields_from_schema(schema)
    assert form_schema(rebuilt) == schema
    assert rebuilt["color"].label("#00f") == "Blue" and rebuilt["plan"].label("pro") == "Pro"
    clean, problems = validate_form(rebuilt, {"size": "m", "color": "#00f", "plan": "pro", "toppings": ["ham"]})
    assert problems == [] and clean["days"] == ["mon"] and clean["toppings"] == ["ham"]
    _, problems = validate_form(
        rebuilt, {"size": "xl", "color": "Red", "plan": "pro", "toppings": ["ham", "ham"], "days": "mon"}
    )
    assert problems == [
        "\"size\" expected one of 's', 'm', 'l', got 'xl'",
        "\"color\" expected one of '#f00', '#00f', got 'Red'",
        "\"toppings\" expected each choice at most once, got ['ham', 'ham']",
        "\"days\" expected a list of choices, got 'mon'",
    ]
    for picks, problem in [
        ([], '"toppings" expected at least 1 pick, got 0'),
        (["cheese", "ham", "olives"], '"toppings" expected at most 2 picks, got 3'),
        (["bacon"], "\"toppings\" expected picks among 'cheese', 'ham', 'olives', got 'bacon'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(problem)):
            rebuilt["toppings"].check(picks, "toppings")
    for build, sentence in [
        (lambda: ask.choices([]), "ask.choices needs a non-empty list of distinct strings"),
        (lambda: ask.enum(["a", "a"]), "ask.enum needs a non-empty list of distinct strings"),
        (lambda: ask.enum(["a"]).as_enum_names(), "as_enum_names() applies to an ask.enum given as {value: label}"),
        (lambda: ask.boolean().max(2), "max() applies to ask.number, ask.integer and ask.choices, not ask.boolean"),
    ]:
        with pytest.raises((ValueError, TypeError), match=re.escape(sentence)):
            build()
