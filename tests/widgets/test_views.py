"""Widgets driven in-process the way a browser would (clicks, values) on a real app."""

import contextvars
import io
import re
from types import SimpleNamespace

import anyio
import pytest
from fusion_nb.widgets import (
    ActivityPanel,
    CallView,
    ElicitationForm,
    ToolCard,
    UrlPrompt,
    WidgetInputChannel,
    make_prompt,
    text_progress,
    views_for,
)
from fusion_nb.widgets.status import LOOKS, message_of
from widget_helpers import count_sends, until

from fusion_nb import ToolError, ask, input_response, progress, read_input, require_input, respond
from fusion_nb.engine import ELICITATION_UNSUPPORTED

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


def waiting(call):
    return call.status == "waiting" or call.settled


@pytest.fixture
def refund(app):
    @app.f.mutation("billing.refund").with_string("id", "Invoice ID").interactive().handle
    async def refund(input, ctx):
        approved = read_input("confirm")
        if approved is None:
            action = input_response("confirm").action
            if action in ("decline", "cancel"):
                return {"decline": "refund declined", "cancel": "refund cancelled"}[action]
            return require_input.elicit(
                f"Refund {input.id}?",
                {
                    "confirm": ask.boolean("Approve the refund"),
                    "reason": ask.string("Why"),
                    "amount": ask.number("Amount").min(0).max(100).default(12.5),
                },
            )
        return f"refunded {read_input('amount')} for {read_input('reason')}" if approved else "refund declined"

    return refund


FIELDS = {
    "name": ask.string("Your name"),
    "age": ask.integer("Age").min(0).max(130).default(30),
    "plan": ask.enum(["free", "pro"], "Plan"),
    "newsletter": ask.boolean("Newsletter").optional(),
}


# -- the form on its own ------------------------------------------------------------------


async def test_form_shows_inline_validation_and_answers_once_valid():
    form = ElicitationForm(require_input.elicit("Sign up", FIELDS))
    assert form.inputs["age"].widget.value == 30, "defaults are filled"
    assert type(form.inputs["age"].widget).__name__ == "IntText", "bounds are checked, never clamped"
    assert type(form.inputs["plan"].widget).__name__ == "Dropdown"
    form.submit_button.click()
    assert not form.answered
    assert "required" in form.inputs["name"].error.value and "required" in form.inputs["plan"].error.value
    assert "&quot;Your name&quot; is required" in form.inputs["name"].error.value, "named by its label"
    assert form.inputs["age"].error.value == ""
    form.inputs["name"].widget.value = "Ann"
    assert form.inputs["name"].error.value == "", "a fixed field clears its message at once"
    form.inputs["plan"].widget.value = "pro"
    form.submit_button.click()
    assert form.response.action == "accept"
    assert form.response.content == {"name": "Ann", "age": 30, "plan": "pro"}, "blank optional fields are left out"
    assert (await form.answer()) is form.response


async def test_a_required_number_without_default_starts_blank_and_must_be_answered():
    form = ElicitationForm(require_input.elicit("Seats", {"seats": ask.integer("Seats").min(1).max(50)}))
    seats = form.inputs["seats"]
    assert seats.widget.value == "" and seats.widget.placeholder == "integer, 1 to 50"
    form.submit_button.click()
    assert not form.answered and "required" in seats.error.value
    seats.widget.value = "80"
    form.submit_button.click()
    assert not form.answered and "at most 50" in seats.error.value
    seats.widget.value = "3"
    form.submit_button.click()
    assert form.response.content == {"seats": 3}


async def test_a_number_out_of_bounds_says_so_as_typed_instead_of_being_clamped():
    form = ElicitationForm(require_input.elicit("Seats", {"seats": ask.integer("Seats").min(1).max(50).default(2)}))
    seats = form.inputs["seats"]
    assert seats.label == "Seats (1 to 50)"
    seats.widget.value = 99
    assert seats.widget.value == 99, "kept as typed"
    assert "&quot;Seats&quot; expected at most 50, got 99" in seats.error.value, "said at once, by its label"
    form.submit_button.click()
    assert not form.answered
    seats.widget.value = 50
    assert seats.error.value == ""
    form.submit_button.click()
    assert form.response.content == {"seats": 50}


async def test_an_example_description_is_a_placeholder_not_a_label():
    form = ElicitationForm(require_input.elicit("Which?", {"quarter": ask.string("e.g. 2026Q3")}))
    quarter = form.inputs["quarter"]
    assert quarter.widget.description == "quarter" and quarter.widget.placeholder == "e.g. 2026Q3"
    form.submit_button.click()
    assert "&quot;quarter&quot; is required" in quarter.error.value


