"""Tasks in the engine: detached calls with owners, statuses, input, bounds, expiry and cancel."""

import anyio
import pytest

from fusion_nb import ask, progress, read_input, require_input, respond
from fusion_nb.engine import SERVER_BUSY, InputResponse, Tasks, TaskStatus, ToolError

pytestmark = pytest.mark.anyio


class Clock:
    """A clock the test moves by hand (expiry is measured on it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def job(app):
    """A task tool that reports progress, then waits for ``release`` before answering."""
    release, started = anyio.Event(), anyio.Event()

    @app.f.action("train").with_integer("epochs").task(ttl=60, poll_interval=0.5).handle
    async def train(input, ctx):
        yield progress(10, "epoch 1 of 3")
        started.set()
        await release.wait()
        yield progress(100, "done")
        yield respond({"epochs": input.epochs})

    return release, started


async def test_the_builder_declares_task_support(app):
    tool = app.f.action("t").task("required", ttl=10, poll_interval=2).handle(lambda input, ctx: 1).tool
    assert (tool.task.mode, tool.task.ttl, tool.task.poll_interval, tool.task.required) == ("required", 10, 2, True)
    assert app.f.action("plain").handle(lambda input, ctx: 1).tool.task is None
    with pytest.raises(ValueError, match='task mode must be "optional" or "required"'):
        app.f.action("x").task("sometimes")
    with pytest.raises(ValueError, match="ttl must be between"):
        app.f.action("x").task(ttl=0)


async def test_a_task_runs_detached_and_keeps_its_result(app, job):
    release, started = job
    tasks = Tasks(app)
    task = tasks.create("alice", "train", {"epochs": 3})
    assert task.status == TaskStatus.WORKING and len(task.id) >= 32
    assert (task.ttl, task.poll_interval) == (60, 0.5)
    await started.wait()
    assert task.status_message == "epoch 1 of 3", "the status message is the last progress message"
    release.set()
    await task.wait()
    assert task.status == TaskStatus.COMPLETED
    assert task.result.structured_content == {"epochs": 3}
    assert task.status_message == "done"
    assert task.created_at.endswith("Z") and task.updated_at >= task.created_at
    assert tasks.get("alice", task.id) is task


async def test_ids_are_unguessable_and_distinct(app):
    app.f.action("quick").task().handle(lambda input, ctx: "ok")
    tasks = Tasks(app)
    made = [tasks.create("alice", "quick") for _ in range(50)]
    assert len({task.id for task in made}) == 50
    for task in made:
        await task.wait()


async def test_owners_are_isolated(app, job):
    release, _ = job
    tasks = Tasks(app)
    task = tasks.create("alice", "train", {"epochs": 1})
    assert tasks.get("bob", task.id) is None
    assert tasks.list("bob") == [] and tasks.list("alice") == [task]
    assert tasks.cancel("bob", task.id) is None and task.status == TaskStatus.WORKING
    assert (
        tasks.answer("bob", task.id, "input", InputResponse("accept"))
        == f'There is no task "{task.id}" for this client.'
    )
    release.set()
    await task.wait()


async def test_cancel_aborts_the_call_its_cleanup_runs_and_its_slot_frees(app, slow):
    entered, cleaned = slow
    app.f.mutation("slow.serialized").task().handle(app.get("slow").handler)  # a mutation holds a slot
    tasks = Tasks(app)
    task = tasks.create("alice", "slow.serialized")
    await entered.wait()
    assert app.stats().slots_active == 1
    assert tasks.cancel("alice", task.id) is task
    assert task.status == TaskStatus.CANCELLED
    with anyio.fail_after(1):
        await task.call.wait_stopped()
    assert cleaned == [True]
    assert app.stats().slots_active == 0 and app.active_calls == []


async def test_a_task_asking_for_input_waits_input_required_and_resumes_when_answered(app):
    @app.f.action("confirm").task().handle
    async def confirm(input, ctx):
        go = read_input("go")
        if go is None:
            return require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")})
        return f"go={go}"

    tasks = Tasks(app)
    task = tasks.create("alice", "confirm")
    while task.status != TaskStatus.INPUT_REQUIRED:
        await task.wait_change()
    assert task.status_message == "Go ahead?" and task.question.request.key == "go"
    assert tasks.answer("alice", task.id, "other", InputResponse("accept", {"go": True})) == (
        f'Task "{task.id}" (tool "confirm") asks for input "go", not "other".'
    )
    assert tasks.answer("alice", task.id, "go", InputResponse("accept", {"go": "yes"})) is None
    while task.status != TaskStatus.INPUT_REQUIRED or not task.question.problems:
        await task.wait_change()  # an invalid answer is asked again, its problem as the message
    assert "go" in task.status_message
    assert tasks.answer("alice", task.id, "go", InputResponse("accept", {"go": True})) is None
    await task.wait()
    assert task.status == TaskStatus.COMPLETED and task.result.value == "go=True"
    assert tasks.answer("alice", task.id, "go", InputResponse("accept")) == (
        f'Task "{task.id}" (tool "confirm") is completed and asks for no input.'
    )


async def test_a_client_that_cannot_answer_fails_the_task_at_once(app):
    @app.f.action("confirm").task().handle
    async def confirm(input, ctx):
        return require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")})

    tasks = Tasks(app)
    task = tasks.create("alice", "confirm", can_answer=lambda request: False)
    await task.wait()
    assert task.status == TaskStatus.FAILED and task.result.error.code == "ELICITATION_UNSUPPORTED"


async def test_ttl_expiry_frees_the_task_and_its_result(app, job):
    release, _ = job
    clock = Clock()
    tasks = Tasks(app, clock=clock)
    task = tasks.create("alice", "train", {"epochs": 2}, ttl=10)
    assert task.ttl == 10, "a client may ask for less than the tool's ttl"
    release.set()
    await task.wait()
    clock.now += 9.9
    assert tasks.get("alice", task.id) is task
    clock.now += 0.1
    assert tasks.get("alice", task.id) is None and tasks.store.count() == 0
    assert task.call is None, "the result is freed with the task"
    longer = tasks.create("alice", "train", {"epochs": 2}, ttl=10_000)
    assert longer.ttl == 60, "no more than the tool's ttl"
    await longer.wait()


async def test_a_running_task_past_its_ttl_is_aborted_and_freed(app, slow):
    entered, cleaned = slow
    clock = Clock()
    tasks = Tasks(app, clock=clock)
    task = tasks.create("alice", "slow", ttl=5)
    await entered.wait()
    clock.now += 5
    call = task.call
    assert tasks.sweep() == 1 and task.status == TaskStatus.CANCELLED
    with anyio.fail_after(1):
        await call.wait_stopped()
    assert cleaned == [True]


async def test_a_running_task_is_stopped_at_its_ttl_unasked_and_stays_visible_until_its_cleanup_ran(app):
    """Issue 44, 11: nobody polls; at its ttl the task is stopped, and goes only once its cleanup has run.

    Before, it ran on past its ttl until some access swept it, and that sweep removed it
    at once while its cleanup (and any code ignoring the abort) still ran, unseen.
    """
    entered, cleaning, finish = anyio.Event(), anyio.Event(), anyio.Event()

    @app.f.action("long").task(ttl=60).handle
    async def long(input, ctx):
        try:
            entered.set()
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                cleaning.set()
                await finish.wait()  # a cleanup that takes a while

    tasks = Tasks(app)
    task = tasks.create("alice", "long", ttl=0.2)
    try:
        await entered.wait()
        with anyio.fail_after(10):
            await cleaning.wait()  # stopped at its ttl, with no access at all
        assert task.status == TaskStatus.CANCELLED and task.status_message == (
            "The task reached its ttl (0.2 s); its call was stopped."
        )
        assert tasks.get("alice", task.id) is task and tasks.store.count() == 1  # visible while its cleanup runs
    finally:
        finish.set()
        await tasks.stop(task)  # (on the old code it ran on: its end must not hang the test)
    with anyio.fail_after(10):
        while tasks.store.count():
            await anyio.sleep(0.01)
    assert tasks.get("alice", task.id) is None and task.call is None


async def test_bounds_per_owner_and_in_total_answer_server_busy(app, job):
    release, _ = job
    tasks = Tasks(app, max_per_owner=2, max_total=3)
    made = [tasks.create("alice", "train", {"epochs": 1}), tasks.create("alice", "train", {"epochs": 1})]
    with pytest.raises(ToolError) as busy:
        tasks.create("alice", "train", {"epochs": 1})
    assert busy.value.code == SERVER_BUSY
    assert busy.value.message == 'Tool "train" cannot start a task: this client already holds 2 tasks.'
    made.append(tasks.create("bob", "train", {"epochs": 1}))
    with pytest.raises(ToolError) as full:
        tasks.create("carol", "train", {"epochs": 1})
    assert full.value.message == 'Tool "train" cannot start a task: this server already holds 3 tasks.'
    release.set()
    for task in made:
        await task.wait()
    assert [task.status for task in made] == [TaskStatus.COMPLETED] * 3


async def test_a_failing_call_fails_its_task_with_the_error_as_message(app):
    @app.f.action("broken").task().handle
    async def broken(input, ctx):
        raise ToolError("NO_DATA", "There is no data for 2026Q3.")

    tasks = Tasks(app)
    task = tasks.create("alice", "broken")
    await task.wait()
    assert task.status == TaskStatus.FAILED and task.status_message == "There is no data for 2026Q3."
