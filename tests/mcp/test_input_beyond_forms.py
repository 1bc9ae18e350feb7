"""Input beyond a tool's form, in every era, with the SDK's real client: a tool asks the client itself
(its model: sampling; its roots), several requests in one round, and a prompt or a resource read
asks as a tool does (SEP-2322 non-tool requests).

2025: ``sampling/createMessage``, ``roots/list`` and ``elicitation/create`` over the live session;
2026: an ``InputRequiredResult`` carrying the requests, answered by the client's retry, the state
sealed. A caller that cannot answer gets one sentence at once; a person answers forms only.
"""

from __future__ import annotations

from typing import Any

import pytest
from eras import ERAS, client_for, refused_for_capability
from http_serving import serve
from mcp import MCPError, types

from fusion_nb import Fusion, ask, read_input, require_input
from fusion_nb.engine import ScriptedAnswers
from fusion_nb.mcp import mcp_server

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


def sampling_app() -> Fusion:
    app = Fusion("asks-the-client")

    @app.f.query("summarise").with_string("text", "What to summarise").handle
    async def summarise(input: Any, ctx: Any) -> Any:
        reply = read_input("sample")
        if reply is None:
            return require_input.sample(
                f"Summarise: {input.text}", max_tokens=50, system_prompt="Be brief.", state={"asked": 1}
            )
        return f"{reply['model']} says {reply['content']['text']}"

    @app.f.query("workspace").handle
    async def workspace(input: Any, ctx: Any) -> Any:
        roots = read_input("roots")
        if roots is None:
            return require_input.roots()
        return [root["uri"] for root in roots["roots"]]

    return app


async def model(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    assert params.system_prompt == "Be brief." and params.max_tokens == 50
    (message,) = params.messages
    assert isinstance(message.content, types.TextContent)
    text = message.content.text
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=text.upper()), model="echo-1"
    )


async def roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root.model_validate({"uri": "file:///work/project", "name": "project"})])


async def check(client: Any) -> None:
    summary = await client.call_tool("summarise", {"text": "a long day"})
    assert summary.is_error is False and summary.content[0].text == "echo-1 says SUMMARISE: A LONG DAY"
    where = await client.call_tool("workspace", {})
    assert where.structured_content == {"result": ["file:///work/project"]}


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_asks_the_clients_model_and_roots(era):
    app = sampling_app()
    async with client_for(mcp_server(app), era, sampling_callback=model, list_roots_callback=roots) as client:
        await check(client)
    await app.aclose()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_tool_asks_the_clients_model_and_roots_over_http(mode):
    async with (
        serve(sampling_app()) as served,
        served.client(mode, sampling_callback=model, list_roots_callback=roots) as client,
    ):
        await check(client)


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_that_declared_neither_is_told_in_one_sentence(era):
    app = sampling_app()
    modern = era != "2025-memory"  # (2026: -32021 naming the capability, SEP-2575)
    async with client_for(mcp_server(app), era) as client:
        summary = await refused_for_capability(client.call_tool("summarise", {"text": "x"}), modern, {"sampling": {}})
        where = await refused_for_capability(client.call_tool("workspace", {}), modern, {"roots": {}})
    assert summary.startswith(
        "Tool \"summarise\" asks the client's model ('Summarise: x') but this caller declared no sampling."
    )
    assert where.startswith('Tool "workspace" asks for the client\'s roots but this caller declared no roots.')
    await app.aclose()


async def test_scripted_answers_stand_in_for_the_client():
    app = sampling_app()
    reply = {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "script"}
    result = await app.run(app.request("summarise", {"text": "x"}, channel=ScriptedAnswers({"sample": reply})))
    assert result.value == "script says short"
    await app.aclose()


def test_a_sampling_request_built_wrong_is_one_sentence():
    for build, sentence in [
        (lambda: require_input.sample("hi", max_tokens=0), r"require_input\.sample needs max_tokens, a whole number"),
        (lambda: require_input.sample([{"content": "hi"}], max_tokens=5), r"require_input\.sample needs a prompt or"),
    ]:
        with pytest.raises(ValueError, match=sentence):
            build()


def several_app() -> Fusion:
    from fusion_nb import ask

    app = Fusion("asks-several")

    @app.f.action("plan").handle
    async def plan(input: Any, ctx: Any) -> Any:
        if read_input("roots") is None:
            return require_input.all(
                require_input.elicit("Which day?", {"day": ask.enum(["mon", "tue"])}),
                require_input.sample("Name the sprint", max_tokens=50, system_prompt="Be brief."),
                require_input.roots(),
                state={"step": 1},
            )
        sprint = read_input("sample")["content"]["text"]
        folders = [root["name"] for root in read_input("roots")["roots"]]
        return f"{read_input('day')}: {sprint} in {folders}"

    return app


