"""In a real kernel the agent gets what the notebook would show: IPython's formatters present a tool's answer."""

import re

import pytest

from fusion_nb.mcp import connect

pytestmark = [pytest.mark.anyio, pytest.mark.kernel]

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
    served = await kernel.run("%fusion serve")
    url = re.search(r"MCP endpoint: (\S+)", served.stdout)
    token = re.search(r"Bearer token: (\S+)", served.stdout)
    assert url is not None and token is not None, served.stdout
    for mode in ("legacy", "auto"):
        async with connect(url.group(1), token.group(1), mode=mode) as client:
            result = await client.call_tool("point", {})
        assert [block.text for block in result.content] == ["**Point at 3**"], (mode, result)
    outside = await kernel.run("from fusion_nb.mcp.rich import builtin_bundle\nprint(sorted(builtin_bundle(Point(3))))")
    assert outside.stdout.strip() == "['text/plain']", "outside IPython's formatter the type has no rich form"
    await kernel.run("%fusion stop")
