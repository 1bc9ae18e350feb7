"""``%fusion tasks`` in a real kernel: a ``.task()`` tool made from a cell's builder expression, and its tasks."""

import pytest

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]


async def test_fusion_tasks_lists_tool_owner_status_age_and_last_message(kernel):
    await kernel.run("%load_ext fusion_nb")
    empty = await kernel.run("%fusion tasks")
    assert empty.texts() == ["No tasks: an agent starts one by calling a tool made with .task() as a task."]
    await kernel.run(
        '%%fusion_tool f.action("train").with_integer("epochs").task(ttl=600)\n'
        "yield progress(30, f'epoch 1 of {input.epochs}')\n"
        "await asyncio.Event().wait()"
    )
    await kernel.run(
        "import asyncio, fusion_nb\nfrom fusion_nb.engine import tasks_of\n"
        "print(fusion_nb.default_app.get('train').task.mode)\n"
        "task = tasks_of(fusion_nb.default_app).create('alice', 'train', {'epochs': 5})\n"
        "while task.status_message is None: await asyncio.sleep(0.01)"
    )
    listing = await kernel.run("%fusion tasks")
    (text,) = listing.texts()
    heading, row = text.splitlines()
    assert heading.split() == ["task", "tool", "owner", "status", "age", "last", "message"]
    assert row.split()[1:] == ["train", "alice", "working", "0", "s", "epoch", "1", "of", "5"]
    html = next(m["content"]["data"]["text/html"] for m in listing.messages if m["msg_type"] == "execute_result")
    assert "<table class='fusion-tasks'>" in html and "<td style='text-align:left'>alice</td>" in html
    stopped = await kernel.run("tasks_of(fusion_nb.default_app).cancel('alice', task.id).status")
    assert stopped.texts()[-1] == "<TaskStatus.CANCELLED: 'cancelled'>"