async def person(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"day": "tue"})


@pytest.mark.parametrize("era", ERAS)
async def test_several_requests_in_one_round(era):
    app = several_app()
    callbacks = {"sampling_callback": model, "list_roots_callback": roots, "elicitation_callback": person}
    async with client_for(mcp_server(app), era, **callbacks) as client:
        result = await client.call_tool("plan", {})
    assert result.content[0].text == "tue: NAME THE SPRINT in ['project']"
    await app.aclose()


async def test_a_2026_client_gets_every_request_of_the_round_at_once():
    app = several_app()
    callbacks = {"sampling_callback": model, "list_roots_callback": roots, "elicitation_callback": person}
    async with client_for(mcp_server(app), "2026-direct", **callbacks) as client:
        first = await client.session.call_tool("plan", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        asked = {key: request.method for key, request in (first.input_requests or {}).items()}
        assert asked == {"day": "elicitation/create", "sample": "sampling/createMessage", "roots": "roots/list"}
        answers = {
            "day": types.ElicitResult(action="accept", content={"day": "mon"}),
            "sample": await model(None, first.input_requests["sample"].params),
            "roots": await roots(None),
        }
        done = await client.session.call_tool(
            "plan", {}, input_responses=answers, request_state=first.request_state, allow_input_required=True
        )
    assert done.content[0].text == "mon: NAME THE SPRINT in ['project']"
    await app.aclose()


@pytest.mark.parametrize("era", ERAS)
async def test_a_round_with_a_request_the_client_cannot_answer_fails_at_once(era):
    app = several_app()
    async with client_for(mcp_server(app), era, elicitation_callback=person, list_roots_callback=roots) as client:
        said = await refused_for_capability(client.call_tool("plan", {}), era != "2025-memory", {"sampling": {}})
    assert "asks the client's model ('Name the sprint') but this caller declared no sampling" in said
    await app.aclose()


def test_requests_of_one_round_must_not_share_keys():
    with pytest.raises(ValueError, match=r"require_input\.all needs requests whose keys differ"):
        require_input.all(require_input.roots(), require_input.roots())
    with pytest.raises(ValueError, match="not nested"):
        require_input.all(require_input.all(require_input.roots()))


async def test_a_person_answers_the_parts_of_a_round_one_after_the_other():
    """A notebook's channel (here scripted answers) is asked each part in turn; the round counts once."""
    from fusion_nb import ask

    app = Fusion("two-forms")
    seen = []

    @app.f.action("book").handle
    async def book(input: Any, ctx: Any) -> Any:
        if read_input("seats") is None:
            return require_input.all(
                require_input.elicit("Seats?", {"seats": ask.integer("Seats").min(1)}),
                require_input.url("Pay here", "https://pay.example/checkout", key="paid"),
            )
        return f"{read_input('seats')} seats, paid {read_input('paid')}"

    def answer(request: Any) -> Any:
        seen.append(request.message)
        return {"Seats?": {"seats": 2}, "Pay here": True}[request.message]

    result = await app.run(app.request("book", channel=ScriptedAnswers(answer)))
    assert result.value == "2 seats, paid True" and seen == ["Seats?", "Pay here"]
    await app.aclose()


def asking_app() -> Fusion:
    app = Fusion("asks-first")

    @app.prompt("review", description="Review with the context the person gives.")
    def review(topic: str) -> Any:
        context = read_input("context")
        if context is None:
            return require_input.elicit(f"What context for {topic}?", {"context": ask.string("Context")})
        return f"Review {topic} given: {context}"

    @app.resource("notes://{name}")
    async def notes(name: str) -> Any:
        if read_input("confirm") is None:
            return require_input.elicit(f"Open the notes of {name}?", {"confirm": ask.boolean("Open")})
        return f"notes of {name}"

    return app


async def answering(context: Any, params: Any) -> types.ElicitResult:
    answers: dict[str, Any] = {
        "What context for q3?": {"context": "a slow quarter"},
        "Open the notes of ada?": {"confirm": True},
    }
    return types.ElicitResult(action="accept", content=answers[params.message])


async def check_asking(client: Any) -> None:
    prompt = await client.get_prompt("review", {"topic": "q3"})
    assert prompt.messages[0].content.text == "Review q3 given: a slow quarter"
    read = await client.read_resource("notes://ada")
    assert read.contents[0].text == "notes of ada"


@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_and_a_resource_ask_for_input(era):
    app = asking_app()
    async with client_for(mcp_server(app), era, elicitation_callback=answering) as client:
        await check_asking(client)
    await app.aclose()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_prompt_and_a_resource_ask_for_input_over_http(mode):
    async with serve(asking_app()) as served, served.client(mode, elicitation_callback=answering) as client:
        await check_asking(client)


async def test_a_2026_prompt_returns_the_question_and_resumes_from_the_retry():
    app = asking_app()
    async with client_for(mcp_server(app), "2026-direct", elicitation_callback=answering) as client:
        first = await client.session.get_prompt("review", {"topic": "q3"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state.startswith("v1.")  # sealed (the plaintext would be JSON: {"v": 1, ...})
        answer = {"context": types.ElicitResult(action="accept", content={"context": "fine"})}
        done = await client.session.get_prompt(
            "review", {"topic": "q3"}, input_responses=answer, request_state=first.request_state
        )
        assert isinstance(done, types.GetPromptResult)
        assert done.messages[0].content.text == "Review q3 given: fine"
    await app.aclose()


@pytest.mark.parametrize("era", ERAS)
async def test_a_caller_without_elicitation_is_told_in_one_sentence(era):
    app = asking_app()
    async with client_for(mcp_server(app), era) as client:
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("review", {"topic": "q3"})
        with pytest.raises(MCPError) as read:
            await client.read_resource("notes://ada")
    assert str(prompt.value).startswith(
        "Prompt \"review\" needs input ('What context for q3?') but this caller has no way to ask for it."
    )
    assert str(read.value).startswith("Resource \"notes://{name}\" needs input ('Open the notes of ada?')")
    code = -32021 if era != "2025-memory" else -32602  # (2026: the capability it needs is named, SEP-2575)
    assert prompt.value.error.code == read.value.error.code == code
    await app.aclose()


async def test_a_form_request_may_name_its_key_on_the_2026_wire():
    app = Fusion("named")

    @app.f.action("greet").handle
    async def greet(input: Any, ctx: Any) -> Any:
        name = read_input("name")
        if name is None:
            return require_input.elicit("Your name?", {"name": ask.string("Name")}, key="user_name")
        return f"hello {name}"

    async with client_for(mcp_server(app), "2026-direct", elicitation_callback=answering) as client:
        first = await client.session.call_tool("greet", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and list(first.input_requests or {}) == ["user_name"]
        answer = {"user_name": types.ElicitResult(action="accept", content={"name": "Ada"})}
        done = await client.session.call_tool(
            "greet", {}, input_responses=answer, request_state=first.request_state, allow_input_required=True
        )
    assert done.content[0].text == "hello Ada"
    await app.aclose()


def first_app() -> Fusion:
    """A tool and a prompt that ask a person if the caller can, else the client's model."""
    app = Fusion("asks-whoever-can")

    def name_or_guess() -> Any:
        return require_input.first(
            require_input.elicit("Your name?", {"name": ask.string("Name")}),
            require_input.sample("Suggest a name", max_tokens=50, system_prompt="Be brief.", key="guess"),
        )

    def named() -> str | None:
        guess = read_input("guess")
        return read_input("name") or (guess["content"]["text"] if guess is not None else None)

    @app.f.action("greet").handle
    async def greet(input: Any, ctx: Any) -> Any:
        return name_or_guess() if named() is None else f"hello {named()}"

    @app.prompt("letter", description="A letter to whoever is named.")
    def letter() -> Any:
        return name_or_guess() if named() is None else f"Dear {named()},"

    return app


async def naming(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("declared", "name"),
    [
        ({"elicitation_callback": naming, "sampling_callback": model}, "Ada"),
        ({"sampling_callback": model}, "SUGGEST A NAME"),
    ],
)
async def test_the_first_request_the_caller_can_answer_is_asked(era, declared, name):
    app = first_app()
    async with client_for(mcp_server(app), era, **declared) as client:
        greeting = await client.call_tool("greet", {})
        letter = await client.get_prompt("letter", {})
    assert greeting.content[0].text == f"hello {name}" and letter.messages[0].content.text == f"Dear {name},"
    await app.aclose()


@pytest.mark.parametrize("era", ERAS)
async def test_a_caller_that_can_answer_none_of_the_choices_is_refused_for_the_first(era):
    app = first_app()
    async with client_for(mcp_server(app), era, list_roots_callback=roots) as client:
        said = await refused_for_capability(
            client.call_tool("greet", {}), era != "2025-memory", {"elicitation": {"form": {}}}
        )
    assert said.startswith("Tool \"greet\" needs input ('Your name?') but this caller has no way to ask for it.")
    await app.aclose()


async def test_a_person_is_asked_the_first_choice_only():
    app = first_app()
    seen = []

    def answer(request: Any) -> Any:
        seen.append(request.kind)
        return {"name": "Grace"}

    result = await app.run(app.request("greet", channel=ScriptedAnswers(answer)))
    assert result.value == "hello Grace" and seen == ["elicit"]
    with pytest.raises(ValueError, match=r"require_input\.first needs one or more"):
        require_input.first(require_input.all(require_input.roots()))
    await app.aclose()
