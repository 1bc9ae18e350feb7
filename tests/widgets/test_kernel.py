"""The widgets in a real ipykernel, driven with the comm messages a browser sends."""

import textwrap

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

SETUP = textwrap.dedent("""
    import anyio
    import fusion_nb as fnb
    from fusion_nb.widgets import CallView, ToolCard, WidgetInputChannel
    app = fnb.Fusion('k')

    @app.f.action('greet').handle
    async def greet(input, ctx):
        name = fnb.read_input('name')
        if name is None:
            return fnb.require_input.elicit('Who are you?', {'name': fnb.ask.string('Your name')})
        return f'hello {name}'

    @app.f.action('stuck').handle
    async def stuck(input, ctx):
        yield fnb.progress(10, 'started')
        await anyio.sleep_forever()

    @app.f.action('flood').handle
    async def flood(input, ctx):
        for i in range(100_000):
            yield fnb.progress(i / 1000)
            await anyio.sleep(0)  # the loop turns between yields, so flush timers can fire
        yield fnb.progress(100, 'all done')
        yield fnb.respond('flooded')
""")


def run_in_view(call_expr: str) -> str:
    return textwrap.dedent(f"""
        call = {call_expr}
        view = CallView(call)
        display(view)
        result = await call.wait()
        print('RESULT', call.status, result.error.code if result.error else result.value)
    """)


def updates(kernel, comm_id):
    return [
        m
        for m in kernel.iopub
        if m["msg_type"] == "comm_msg"
        and m["content"]["comm_id"] == comm_id
        and m["content"]["data"].get("method") == "update"
    ]


async def one(kernel, model, what, **state):
    found = await kernel.wait_until(lambda: kernel.find_widgets(model, **state), what=what)
    assert len(found) == 1, found
    return found[0]


async def test_submitting_the_form_resumes_the_awaiting_cell(kernel):
    await kernel.run(SETUP)
    cell = kernel.submit(run_in_view("app.start(app.request('greet', channel=WidgetInputChannel()))"))
    submit = await one(kernel, "ButtonModel", "the Submit button", description="Submit")
    name = await one(kernel, "TextModel", "the name field", description="Your name")
    assert cell.reply is None, "the cell awaits the answer"
    kernel.set_value(name, value="Ada")
    await kernel.wait_until(lambda: kernel.widgets[name].get("value") == "Ada", what="the echoed value")
    kernel.click(submit)
    await kernel.finished(cell)
    assert cell.status == "ok" and "RESULT done hello Ada" in cell.stdout
    assert kernel.widgets[submit]["disabled"] is True, "an answered form cannot be submitted again"


async def test_cancel_button_aborts_the_call(kernel):
    await kernel.run(SETUP)
    cell = kernel.submit(run_in_view("app.start('stuck')"))
    bar = await one(kernel, "FloatProgressModel", "the bar")
    await kernel.wait_until(lambda: kernel.widgets[bar]["value"] == 10, what="progress 10")
    stop = await one(kernel, "ButtonModel", "the Stop button", description="Stop")
    kernel.click(stop)
    await kernel.finished(cell)
    assert cell.status == "ok" and "RESULT cancelled CANCELLED" in cell.stdout
    assert kernel.widgets[bar]["value"] == 10 and kernel.widgets[bar]["bar_style"] == ""
    style = kernel.widgets[kernel.widgets[bar]["style"].removeprefix("IPY_MODEL_")]
    assert style["bar_color"].startswith("var(--jp-ui-font-color1"), "a stopped bar is grey, not blue"
    done = await kernel.run("print(len(call._listeners), app.active_calls, app.background_tasks)")
    assert done.stdout.split() == ["0", "[]", "0"]


async def test_a_progress_flood_costs_few_messages_and_ends_exact(kernel):
    await kernel.run(SETUP)
    cell = await kernel.run(run_in_view("app.start('flood')"), timeout=120)
    assert "RESULT done flooded" in cell.stdout
    (bar,) = kernel.find_widgets("FloatProgressModel")
    sent = updates(kernel, bar)
    assert 1 <= len(sent) < 200, len(sent)
    assert kernel.widgets[bar]["value"] == 100.0 and kernel.widgets[bar]["bar_style"] == "success"
    (status,) = [
        cid
        for cid, s in kernel.widgets.items()
        if s.get("_model_name") == "HTMLModel" and "all done" in s.get("value", "")
    ]
    assert "done" in kernel.widgets[status]["value"]


async def test_tool_card_run_output_lands_in_the_defining_cell(kernel):
    await kernel.run(SETUP)
    card_cell = await kernel.run(
        textwrap.dedent("""
        @app.f.action('hello').with_string('name', 'Who').handle
        async def hello(input, ctx):
            print('handler greets', input.name)
            yield fnb.progress(50, 'half way')
            yield fnb.respond('hi ' + input.name)

        display(ToolCard(hello, app))
    """)
    )
    name = await one(kernel, "TextModel", "the name field", description="Who")
    run = await one(kernel, "ButtonModel", "the Run button", description="Run hello")
    kernel.set_value(name, value="Ada")
    await kernel.wait_until(lambda: kernel.widgets[name].get("value") == "Ada", what="the echoed value")
    kernel.click(run)
    await kernel.wait_until(
        lambda: "handler greets Ada" in card_cell.stdout, what="the handler's print in the card's cell"
    )
    bar = await one(kernel, "FloatProgressModel", "the call's bar")
    await kernel.wait_until(lambda: kernel.widgets[bar]["value"] == 100.0, what="the call to finish")
    opened = [m for m in kernel.iopub if m["msg_type"] == "comm_open" and m["content"]["comm_id"] == bar]
    assert opened[0]["parent_header"]["msg_id"] == card_cell.msg_id, (
        "the view belongs to the card's cell, not the click"
    )