async def test_enter_in_a_text_box_submits_the_form_once_the_last_key_arrived():
    form = ElicitationForm(require_input.elicit("Who?", {"name": ask.string("Full name")}))
    name = form.inputs["name"].widget
    name.value = "Grace Hopper"
    name._handle_custom_msg({"event": "submit"}, [])  # what the browser sends on Enter
    assert not form.answered, "Enter waits a moment for a keystroke still in the browser's throttle"
    name.value = "Grace Hopper!"
    with anyio.fail_after(5):
        response = await form.answer()
    assert response.content == {"name": "Grace Hopper!"}


async def test_decline_and_dismiss_say_what_they_do():
    form = ElicitationForm(require_input.elicit("Refund?", {"confirm": ask.boolean("Approve")}))
    assert "Decline answers no" in form.hint.value and "Dismiss leaves without an answer" in form.hint.value
    assert form.decline_button.tooltip != form.dismiss_button.tooltip
    form.decline_button.click()
    assert form.hint.value == "" and "Declined" in form.outcome.value


async def test_form_shows_problems_of_a_reask():
    problems = ['"age" expected at most 130, got 200', "expected the answer to be an object"]
    form = make_prompt(require_input.elicit("Sign up", FIELDS), problems)
    assert "at most 130" in form.inputs["age"].error.value
    assert "expected the answer to be an object" in form.problems.value
    assert form.inputs["name"].error.value == ""


async def test_form_cannot_be_answered_twice():
    form = ElicitationForm(require_input.elicit("Sign up", {"name": ask.string("Name")}))
    form.inputs["name"].widget.value = "Bo"
    form.submit_button.click()
    first = form.response
    form.submit_button.click()
    form.decline_button.click()
    form.dismiss_button.click()
    assert form.response is first and not form.submit() and not form.decline()
    assert all(b.disabled and b.layout.display == "none" for b in form.buttons), "answered: no buttons left"
    assert form.inputs["name"].widget.disabled
    assert "Submitted" in form.outcome.value and "Name = &#x27;Bo&#x27;" in form.outcome.value
    children = list(form.children)
    assert children.index(form.question) < children.index(form.outcome), "the question stays above its answer"
    assert repr(form) == "<ElicitationForm 'Sign up' fields=['name'] accept>"


async def test_url_prompt_links_safely_and_answers():
    prompt = UrlPrompt(require_input.url("Approve the payment", "https://pay.example/x?a=1&b=<2>"))
    assert 'target="_blank"' in prompt.link.value and "&amp;b=&lt;2&gt;" in prompt.link.value
    assert re.search(r'<a href="[^"]+"[^>]*class="jupyter-button', prompt.link.value), "a real link, styled as a button"
    prompt.done_button.click()
    prompt.dismiss_button.click()
    assert prompt.response.action == "accept"
    other = UrlPrompt(require_input.url("Approve", "https://pay.example/"))
    other.dismiss_button.click()
    assert other.response.action == "cancel"


# -- the channel and the call view --------------------------------------------------------


async def test_submit_in_the_call_view_resumes_the_handler(app, refund):
    channel = WidgetInputChannel(frontend=True)
    call = app.start(app.request("billing.refund", {"id": "inv-7"}, channel=channel))
    view = CallView(call)
    await until(call, waiting)
    form = view.prompt
    assert form is channel.prompts[-1] and view.input_box.children == (form,)
    assert "waiting for input" in view.status_line.value and view.bar.bar_style == "warning"
    assert repr(view).startswith("<CallView billing.refund: ◆ waiting for input   0%")
    form.inputs["confirm"].widget.value = True
    form.inputs["reason"].widget.value = "duplicate"
    form.submit_button.click()
    result = await call.wait()
    assert result.value == "refunded 12.5 for duplicate"
    assert "done" in view.status_line.value and view.bar.value == 100.0 and view.bar.bar_style == "success"
    assert "refunded" not in view.status_line.value + view.details.value, "the value is Out[n]'s, shown once"
    assert form.answered and form.abandoned is None and all(b.disabled for b in form.buttons)
    form.submit_button.click()  # nothing happens: the call is over and the form answered
    assert form.response.content == {"confirm": True, "reason": "duplicate", "amount": 12.5}


