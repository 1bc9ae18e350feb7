"""Interactive input over MCP with the SDK's real client: live elicitation (2025) and
InputRequiredResult with a sealed request state (2026), on every in-memory path."""

from __future__ import annotations

import pytest
from eras import ERAS, client_for, refused_for_capability
from fusion_mcp_testapp import make_app
from mcp import Client, MCPError, types

from fusion_nb.mcp import mcp_server
from fusion_nb.mcp.elicitation import declared_modes

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ERAS)
def era(request):
    return request.param


def person(answers: dict, seen: list):
    """An elicitation callback answering by the request's message."""

    async def callback(context, params):
        seen.append(params)
        reply = answers[params.message]
        if isinstance(reply, str):
            return types.ElicitResult(action=reply)
        return types.ElicitResult(action="accept", content=reply)

    return callback


async def call(era, name, args, answers=None, seen=None, app=None):
    app = app or make_app()[0]
    options = {"elicitation_callback": person(answers, seen if seen is not None else [])} if answers is not None else {}
    async with client_for(mcp_server(app), era, **options) as client:
        return await client.call_tool(name, args)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"confirm": True}, "refunded inv-7"),
        ({"confirm": False}, "refund declined"),
        ("decline", "refund declined"),
        ("cancel", "refund cancelled"),
    ],
)
async def test_refund_flow_with_an_elicitation_callback(era, answer, expected):
    seen = []
    result = await call(era, "billing.refund", {"id": "inv-7"}, {"Refund invoice inv-7?": answer}, seen)
    assert not result.is_error and result.content[0].text == expected
    (params,) = seen
    assert params.requested_schema == {
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "description": "Approve the refund"}},
        "required": ["confirm"],
    }


async def test_a_client_without_elicitation_gets_elicitation_unsupported(era):
    """2025: an ``ELICITATION_UNSUPPORTED`` result; 2026: ``-32021`` naming the capability (SEP-2575)."""
    app = make_app()[0]
    async with client_for(mcp_server(app), era) as client:
        refund = client.call_tool("billing.refund", {"id": "inv-7"})
        said = await refused_for_capability(refund, era != "2025-memory", {"elicitation": {"form": {}}})
    assert said.startswith('Tool "billing.refund" needs input')


async def test_three_rounds_accumulate_answers_and_state(era):
    seen = []
    answers = {"Your name?": {"name": "Ada"}, "Age of Ada?": {"age": 36}, "Plan?": {"plan": "pro"}}
    result = await call(era, "onboard", {}, answers, seen)
    assert result.content[0].text == "Ada, 36, pro, last state {'step': 3}"
    assert [p.message for p in seen] == ["Your name?", "Age of Ada?", "Plan?"]


async def test_url_mode(era):
    seen = []
    accepted = await call(era, "connect", {}, {"Approve access": {}}, seen)
    assert accepted.content[0].text == "connected"
    assert seen[0].url == "https://accounts.example.com/consent"
    declined = await call(era, "connect", {}, {"Approve access": "decline"})
    assert declined.content[0].text == "not connected (decline)"


@pytest.mark.parametrize(
    ("elicitation", "modes"),
    [
        (None, set()),
        ({}, {"form"}),  # the shape from before modes existed: form only (the spec, and the SDK's resolver)
        ({"form": {}}, {"form"}),
        ({"url": {}}, {"url"}),
        ({"form": {}, "url": {}}, {"form", "url"}),
    ],
)
def test_the_declared_elicitation_modes(elicitation, modes):
    capabilities = types.ClientCapabilities.model_validate({} if elicitation is None else {"elicitation": elicitation})
    assert declared_modes(capabilities) == modes
    assert declared_modes(None) == set()


async def test_an_invalid_answer_from_a_protocol_client_is_refused(era):
    answers = {"Your name?": {"name": "Ada"}, "Age of Ada?": {"age": 200}}
    result = await call(era, "onboard", {}, answers)
    assert result.is_error
    assert result.content[0].text.startswith(
        '[INVALID_ANSWER] Invalid answer for tool "onboard": "age" expected at most 150, got 200.'
    )


# -- 2026: the request state the client carries --------------------------------------------

KEY = b"k" * 32


def manual(server):
    """A 2026 client that declares elicitation but lets the test drive the rounds."""
    return Client(server, elicitation_callback=person({}, []))


async def first_round(client, args=None):
    result = await client.session.call_tool("billing.refund", args or {"id": "inv-7"}, allow_input_required=True)
    assert isinstance(result, types.InputRequiredResult)
    return result


def approve():
    return {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}


async def retry(client, state, args=None):
    return await client.session.call_tool(
        "billing.refund",
        args or {"id": "inv-7"},
        input_responses=approve(),
        request_state=state,
        allow_input_required=True,
    )


async def test_request_state_is_sealed_and_round_trips():
    app, _ = make_app()
    async with manual(mcp_server(app)) as client:
        first = await first_round(client)
        assert first.request_state.startswith("v1.") and "inv-7" not in first.request_state
        assert list(first.input_requests) == ["confirm"]
        done = await retry(client, first.request_state)
    assert done.content[0].text == "refunded inv-7"


