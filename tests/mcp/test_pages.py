"""Lists cost one page (issue 51): ``tools/list``, ``resources/list``, ``resources/templates/list``,
``prompts/list`` and ``tasks/list`` are paged with opaque cursors, on every era and transport.

A forged, malformed or stale cursor is -32602 in one sentence (before, any cursor was
ignored and the whole list sent again). The app (``pages_app``) holds 25 tools and 12
resources, templates and prompts; served with ``page_size=10`` each list takes pages.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import pytest
from eras import ERAS, client_for
from http_serving import serve
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from pages_app import register
from raw_peer import RawError, raw_peer
from stdio_serving import HERE, INITIALIZE, REPO, StdioCommand, open_raw

from fusion_nb import Fusion, respond
from fusion_nb.engine import MemoryTaskStore, Task, tasks_of
from fusion_nb.mcp import mcp_server
from fusion_nb.mcp.pages import PageMiddleware
from fusion_nb.mcp.wire import preencoded

pytestmark = pytest.mark.anyio

#: (the SDK client's method, the item's name attribute, how many the app holds)
LISTS = [
    ("list_tools", "tools", "name", 25),
    ("list_resources", "resources", "uri", 12),
    ("list_resource_templates", "resource_templates", "uri_template", 12),
    ("list_prompts", "prompts", "name", 12),
]


async def walk(client: Client) -> dict[str, list[list[str]]]:
    """Every list, page by page, following ``nextCursor`` (each page's item names)."""
    walked: dict[str, list[list[str]]] = {}
    for method, key, name, _count in LISTS:
        pages, cursor = [], None
        while True:
            page = await getattr(client, method)(cursor=cursor)
            pages.append([str(getattr(item, name)) for item in getattr(page, key)])
            cursor = page.next_cursor
            if cursor is None:
                break
            assert "." not in cursor and len(cursor) < 100  # opaque and short
        walked[key] = pages
    return walked


def assert_paged_by_ten(walked: dict[str, list[list[str]]]) -> None:
    for _method, key, _name, count in LISTS:
        pages = walked[key]
        assert [len(page) for page in pages] == [10] * (count // 10) + [count % 10], key
        names = [item for page in pages for item in page]
        assert names == sorted(set(names)) and len(names) == count, key  # all of them, in order, once


async def refused(call: Any) -> str:
    with pytest.raises(MCPError) as caught:
        await call
    error = caught.value.error
    assert error.code == -32602, error
    message = error.message
    assert "\n" not in message and message.endswith(".") and len(message) < 200, message
    return message


def paged_app() -> Fusion:
    return register(Fusion("pages-test"))


@pytest.mark.parametrize("era", ERAS)
async def test_every_list_is_paged_and_walked_in_memory(era):
    async with client_for(mcp_server(paged_app(), page_size=10), era) as client:
        assert_paged_by_ten(await walk(client))


@pytest.mark.parametrize("era", ERAS)
async def test_a_forged_or_malformed_cursor_is_one_sentence(era):
    async with client_for(mcp_server(paged_app(), page_size=10), era) as client:
        good = (await client.list_tools()).next_cursor
        assert good is not None
        tampered = good[:-2] + ("AA" if not good.endswith("AA") else "BB")
        for cursor in ("forged", "", tampered, "%%%", "x" * 5000):
            said = await refused(client.list_tools(cursor=cursor))
            assert "not one this server gave" in said and "list again without a cursor" in said
        said = await refused(client.list_prompts(cursor=good))  # a tools/list cursor is no prompts/list cursor
        assert said.startswith("prompts/list: the cursor")


@pytest.mark.parametrize("era", ERAS)
async def test_a_cursor_of_a_list_that_changed_since_is_stale(era):
    app = paged_app()
    async with client_for(mcp_server(app, page_size=10), era) as client:
        cursor = (await client.list_tools()).next_cursor

        @app.f.query("late").describe("Added after the first page.").handle
        async def late(input, ctx):
            return "late"

        said = await refused(client.list_tools(cursor=cursor))
        assert said == (
            "tools/list: the cursor is stale: the list changed after it was given; list again without a cursor."
        )
        first = await client.list_tools()
        again = await client.list_tools(cursor=first.next_cursor)
        assert again.tools[0].name == "tool010"


async def test_the_default_page_holds_up_to_a_thousand_items_and_a_hundred_tasks():
    app = register(Fusion("pages-test"), tools=1001, others=0)
    async with client_for(mcp_server(app), "2025-memory") as client:
        first = await client.list_tools()
        assert len(first.tools) == 1000 and first.next_cursor is not None
        assert [t.name for t in (await client.list_tools(cursor=first.next_cursor)).tools] == ["tool1000"]
    assert mcp_server(app).task_wire.page_size == 100  # tasks: a client's whole list within the default bound
    with pytest.raises(ValueError, match="page_size must be a whole number of items"):
        mcp_server(app, page_size=0)


# -- over stdio (``fusion-nb serve --page-size``) and HTTP --------------------------------------


def serve_command() -> StdioCommand:
    return StdioCommand(
        argv=[sys.executable, "-u", "-m", "fusion_nb", "serve", str(HERE / "pages_app.py"), "--page-size", "10"],
        env={"PYTHONPATH": f"{HERE}{os.pathsep}{REPO}"},
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_lists_are_paged_over_stdio_on_both_eras(mode):
    command = serve_command()
    params = StdioServerParameters(command=command.argv[0], args=command.argv[1:], env=command.env, cwd=command.cwd)
    async with Client(params, mode=mode) as client:
        assert_paged_by_ten(await walk(client))
        said = await refused(client.list_resources(cursor="forged"))
        assert said.startswith("resources/list: the cursor 'forged' is not one this server gave")


async def test_a_cursor_that_is_no_string_is_one_sentence_over_the_raw_pipe():
    async with open_raw(serve_command()) as server:
        await server.send(INITIALIZE)
        assert (await server.receive())["id"] == 1
        await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": 7}})
        answer = await server.receive()
        assert answer["error"]["code"] == -32602
        assert answer["error"]["message"] == (
            'Invalid params for tools/list: field "params.cursor" expected a string, got 7 (int).'
        )
        await server.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        page = await server.receive()
        assert [tool["name"] for tool in page["result"]["tools"]] == [f"tool{n:03}" for n in range(10)]
        assert page["result"]["tools"][0]["inputSchema"]["required"] == ["a", "b"]
        assert server.process.stdin is not None
        await server.process.stdin.aclose()


@pytest.mark.asyncio_only  # (uvicorn runs on asyncio)
class TestHttp:
    @pytest.mark.parametrize("mode", ["legacy", "auto"])
    async def test_lists_are_paged_over_http_on_both_eras(self, mode):
        async with serve(paged_app(), page_size=10) as served, served.client(mode) as client:
            assert_paged_by_ten(await walk(client))
            said = await refused(client.list_resource_templates(cursor="forged"))
            assert said.startswith("resources/templates/list: the cursor 'forged' is not one this server gave")


# -- tasks/list ----------------------------------------------------------------------------


def task_app() -> Fusion:
    app = Fusion("pages-tasks")

    @app.f.action("quick").task(poll_interval=0.05).handle
    async def quick(input, ctx):
        yield respond("done")

    return app


async def test_tasks_list_is_paged_and_its_cursor_is_sealed():
    app = task_app()
    tasks = tasks_of(app)
    made = [tasks.create(None, "quick") for _ in range(25)]
    async with raw_peer(mcp_server(app, page_size=10)) as peer:
        pages, params = [], {}
        while True:
            page = await peer.request("tasks/list", params)
            pages.append([task["taskId"] for task in page["tasks"]])
            if "nextCursor" not in page:
                break
            params = {"cursor": page["nextCursor"]}
        assert [len(page) for page in pages] == [10, 10, 5]
        assert [task_id for page in pages for task_id in page] == [task.id for task in made]
        for cursor, said in (
            ("forged", "tasks/list: the cursor 'forged' is not one this server gave"),
            (3, 'Invalid params for tasks/list: field "params.cursor" expected a string, got 3 (int).'),
        ):
            with pytest.raises(RawError) as caught:
                await peer.request("tasks/list", {"cursor": cursor})
            assert caught.value.code == -32602 and caught.value.message.startswith(said)
    for task in made:
        with anyio.fail_after(10):
            await task.wait()
    await app.aclose()


class CountedOwner:
    """An owner whose every comparison is counted: what a list of another owner's tasks touches."""

    compared = 0

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        CountedOwner.compared += 1
        return isinstance(other, CountedOwner) and other.name == self.name


def test_one_owners_list_touches_none_of_anothers_tasks():
    store = MemoryTaskStore()
    alice, bob = CountedOwner("alice"), CountedOwner("bob")
    for owner, prefix, count in ((alice, "a", 3), (bob, "b", 500)):
        for n in range(count):
            task = Task(f"{prefix}{n}", owner, "quick", None, 60.0, 1.0, 0.0)
            task.created = float(n)
            store.put(task)
    CountedOwner.compared = 0
    assert [task.id for task in store.owned(alice)] == ["a0", "a1", "a2"]
    assert store.count(alice) == 3
    assert CountedOwner.compared <= 2  # (a dict lookup: never one comparison per task of bob's)
    tasks, mark = store.page(bob, None, 200)
    assert len(tasks) == 200 and mark == (199, "b199", 199.0)
    store.remove("b100")  # a task before the mark went: the next page still starts after b199
    tasks, mark = store.page(bob, mark, 200)
    assert [tasks[0].id, tasks[-1].id] == ["b200", "b399"]
    store.remove("b399")  # the mark's own task went: the next page starts after its time
    tasks, mark = store.page(bob, mark, 200)
    assert [tasks[0].id, tasks[-1].id, mark] == ["b400", "b499", None]


def test_a_page_is_encoded_once_until_its_list_changes():
    app = paged_app()
    server = mcp_server(app, page_size=10)
    pages = next(m for m in server.middleware if isinstance(m, PageMiddleware)).lists["tools/list"]
    first = pages.page(None, "2025-11-25")
    body = preencoded(first, ascii=False)
    assert body is not None and json.loads(body)["tools"][0]["name"] == "tool000"
    assert pages.page(None, "2025-11-25") is first and preencoded(first, ascii=False) is body  # kept, not redone
    assert json.loads(preencoded(first, ascii=True) or b"") == json.loads(body)  # the HTTP face's ASCII form

    @app.f.query("late").describe("Added after the first page.").handle
    async def late(input, ctx):
        return "late"

    again = pages.page(None, "2025-11-25")  # encoded afresh, for the list's next generation
    assert again is not first and again["nextCursor"] != first["nextCursor"]


@pytest.mark.parametrize("era", ["2025-memory", "2026-direct"])
async def test_workers_sharing_a_state_key_read_each_others_cursors(era):
    """Behind one endpoint (``fusion-nb serve --workers``) the next page may reach another process."""
    key = "k" * 32
    one, other, stranger = (
        mcp_server(paged_app(), page_size=10, request_state_keys=keys) for keys in ([key], [key], ["s" * 32])
    )
    async with client_for(one, era) as first:
        cursor = (await first.list_tools()).next_cursor
    async with client_for(other, era) as second:
        assert (await second.list_tools(cursor=cursor)).tools[0].name == "tool010"
    async with client_for(stranger, era) as third:
        assert "not one this server gave" in await refused(third.list_tools(cursor=cursor))
