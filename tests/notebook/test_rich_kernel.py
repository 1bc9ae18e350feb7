"""In a real kernel the agent gets what the notebook would show: IPython's formatters present a tool's answer."""

import base64
import re
import struct

import anyio
import pytest
from mcp import MCPError, types
from mcp.shared.exceptions import MCPDeprecationWarning

from fusion_nb.mcp import connect

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]


async def serve(kernel) -> tuple[str, str]:
    """``%fusion serve``: the endpoint and token it printed."""
    served = await kernel.run("%fusion serve")
    url = re.search(r"MCP endpoint: (\S+)", served.stdout)
    token = re.search(r"Bearer token: (\S+)", served.stdout)
    assert url is not None and token is not None, served.stdout
    return url.group(1), token.group(1)


POINT = """
class Point:
    def __init__(self, x):
        self.x = x

get_ipython().display_formatter.formatters["text/markdown"].for_type(Point, lambda p: f"**Point at {p.x}**")
"""


async def test_a_formatter_registered_only_in_the_kernel_reaches_the_agent(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(POINT)
    await kernel.run('%%fusion_tool point\n"""A point, shown as the notebook shows it."""\nreturn Point(3)')
    url, token = await serve(kernel)
    for mode in ("legacy", "auto"):
        async with connect(url, token, mode=mode) as client:
            result = await client.call_tool("point", {})
        assert [block.text for block in result.content] == ["**Point at 3**"], (mode, result)
    outside = await kernel.run("from fusion_nb.mcp.rich import builtin_bundle\nprint(sorted(builtin_bundle(Point(3))))")
    assert outside.stdout.strip() == "['text/plain']", "outside IPython's formatter the type has no rich form"
    await kernel.run("%fusion stop")


async def serve_table(kernel):
    await kernel.run("%load_ext fusion_nb\nimport pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})")
    shared = await kernel.run("%fusion share df")
    assert "Sharing df as nb://vars/df." in shared.stdout, shared.stdout
    return await serve(kernel)


async def test_a_shared_variable_is_listed_read_and_announced_when_reassigned(kernel):
    url, token = await serve_table(kernel)
    listed = await kernel.run("%fusion list")
    assert "resource nb://vars/df" in listed.stdout and "template nb://vars/{name}" in listed.stdout
    assert "template nb://vars/{name}.json" in listed.stdout
    inspected = await kernel.run("%fusion inspect")
    assert "nb://vars/df" in inspected.stdout and "nb://vars/{name}.json" in inspected.stdout, inspected.stdout
    updated = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification) and str(message.params.uri) == "nb://vars/df":
            updated.set()

    async with connect(url, token, mode="legacy", message_handler=on_message) as client:
        assert "nb://vars/df" in [str(r.uri) for r in (await client.list_resources()).resources]
        read = (await client.read_resource("nb://vars/df")).contents[0]
        assert read.mime_type == "text/csv" and read.text == "a\n1\n2\n"
        as_json = (await client.read_resource("nb://vars/df.json")).contents[0]
        assert as_json.mime_type == "application/json" and as_json.text == '[{"a":1},{"a":2}]'
        await kernel.run("secret = 'not for agents'")
        for uri, sentence in [  # defined but not shared, or a path: one sentence, nothing read
            ("nb://vars/secret", "'secret' is not a shared variable; shared: ['df']"),
            ("nb://vars/secret.json", "'secret' is not a shared variable; shared: ['df']"),
            ("nb://vars/..%2F..%2Fetc%2Fpasswd", "'..%2F..%2Fetc%2Fpasswd' is not a shared variable"),
            ("nb://vars/../../etc/passwd", "Unknown resource 'nb://vars/../../etc/passwd'"),
            ("file:///etc/passwd", "Unknown resource 'file:///etc/passwd'; this server offers: nb://vars/df"),
        ]:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            assert sentence in str(refused.value) and "\n" not in str(refused.value), (uri, str(refused.value))
            assert "not for agents" not in str(refused.value)
        with pytest.warns(MCPDeprecationWarning):  # the SDK says: the 2025 way (2026 listens, below)
            await client.subscribe_resource("nb://vars/df")
        await kernel.run("df = pd.DataFrame({'a': [3]})")
        with anyio.fail_after(20):
            await updated.wait()
        assert (await client.read_resource("nb://vars/df")).contents[0].text == "a\n3\n"
    async with connect(url, token, mode="auto") as client:
        async with client.listen(resource_subscriptions=["nb://vars/df"]) as subscription:
            await kernel.run("df = pd.DataFrame({'a': [4, 5, 6]})")
            with anyio.fail_after(20):
                event = await subscription.__anext__()
        assert type(event).__name__ == "ResourceUpdated" and event.uri == "nb://vars/df"
    unshared = await kernel.run("%fusion unshare df")
    assert "no longer served" in unshared.stdout
    async with connect(url, token, mode="auto") as client:
        assert "nb://vars/df" not in [str(r.uri) for r in (await client.list_resources()).resources]
        with pytest.raises(MCPError) as refused:
            await client.read_resource("nb://vars/df")
        assert "'df' is not a shared variable; shared: nothing" in str(refused.value)
    await kernel.run("%fusion stop")