@pytest.mark.parametrize(
    ("button", "answer", "shown"), [("decline", "declined", "Declined"), ("dismiss", "cancelled", "Dismissed")]
)
async def test_decline_and_dismiss_answers_reach_the_handler(app, refund, button, answer, shown):
    call = app.start(app.request("billing.refund", {"id": "inv-7"}, channel=WidgetInputChannel(frontend=True)))
    view = CallView(call)
    await until(call, waiting)
    labels = [b.description for b in (*view.prompt.buttons, view.stop_button)]
    assert len(labels) == len(set(labels)), f"two buttons share a label: {labels}"
    getattr(view.prompt, f"{button}_button").click()
    assert (await call.wait()).value == f"refund {answer}"
    assert shown in view.prompt.outcome.value


async def test_without_a_view_the_channel_shows_the_form_itself(app, refund):
    shown = []
    call = app.start(
        app.request("billing.refund", {"id": "inv-7"}, channel=WidgetInputChannel(frontend=True, show=shown.append))
    )
    await until(call, waiting)
    (form,) = shown
    form.inputs["reason"].widget.value = "late"
    form.submit_button.click()  # confirm left unticked: an answer of False
    assert (await call.wait()).value == "refund declined"


@pytest.mark.parametrize(
    "channel", [WidgetInputChannel(frontend=False), WidgetInputChannel()], ids=["forced", "no-kernel"]
)
async def test_no_widget_frontend_fails_fast(app, refund, channel):
    result = await app.run(app.request("billing.refund", {"id": "inv-7"}, channel=channel))
    assert result.error.code == ELICITATION_UNSUPPORTED and channel.prompts == []


async def test_url_request_in_a_view(app):
    @app.f.action("pay").handle
    async def pay(input, ctx):
        if read_input("pay") is None and input_response("pay").action == "missing":
            return require_input.url("Pay on the provider's page", "https://pay.example/session", key="pay")
        return "paid" if read_input("pay") else "not paid"

    call = app.start(app.request("pay", channel=WidgetInputChannel(frontend=True)))
    view = CallView(call)
    await until(call, waiting)
    assert isinstance(view.prompt, UrlPrompt)
    view.prompt.done_button.click()
    assert (await call.wait()).value == "paid"


# -- cancellation ---------------------------------------------------------------------------


@pytest.fixture
def stuck(app):
    cleaned = anyio.Event()

    @app.f.action("stuck").handle
    async def stuck(input, ctx):
        try:
            yield progress(40, "working")
            await anyio.sleep_forever()
        finally:
            cleaned.set()

    return SimpleNamespace(tool=stuck, cleaned=cleaned)


async def test_cancel_button_aborts_the_call(app, stuck):
    call = app.start("stuck")
    view = CallView(call)
    await until(call, lambda c: c.progress is not None)
    assert view.stop_button.layout.display != "none"
    view.stop_button.click()
    result = call.result
    assert result is not None and result.error.code == "CANCELLED" and call.status == "cancelled"
    assert "cancelled" in view.status_line.value and view.bar.value == 40.0
    assert view.bar.style.bar_color == LOOKS["cancelled"].color != LOOKS["running"].color, "a stopped bar is not blue"
    # the row says cancelled once: the error's sentence would only repeat it (and cut the last message)
    assert "CANCELLED:" not in view.status_line.value and view.stop_button.layout.display == "none"
    assert repr(view).startswith("<CallView stuck: ■ cancelled  40% · ") and "CANCELLED" not in repr(view)
    await stuck.cleaned.wait()


async def test_cancel_while_the_form_waits_disables_the_form(app, refund):
    call = app.start(app.request("billing.refund", {"id": "inv-7"}, channel=WidgetInputChannel(frontend=True)))
    view = CallView(call)
    await until(call, waiting)
    form = view.prompt
    view.stop_button.click()
    assert (await call.wait()).error.code == "CANCELLED"
    assert form.abandoned == "cancelled" and not form.answered and all(b.disabled for b in form.buttons)
    assert "Not answered: the call was cancelled" in form.outcome.value
    form.submit_button.click()
    assert form.response is None


# -- coalescing, final state, no leaks -------------------------------------------------------


async def test_a_progress_flood_is_coalesced_and_the_final_state_is_exact(app):
    @app.f.action("flood").handle
    async def flood(input, ctx):
        for i in range(5000):
            yield progress(i / 50, f"step {i}")
            await anyio.sleep(0)  # the loop runs between steps: timers could fire
        yield respond("flooded")

    call = app.start("flood")
    view = CallView(call, interval=3600)  # one flush may happen at once, then only the final one
    bar_sends, line_sends = count_sends(view.bar), count_sends(view.status_line)
    result = await call.wait()
    assert result.value == "flooded"
    assert len(bar_sends) <= 2 and len(line_sends) <= 2, (bar_sends, line_sends)
    assert bar_sends[-1]["state"] == {"value": 100.0, "bar_style": "success"}
    assert "flooded" not in view.status_line.value
    assert "done" in view.status_line.value and "step 4999" in view.status_line.value