@pytest.mark.parametrize("how", ["tampered", "foreign arguments", "other keys", "expired"])
async def test_a_bad_request_state_is_refused_in_one_sentence(how):
    app, _ = make_app()
    minting = mcp_server(app, request_state_keys=[KEY], request_state_ttl=1e-6 if how == "expired" else 600)
    async with manual(minting) as client:
        state = (await first_round(client)).request_state
    args = {"id": "inv-8"} if how == "foreign arguments" else None
    if how == "tampered":
        state = state[:-6] + ("A" if state[-6] != "A" else "B") + state[-5:]
    checking = mcp_server(app, request_state_keys=[b"o" * 32 if how == "other keys" else KEY])
    async with manual(checking) as client:
        with pytest.raises(MCPError) as raised:  # SEP-2322: a JSON-RPC error, never a result or a new question
            await retry(client, state, args)
    assert raised.value.error.code == types.INVALID_PARAMS
    assert raised.value.error.data == {"reason": "invalid_request_state"}
    assert str(raised.value) == (
        'The request state sent to tool "billing.refund" was altered, has expired, or belongs to another call; '
        "call the tool again without a request state to start over."
    )


async def test_processes_sharing_keys_accept_each_others_state():
    app, _ = make_app()
    async with manual(mcp_server(app, request_state_keys=[KEY])) as one:
        state = (await first_round(one)).request_state
    async with manual(mcp_server(app, request_state_keys=[b"n" * 32, KEY])) as other:  # rotated ring still unseals
        done = await retry(other, state)
    assert done.content[0].text == "refunded inv-7"


async def test_a_failing_client_handler_is_elicitation_failed_with_its_message():
    """The client declared elicitation, so a failure is its handler's, not a missing capability (2025 live)."""

    async def broken(context, params):
        raise RuntimeError("form renderer crashed")

    async with client_for(mcp_server(make_app()[0]), "2025-memory", elicitation_callback=broken) as client:
        result = await client.call_tool("billing.refund", {"id": "inv-7"})
    assert result.is_error
    text = result.content[0].text
    assert text.startswith('[ELICITATION_FAILED] Tool "billing.refund" asked for input and the client'), text
    assert "form renderer crashed" in text and "Traceback" not in text


async def test_a_client_handler_returning_an_error_is_elicitation_failed():
    async def refuses(context, params):
        return types.ErrorData(code=-32000, message="The user closed the window.")

    async with client_for(mcp_server(make_app()[0]), "2025-memory", elicitation_callback=refuses) as client:
        result = await client.call_tool("billing.refund", {"id": "inv-7"})
    assert result.is_error and result.content[0].text.startswith("[ELICITATION_FAILED]")
    assert "The user closed the window." in result.content[0].text


@pytest.mark.parametrize(("answer", "code"), [("decline", "DECLINED"), ("cancel", "CANCELLED")])
async def test_a_declined_question_is_not_asked_again(era, answer, code):
    """The engine's rule reaches clients of both eras: asking again for a refused key ends the call."""
    from fusion_nb import Fusion, ask, read_input, require_input

    app = Fusion("naive")

    @app.f.mutation("naive.refund").interactive().handle
    async def naive_refund(input, ctx):
        if read_input("confirm") is None:  # the trap: a decline leaves it None too
            return require_input.elicit("Refund?", {"confirm": ask.boolean("Approve the refund")})
        return "refunded"

    seen = []
    result = await call(era, "naive.refund", {}, {"Refund?": answer}, seen, app=app)
    assert result.is_error and result.content[0].text.startswith(f'[{code}] Tool "naive.refund": the person')
    assert len(seen) == 1, "the client was asked once"


async def test_sep1330_enums_reach_the_client_and_its_picks_come_back_checked(era):
    """Titled, legacy-named and multi-select choices (SEP-1330), as the conformance suite's enum scenario asks."""
    from fusion_nb import Fusion, ask, read_input, require_input

    app = Fusion("enums")

    @app.f.action("order").handle
    async def order(input, ctx):
        if read_input("toppings") is None:
            return require_input.elicit(
                "Your order?",
                {
                    "size": ask.enum(["s", "m", "l"]),
                    "color": ask.enum({"#f00": "Red", "#00f": "Blue"}),
                    "plan": ask.enum({"free": "Free", "pro": "Pro"}).as_enum_names(),
                    "toppings": ask.choices(["cheese", "ham", "olives"]).min(1).max(2),
                    "days": ask.choices({"mon": "Monday", "tue": "Tuesday"}),
                },
            )
        return ", ".join(f"{key}={read_input(key)}" for key in ("size", "color", "plan", "toppings", "days"))

    seen: list = []
    picks = {"size": "m", "color": "#00f", "plan": "pro", "toppings": ["cheese", "olives"], "days": ["tue"]}
    result = await call(era, "order", {}, {"Your order?": picks}, seen, app=app)
    assert result.content[0].text == "size=m, color=#00f, plan=pro, toppings=['cheese', 'olives'], days=['tue']"
    properties = seen[0].requested_schema["properties"]
    assert properties["color"]["oneOf"][1] == {"const": "#00f", "title": "Blue"}
    assert properties["plan"]["enumNames"] == ["Free", "Pro"]
    assert properties["toppings"] == {
        "type": "array",
        "items": {"type": "string", "enum": ["cheese", "ham", "olives"]},
        "minItems": 1,
        "maxItems": 2,
    }
    assert properties["days"]["items"]["anyOf"][0] == {"const": "mon", "title": "Monday"}
    too_many = {**picks, "toppings": ["cheese", "ham", "olives"]}
    refused = await call(era, "order", {}, {"Your order?": too_many}, [], app=app)
    assert refused.is_error and '"toppings" expected at most 2 picks, got 3' in refused.content[0].text
    await app.aclose()