FIGURE = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(4, 2))
ax.plot([1, 2])
plt.close(fig)
"""


async def test_a_shared_figure_reads_as_png(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(FIGURE)
    assert "Sharing fig as nb://vars/fig." in (await kernel.run("%fusion share fig")).stdout
    url, token = await serve(kernel)
    async with connect(url, token, mode="auto") as client:
        (read,) = (await client.read_resource("nb://vars/fig")).contents
    assert read.mime_type == "image/png"
    png = base64.b64decode(read.blob)
    assert png.startswith(b"\x89PNG") and struct.unpack(">II", png[16:24]) == (400, 200)  # 4x2 in at 100 dpi
    await kernel.run("%fusion stop")


async def test_a_prompt_cell_round_trips(kernel):
    await kernel.run("%load_ext fusion_nb")
    made = await kernel.run('%%fusion_prompt review\n"""Review a function."""\nReview {function} for {concern}.')
    assert "Prompt review(function, concern) is served" in made.stdout, made.stdout
    url, token = await serve(kernel)
    for mode in ("legacy", "auto"):
        async with connect(url, token, mode=mode) as client:
            (prompt,) = (await client.list_prompts()).prompts
            assert prompt.description == "Review a function." and [a.name for a in prompt.arguments] == [
                "function",
                "concern",
            ]
            got = await client.get_prompt("review", {"function": "f", "concern": "speed"})
            assert got.messages[0].content.text == "Review f for speed."
            with pytest.raises(MCPError) as missing:
                await client.get_prompt("review", {"function": "f"})
            assert "needs the argument 'concern'" in str(missing.value)
    assert "prompt   review(function, concern): Review a function." in (await kernel.run("%fusion list")).stdout
    assert "prompt   review(function, concern)" in (await kernel.run("%fusion inspect")).stdout
    await kernel.run("%fusion stop")


async def test_a_new_share_and_a_new_prompt_are_announced_to_a_2025_client(kernel):
    url, token = await serve_table(kernel)
    heard: list[str] = []
    arrived = [anyio.Event()]
    kinds = {types.ResourceListChangedNotification: "resources", types.PromptListChangedNotification: "prompts"}

    async def on_message(message):
        if type(message) in kinds:
            heard.append(kinds[type(message)])
            arrived[0].set()

    async def hear(kind: str) -> None:
        with anyio.fail_after(20):
            while kind not in heard:
                await arrived[0].wait()
                arrived[0] = anyio.Event()
        heard.remove(kind)

    async with connect(url, token, mode="legacy", message_handler=on_message) as client:
        caps = client.server_capabilities
        assert caps.resources.list_changed is True and caps.prompts.list_changed is True
        assert [str(r.uri) for r in (await client.list_resources()).resources] == ["nb://vars/df"]
        await kernel.run("scores = [1, 2, 3]")
        shared = await kernel.run("%fusion share scores")
        assert "Sharing scores as nb://vars/scores." in shared.stdout, shared.stdout
        await hear("resources")
        assert "nb://vars/scores" in [str(r.uri) for r in (await client.list_resources()).resources]
        await kernel.run('%%fusion_prompt review\n"""Review a function."""\nReview {function}.')
        await hear("prompts")
        assert [p.name for p in (await client.list_prompts()).prompts] == ["review"]
    await kernel.run("%fusion stop")