async def test_the_row_shows_the_newest_log_line_or_progress_message(app):
    logged, go_on = anyio.Event(), anyio.Event()

    @app.f.action("chatty").handle
    async def chatty(input, ctx):
        yield progress(10, "loading")
        ctx.log("info", "read 3 files", files=3)
        logged.set()
        await go_on.wait()
        ctx.log("warning", "row 7 skipped")
        yield respond("ok")

    call = app.start("chatty")
    view = CallView(call, interval=3600)
    await logged.wait()
    try:
        assert message_of(call) == "read 3 files"  # the log line came after the progress message
        assert call.last_log.data == {"files": 3}
    finally:
        go_on.set()
    assert (await call.wait()).value == "ok"
    assert "done" in view.status_line.value and "warning: row 7 skipped" in view.status_line.value


async def test_final_state_of_a_failure_is_exact(app):
    @app.f.action("boom").handle
    async def boom(input, ctx):
        yield progress(37.5, "almost")
        raise ToolError("BOOM", "the widget factory exploded")

    call = app.start("boom")
    view = CallView(call, interval=3600)
    await call.wait()
    assert view.bar.value == 37.5 and view.bar.bar_style == "danger"
    assert "failed" in view.status_line.value and " 38%" in view.status_line.value
    assert "BOOM: the widget factory exploded" in view.status_line.value, "the error replaces the last message"


async def test_nothing_stays_attached_to_a_settled_call(app, stuck):
    call = app.start("stuck")
    view = CallView(call)
    panel = ActivityPanel(app)
    await until(call, lambda c: c.progress is not None)
    assert views_for(call.id) == [view] and len(call._listeners) == 2  # the view and the panel (no view of its own)
    call.cancel()
    assert call._listeners == [] and views_for(call.id) == []
    assert not view.coalescer.pending and view._tick is None and not view.live
    panel.close()
    assert app._call_listeners == []
    await stuck.cleaned.wait()


async def test_a_view_of_a_settled_call_subscribes_to_nothing(app):
    @app.f.action("quick").handle
    async def quick(input, ctx):
        return 42

    call = app.start("quick")
    await call.wait()
    view = CallView(call)
    assert not call._listeners and repr(view).startswith("<CallView quick: ✔ done 100% · ")
    assert view.stop_button.layout.display == "none" and "42" not in view.status_line.value


def test_every_status_looks_different_and_only_running_is_blue():
    assert len(LOOKS) == 8  # the seven statuses, and a failure that is the person's Decline
    assert len({look.icon for look in LOOKS.values()}) == 8
    assert len({look.label for look in LOOKS.values()}) == len({look.color for look in LOOKS.values()}) == 8
    for status in ("cancelled", "timed out", "failed", "declined"):
        assert "info" not in LOOKS[status].color and "brand" not in LOOKS[status].color, status
        assert LOOKS[status].bar_style in ("", "danger")
    for look in LOOKS.values():
        assert all(ord(ch) < 0x2800 for ch in look.icon), f"{look.icon!r} needs an emoji font"
        assert look.color.startswith("var(--jp-"), "colours follow the JupyterLab theme"


def test_colours_live_in_one_module():
    from pathlib import Path

    import fusion_nb.widgets as package

    hex_colour = re.compile(r"#[0-9a-fA-F]{6}\b")
    spelled = {f.name for f in Path(package.__file__).parent.glob("*.py") if hex_colour.search(f.read_text())}
    assert spelled <= {"status.py"}, spelled


async def test_the_view_row_never_wraps_and_shows_rate_and_eta(app):
    @app.f.action("halfway").handle
    async def halfway(input, ctx):
        yield progress(50, "a message long enough to need an ellipsis " * 5)
        await anyio.sleep_forever()

    call = app.start("halfway")
    await until(call, lambda c: c.progress is not None)
    view = CallView(call)
    view.started -= 10  # as if it had run for 10 s: 5 %/s, 10 s to go
    view._flush()
    row = view.status_line.value
    assert "white-space:nowrap" in row and "text-overflow:ellipsis" in row
    assert "00:10&lt;00:10, 5%/s" in row, row
    assert 'title="halfway: ▶ running' in row, "the full line on hover"
    assert view.layout.width and view.bar.layout.width, "fixed widths"
    call.cancel()
    assert "00:10" in view.status_line.value and "%/s" not in view.status_line.value


# -- tool card -------------------------------------------------------------------------------

cell = contextvars.ContextVar("cell", default="none")


async def test_tool_card_runs_the_tool_in_the_defining_context(app):
    @(
        app.f.query("greet")
        .describe("Say hello")
        .with_string("name", "Who")
        .with_integer("times", "How often", default=1)
        .with_enum("tone", ["warm", "dry"], "Tone", optional=True)
        .handle
    )
    async def greet(input, ctx):
        yield progress(50)
        yield respond(
            f"{cell.get()}: "
            + " ".join([f"hello {input.name}"] * input.times)
            + (f" ({input.tone})" if input.tone else "")
        )

    cell.set("defining cell")
    card = ToolCard(greet, app)
    assert "read-only" in card.children[0].value and "Say hello" in card.children[0].value
    assert card.inputs["name"].widget.description == "Who", "the description is the label"
    assert card.inputs["tone"].widget.description == "Tone (optional)"
    assert repr(card) == "<ToolCard greet (query) args=['name', 'times', 'tone'] runs=0>"
    card.run_button.click()
    assert card.views == [] and "required" in card.inputs["name"].error.value
    card.inputs["name"].widget.value = "Ada"
    card.inputs["times"].widget.value = 2

    def click_from_a_comm_message():
        cell.set("comm message")
        card.run_button.click()

    contextvars.copy_context().run(click_from_a_comm_message)
    (view,) = card.views
    (run,) = card.calls.children
    assert run.view is view
    result = await view.call.wait()
    assert result.value == "defining cell: hello Ada hello Ada", "blank optional 'tone' was left out"
    # the card shows the value under the run (ipywidgets' interact prints it; a card used to lose it)
    (shown,) = run.value.outputs
    assert shown["data"]["text/plain"] == "'defining cell: hello Ada hello Ada'"


async def test_a_cards_run_shows_a_failure_in_full_under_its_row(app):
    long = "the warehouse did not answer in time, " * 4

    @app.f.action("report.build_everything_for_the_quarter").handle
    async def report(input, ctx):
        raise ToolError("UPSTREAM_TIMEOUT", long.strip(), recovery="Try again after five minutes.")

    card = ToolCard(report, app)
    await card.run().wait()
    (run,) = card.calls.children
    assert run.value.outputs == (), "a failure shows no value"
    assert long.strip() in run.view.details.value and "Try again after five minutes." in run.view.details.value


async def test_tool_card_keeps_a_short_history(app):
    @app.f.action("noop").handle
    async def noop(input, ctx):
        return None

    card = ToolCard(noop, app, keep=2)
    for _ in range(4):
        call = card.run()
        await call.wait()
    assert len(card.views) == 3, "two settled plus the newest"
    assert [run.view for run in card.calls.children] == card.views


# -- activity panel and text ------------------------------------------------------------------


async def test_activity_panel_lists_live_calls_and_keeps_a_short_history(app, stuck):
    @app.f.action("broken").handle
    async def broken(input, ctx):
        raise ToolError("BROKEN", "it broke")

    panel = ActivityPanel(app, history=2, delay=0)
    live = app.start("stuck")
    for _ in range(3):
        await app.start("broken").wait()
    with anyio.fail_after(5):
        while live not in panel.live:
            await anyio.sleep(0.01)
    assert list(panel.live) == [live] and len(panel.recent) == 2, "failed calls are listed, the last two kept"
    assert repr(panel) == "<ActivityPanel widgets: 1 live, 2 recent>"
    panel.live[live].stop_button.click()
    assert panel.live == {} and len(panel.recent) == 2 and panel.recent[0].call is live
    panel.close()
    assert app._call_listeners == []
    await stuck.cleaned.wait()


async def test_text_progress_prints_throttled_lines_and_the_final_one(app):
    @app.f.action("steps").handle
    async def steps(input, ctx):
        for i in range(100):
            yield progress(i, "stepping")
            await anyio.sleep(0)
        yield respond("finished")

    out = io.StringIO()
    call = app.start("steps")
    text_progress(call, file=out, interval=3600)
    await call.wait()
    lines = out.getvalue().splitlines()
    assert len(lines) <= 2 and lines[-1].startswith("steps: ✔ done 100% · 00:0")
    assert "finished" not in lines[-1], "the value is the cell's, not the view's"


# -- smaller pieces ---------------------------------------------------------------------------


async def test_one_form_shows_in_every_view_of_the_call(app, refund):
    call = app.start(app.request("billing.refund", {"id": "inv-7"}, channel=WidgetInputChannel(frontend=True)))
    first, second = CallView(call), CallView(call)
    await until(call, waiting)
    assert first.prompt is second.prompt is not None, "two views of one call share the form"
    second.prompt.decline_button.click()
    assert (await call.wait()).value == "refund declined"
    first.close()
    second.close()


async def test_a_timeout_marks_the_waiting_form_timed_out(app):
    @app.f.action("slow").timeout(0.05).handle
    async def slow(input, ctx):
        return require_input.elicit("Still there?", {"ok": ask.boolean("OK")})

    call = app.start(app.request("slow", channel=WidgetInputChannel(frontend=True)))
    view = CallView(call)
    await until(call, waiting)
    result = await call.wait()
    assert result.error.code == "TIMEOUT" and view.prompt.abandoned == "timed out"
    assert "timed out" in view.status_line.value and view.bar.bar_style == "danger"


async def test_show_call_falls_back_to_text_without_a_kernel(app, capsys):
    from fusion_nb.widgets import show_call

    @app.f.action("quick").handle
    async def quick(input, ctx):
        return "ok"

    call = app.start("quick")
    show_call(call)
    await call.wait()
    assert capsys.readouterr().out.splitlines()[-1].startswith("quick: ✔ done 100%")


def test_tool_schemas_become_the_engines_form_fields():
    from fusion_nb.widgets import FieldInput, flat_fields

    from fusion_nb import Fusion
    from fusion_nb.engine import AskField

    app = Fusion("schemas")
    tool = (
        app.f.action("t")
        .with_number("n", "N", optional=True)
        .with_boolean("b", "B", optional=True)
        .with_integer("i", "I", default=3)
        .handle(lambda input, ctx: None)
    )
    fields = flat_fields(tool.input_schema)
    assert all(type(f) is AskField for f in fields.values())
    assert [(k, f.type, f.required, f.has_default) for k, f in fields.items()] == [
        ("n", "number", False, False),
        ("b", "boolean", False, False),
        ("i", "integer", False, True),
    ]
    n, b, i = (FieldInput(key, field) for key, field in fields.items())
    assert n.read() is None and b.read() is None and i.read() == 3, "blank optional fields read as not answered"
    n.widget.value = "2.5"
    assert n.read() == 2.5
    n.widget.value = "lots"
    assert n.problem() == "\"n\" expected a number, got 'lots'"


def test_a_tool_with_structured_arguments_gets_no_run_form():
    from pydantic import BaseModel

    from fusion_nb import Fusion

    class Order(BaseModel):
        items: list[str]

    app = Fusion("structured")
    tool = app.f.action("order").with_model(Order).handle(lambda input, ctx: None)
    card = ToolCard(tool, app)
    assert card.inputs == {} and card.run_button.layout.display == "none"
    assert "call it from a cell" in card.children[0].value


async def test_a_crash_shows_its_traceback_in_the_view(app):
    @app.f.action("crash").handle
    async def crash(input, ctx):
        raise ZeroDivisionError("no ratio")

    call = app.start("crash")
    view = CallView(call)
    await call.wait()
    assert "INTERNAL_ERROR" in view.status_line.value
    assert (
        "<details><summary>traceback</summary>" in view.details.value
        and "ZeroDivisionError: no ratio" in view.details.value
    )
    assert 'raise ZeroDivisionError("no ratio")' in view.details.value.replace("&quot;", '"')
    assert "_runner.py" not in view.details.value, "the traceback starts at the tool's own code"


async def test_earlier_rounds_stay_visible_compact_with_the_question_above_the_answer(app):
    @app.f.action("signup").interactive().handle
    async def signup(input, ctx):
        if read_input("name") is None:
            return require_input.elicit("Who are you?", {"name": ask.string("Your name")})
        if read_input("seats") is None:
            return require_input.elicit("How many seats?", {"seats": ask.integer("Seats").min(1).max(9)})
        return f"{read_input('name')}: {read_input('seats')}"

    call = app.start(app.request("signup", channel=WidgetInputChannel(frontend=True)))
    view = CallView(call)
    await until(call, waiting)
    first = view.prompt
    first.inputs["name"].widget.value = "Ada"
    first.submit_button.click()
    await until(call, lambda c: c.settled or (c.request is not None and c.request.message == "How many seats?"))
    second = view.prompt
    assert view.input_box.children == (first, second), "the earlier round stays, above the new one"
    (line,) = first.children
    assert "Who are you?" in line.value and "Submitted: Your name = &#x27;Ada&#x27;" in line.value
    assert line.value.index("Who are you?") < line.value.index("Submitted"), "question, then its answer"
    assert second.inputs["seats"].widget.description == "Seats (1 to 9)", "bounds are in the label"
    second.inputs["seats"].widget.value = "4"
    second.submit_button.click()
    assert (await call.wait()).value == "Ada: 4"


async def test_the_inspector_follows_the_traffic_live_and_filters_by_tool(app):
    from fusion_nb.widgets import InspectorView

    from fusion_nb.mcp import tool_definition
    from fusion_nb.notebook.traffic import TrafficLog

    @app.f.action("steps").handle
    async def steps(input, ctx):
        for i in range(3):
            yield progress((i + 1) * 33, f"step {i + 1}")
        yield respond("walked")

    @app.f.action("other").handle
    async def other(input, ctx):
        return "x"

    log = TrafficLog(app, origin=lambda: "test")
    view = InspectorView(lambda: [tool_definition(t) for t in app.tools], log, tool="steps", limit=10)
    await app.start("steps").wait()
    await app.start("other").wait()
    view.coalescer.now()
    traffic = view.traffic_html.value
    assert "steps (test) → tools/call" in traffic and "step 3" in traffic and "← result" in traffic
    assert traffic.count("notifications/progress") == 1, "a run of progress keeps its latest event"
    assert "other (" not in traffic and "&quot;name&quot;: &quot;steps&quot;" in view.definition_html.value
    view.filter.value = ""
    assert "other (test) ← result" in view.traffic_html.value
    assert "&quot;name&quot;: &quot;other&quot;" in view.definition_html.value
    assert "white-space:pre-wrap" in view.traffic_html.value, "long lines wrap instead of being cut"
    text = view._repr_mimebundle_()["text/plain"]  # terminals and nbconvert read this, not the widget's repr
    assert text.startswith("Tool definitions (as tools/list sends them):\n[") and '"name": "other"' in text
    assert "other (test) ← result" in text and "InspectorView(" not in text
    view.close()
    log.close()
    assert log._listeners == [] and app._call_listeners == []


async def test_the_channel_finds_the_views_by_call_id_from_an_input_question(app, stuck):
    """The engine's seam: ``ask(InputQuestion)`` with the call's id, never the call."""
    from types import SimpleNamespace

    from fusion_nb.engine import AbortSignal

    call = app.start("stuck")
    view = CallView(call)
    question = SimpleNamespace(
        request=require_input.elicit("Go on?", {"ok": ask.boolean("Carry on")}),
        tool="stuck",
        call_id=call.id,
        signal=AbortSignal(),
        problems=('"ok" expected true or false, got 3',),
    )
    channel = WidgetInputChannel(frontend=True, show=lambda prompt: pytest.fail("shown outside the view"))
    async with anyio.create_task_group() as tg:

        async def answer():  # runs once ask() waits for the person: the form is in the view by then
            form = view.prompt
            assert form is channel.prompts[-1] and "expected true or false" in form.inputs["ok"].error.value
            form.inputs["ok"].widget.value = True
            form.submit_button.click()

        tg.start_soon(answer)
        response = await channel.ask(question)
    assert response.action == "accept" and response.content == {"ok": True}
    call.cancel()
    await stuck.cleaned.wait()


async def test_scripted_answers_leave_the_answered_form_in_the_calls_view(app, refund):
    """An unattended run still shows what a person would have seen, marked as scripted."""
    from fusion_nb.widgets import ShownScriptedAnswers

    from fusion_nb.engine import ScriptedAnswers

    channel = ShownScriptedAnswers(
        ScriptedAnswers({"confirm": True, "reason": "asked twice", "amount": 20}), frontend=True
    )
    call = app.start(app.request("billing.refund", {"id": "inv-7"}, channel=channel))
    view = CallView(call)
    result = await call.wait()
    assert result.value == "refunded 20 for asked twice"
    (form,) = view.prompts
    assert form.inputs["reason"].widget.value == "asked twice" and form.inputs["confirm"].widget.value is True
    assert "Submitted" in form.outcome.value and "(answered by script)" in form.outcome.value
    assert all(b.layout.display == "none" for b in form.buttons), "nothing left to click"
    # a notebook stored without widget state shows the question and its answer (nbconvert, GitHub)
    html = view._repr_mimebundle_()["text/html"]
    assert "Refund inv-7?" in html and "asked twice" in html and "answered by script" in html
    view.close()


async def test_a_view_whose_cell_raises_the_error_does_not_repeat_it(app):
    @app.f.action("breaks").handle
    async def breaks(input, ctx):
        raise ToolError("UPSTREAM", "the warehouse did not answer", recovery="Try again later.")

    call, other = app.start("breaks"), app.start("breaks")
    shown, left = CallView(call), CallView(other)
    left.leave_outcome_to_the_cell()
    await call.wait()
    await other.wait()
    assert "the warehouse did not answer Recovery: Try again later." in shown.details.value
    assert left.details.value == "", "the awaiting cell's one line says it"


async def test_a_view_whose_cell_shows_the_value_does_not_draw_its_image_again(app):
    import base64

    from fusion_nb.engine import use_presenter
    from fusion_nb.mcp.rich import Presenter

    class Dot:
        def _repr_png_(self) -> bytes:
            return base64.b64decode(PNG_1X1_B64)

    @app.f.query("picture").handle
    async def picture(input, ctx):
        return Dot()

    remove = use_presenter(Presenter())
    try:
        call, other = app.start("picture"), app.start("picture")
        shown, left = CallView(call), CallView(other)
        left.leave_outcome_to_the_cell()
        await call.wait()
        await other.wait()
    finally:
        remove()
    assert '<img src="data:image/png;base64,' in shown.details.value and "1x1 px" in shown.details.value
    assert left.details.value == "", "the awaiting cell's Out[n] draws the value"
    shown.close()
    left.close()


PNG_1X1_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAACAAAFAAEA+Lb4DgAAAABJRU5ErkJggg=="


async def test_a_decline_reads_as_a_decline_not_as_a_failure(app):
    """A person's Decline that ends the call (``DECLINED``) is their answer: no "failed", no error code."""

    @app.f.action("refund").handle
    async def refund(input, ctx):
        raise ToolError("DECLINED", "the person declined the refund of inv-7.")

    call = app.start("refund", {})
    await call.wait()
    out = io.StringIO()
    text_progress(call, file=out)  # the terminal's line
    line = out.getvalue()
    view = CallView(call)
    for shown in (line, view.status_line.value):
        assert "declined" in shown and "the person declined the refund of inv-7." in shown, shown
        assert "failed" not in shown and "DECLINED" not in shown, shown


async def test_the_text_card_shows_defaults(app):
    from fusion_nb.widgets import describe_tool

    app.f.query("math.add").with_integer("a").with_integer("b", default=2).with_enum(
        "unit", ["cm", "in"], default="cm"
    ).with_string("note", optional=True).handle(lambda input, ctx: input.a + input.b)
    shown = describe_tool(app.tools[0]).splitlines()
    assert shown[-4:] == [
        "  a: integer",
        "  b: integer (optional, default 2)",
        "  unit: 'cm' | 'in' (optional, default 'cm')",
        "  note: string/null (optional)",
    ]


async def test_choices_are_labelled_checkboxes_checked_as_ticked_and_titled_enums_show_labels():
    fields = {
        "color": ask.enum({"#f00": "Red", "#00f": "Blue"}, "Color"),
        "toppings": ask.choices({"cheese": "Cheese", "ham": "Ham", "olives": "Olives"}, "Toppings").min(1).max(2),
    }
    form = ElicitationForm(require_input.elicit("Order", fields))
    color, toppings = form.inputs["color"], form.inputs["toppings"]
    assert color.widget.options == (("Red", "#f00"), ("Blue", "#00f")), "a person reads labels; the answer is the value"
    assert toppings.label == "Toppings (pick 1 to 2)"
    boxes = toppings.widget.boxes
    assert [box.description for box in boxes] == ["Cheese", "Ham", "Olives"]
    for box in boxes:
        box.value = True
    assert "&quot;Toppings&quot; expected at most 2 picks, got 3" in toppings.error.value, "said as ticked"
    boxes[1].value = False
    assert toppings.error.value == ""
    color.widget.value = "#00f"
    form.submit_button.click()
    assert form.response.content == {"color": "#00f", "toppings": ["cheese", "olives"]}
    assert all(box.disabled for box in boxes), "answered: no more ticking"
    assert "Color = Blue, Toppings = Cheese, Olives" in form.outcome.value, "said by the labels a person picked"
    assert "<code>Blue</code>" in form.snapshot_html() and "<code>Cheese, Olives</code>" in form.snapshot_html()


async def test_a_scripted_answer_ticks_the_choices():
    form = ElicitationForm(require_input.elicit("Days", {"days": ask.choices(["mon", "tue", "wed"])}))
    form.inputs["days"].fill(["tue", "wed"])
    assert [box.value for box in form.inputs["days"].widget.boxes] == [False, True, True]
    assert form.inputs["days"].read() == ["tue", "wed"]
