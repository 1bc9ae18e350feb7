"""%load_ext fusion_nb and %%fusion_tool in a real kernel: every handler kind, errors that point at the cell."""

import re

import pytest

USAGE = "list | serve | stop | status | calls | inspect [TOOL] | share NAME | unshare NAME | tasks | help"

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]


async def test_load_is_idempotent_and_tools_of_every_kind_are_callable(kernel):
    await kernel.run("%load_ext fusion_nb\n%load_ext fusion_nb\nimport asyncio")
    await kernel.run('%%fusion_tool greet\n"""Say hello."""\nreturn f"hello {ctx.tool.name}"')
    await kernel.run(
        '%%fusion_tool f.query("math.add").with_integer("a").with_integer("b", default=2)\n'
        "await asyncio.sleep(0)\nreturn input.a + input.b"
    )
    await kernel.run(
        '%%fusion_tool f.action("count").with_integer("n")\nawait asyncio.sleep(0)\nfor i in range(input.n):\n'
        '    yield progress((i + 1) * 100 / input.n, f"step {i + 1}")\nreturn "counted"'
    )
    await kernel.run(
        '%%fusion_tool f.action("sync.steps")\nimport threading\nyield progress(50)\n'
        "return threading.current_thread() is not threading.main_thread()"
    )
    cell = await kernel.run("print(await greet(), await math_add(a=40), await count(n=3), await sync_steps())")
    assert cell.stdout.strip() == "hello greet 42 counted True"
    listing = await kernel.run(
        "import fusion_nb\nprint([(t.name, str(t.kind), t.description) for t in fusion_nb.default_app.tools])"
    )
    assert (
        listing.stdout.strip()
        == "[('greet', 'sync', 'Say hello.'), ('math.add', 'async', None), ('count', 'async_gen', None), "
        "('sync.steps', 'sync_gen', None)]"
    )


async def test_the_body_sees_notebook_globals_and_rerunning_replaces_the_tool(kernel):
    await kernel.run("%load_ext fusion_nb\nGREETING = 'hi'")
    await kernel.run("%%fusion_tool hello\nreturn GREETING")
    await kernel.run("GREETING = 'hey'")
    assert (await kernel.run("print(await hello())")).stdout.strip() == "hey"
    await kernel.run("%%fusion_tool hello\nreturn 'replaced'")
    cell = await kernel.run("import fusion_nb\nprint(await hello(), len(fusion_nb.default_app.tools))")
    assert cell.stdout.strip() == "replaced 1"


async def test_syntax_error_points_at_the_cell_line(kernel):
    await kernel.run("%load_ext fusion_nb")
    cell = await kernel.run("%%fusion_tool broken\nx = 1\ny = (\nreturn x", ok=False)
    assert cell.status == "error" and cell.error["ename"] == "SyntaxError"
    shown = "\n".join(cell.error["traceback"])
    assert "line 3" in shown, shown


async def test_runtime_error_traceback_names_the_cell_line_and_source(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(
        '%%fusion_tool f.action(\'boom\').with_integer(\'x\')\n"""Fails on purpose."""\n'
        "y = input.x * 2\nraise ValueError(f'bad value {y}')\nreturn y"
    )
    cell = await kernel.run("await boom(x=21)", ok=False)
    assert cell.error["ename"] == "ValueError" and cell.error["evalue"] == "bad value 42"
    import re

    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(cell.error["traceback"]))
    assert "line 4" in shown and "raise ValueError(f'bad value {y}')" in shown, shown
    assert "await boom(x=21)" in shown, "the calling cell's line"
    assert "fusion_nb" not in shown and "anyio" not in shown and "asyncio" not in shown, "no internal frames"


async def test_a_failing_tool_is_shown_once(kernel):
    """The cell raises the crash at the tool's line; no folded copy in the view, no logged copy on stderr."""
    await kernel.run("%load_ext fusion_nb\nimport ipywidgets")  # (a widget frontend: the view is a widget)
    await kernel.run("%%fusion_tool boom\nraise ValueError('bad value')")
    cell = await kernel.run("await boom()", ok=False)
    assert cell.error["ename"] == "ValueError" and cell.stderr == "", cell.stderr
    folded = [s["value"] for s in kernel.widgets.values() if "<details>" in str(s.get("value", ""))]
    assert folded == [], "the traceback once, in the cell's error"
    started = await kernel.run("call = boom.start()\nawait call.wait()\nNone")  # not raised by the cell
    assert started.stderr == "", "its view folds the traceback: the log does not print it again"
    assert any("ValueError: bad value" in str(s.get("value", "")) for s in kernel.widgets.values())


async def test_bad_headers_and_bad_input_are_one_clear_sentence(kernel):
    await kernel.run("%load_ext fusion_nb")
    empty = await kernel.run("%%fusion_tool\nreturn 1", ok=False)
    assert empty.status == "error" and "UsageError: %%fusion_tool needs a tool name" in empty.stderr
    wrong = await kernel.run("%%fusion_tool 1 + 1\nreturn 1", ok=False)
    assert 'must give a tool builder such as f.query("name"), got int' in wrong.stderr
    await kernel.run("%%fusion_tool f.action('typed').with_integer('n')\nreturn input.n")
    bad = await kernel.run("await typed(n='x')", ok=False)
    assert bad.error["ename"] == "ToolError" and 'field "n" expected an integer' in bad.error["evalue"]


async def test_a_cell_tool_takes_raw_json_schema_and_header_fields(kernel):
    """Issue 46: ``with_schema`` and ``header=`` in a ``%%fusion_tool`` header, bad ones in one sentence."""
    await kernel.run(
        "%load_ext fusion_nb\nSCHEMA = {'type': 'object', 'properties': {'city': {'type': 'string'}},"
        " 'required': ['city'], 'additionalProperties': False}"
    )
    await kernel.run('%%fusion_tool f.query("weather").with_schema(SCHEMA)\nreturn f"sunny in {input.city}"')
    assert (await kernel.run("print(await weather(city='Oslo'))")).stdout.strip() == "sunny in Oslo"
    bad = await kernel.run("await weather(town='Oslo')", ok=False)
    assert bad.error["ename"] == "ToolError"
    assert 'field "city" is required but was not sent; field "town" is not accepted' in bad.error["evalue"]
    await kernel.run('%%fusion_tool f.query("routed").with_string("region", header="Region")\nreturn input.region')
    listed = await kernel.run(
        "import fusion_nb\nprint(fusion_nb.default_app.get('routed').input_schema['properties']['region'])"
    )
    assert "'x-mcp-header': 'Region'" in listed.stdout
    wrong = await kernel.run(
        '%%fusion_tool f.query("r2").with_string("region", header="My Region")\nreturn 1', ok=False
    )
    assert "UsageError" in wrong.stderr and "x-mcp-header must be a header name token" in wrong.stderr
    assert "Traceback" not in wrong.stderr


async def test_mistakes_read_as_one_sentence_with_the_near_name(kernel):
    """A typo in a builder verb, method or field kind, or in a tool's name: one sentence naming the near name."""
    await kernel.run("%load_ext fusion_nb\nfrom fusion_nb import ask")
    for header, sentence in [
        (
            'f.query("math.add").with_integr("a")',
            'f.query("math.add") has no method "with_integr" (did you mean .with_integer?)',
        ),
        ('f.querry("math.add")', 'f has no verb "querry" (did you mean f.query?)'),
        ('f.query("math.add").with_integer("a", default="x")', "field \"a\" cannot default to 'x'"),
    ]:
        cell = await kernel.run(f"%%fusion_tool {header}\nreturn 1", ok=False)
        assert cell.status == "error" and cell.error is None, "a UsageError: no traceback"
        shown = strip_colours(cell.stderr).strip()
        assert shown.startswith(f"UsageError: %%fusion_tool header: {sentence}") and "\n" not in shown, shown
    kind = await kernel.run('ask.integr("seats")', ok=False)
    shown = strip_colours("\n".join(kind.error["traceback"]))
    assert 'ask has no field kind "integr" (did you mean ask.integer?)' in shown, shown
    assert shown.index("----> 1 ask.integr") < shown.index("_ask.py"), "the person's line first"
    await kernel.run('%%fusion_tool f.query("math.add").with_integer("a")\nreturn input.a')
    unknown = await kernel.run('import fusion_nb\nprint((await fusion_nb.default_app.call("math.ad", {})).error)')
    assert 'There is no tool named "math.ad" (did you mean "math.add"?' in unknown.stdout, unknown.stdout
    inspected = await kernel.run("%fusion inspect weather")
    assert inspected.stdout.strip() == "No tool matches 'weather' (tools: math.add)."


async def test_a_body_syntax_error_is_shown_from_the_cell_line(kernel):
    """No frames of IPython, the magic, the compiler or ``ast`` before the person's own line."""
    await kernel.run("%load_ext fusion_nb")
    cell = await kernel.run("%%fusion_tool broken\nx = 1\ny = (\nreturn x", ok=False)
    shown = strip_colours("\n".join(cell.error["traceback"]))
    assert cell.error["ename"] == "SyntaxError" and shown.lstrip().startswith("Cell In["), shown
    assert "line 3" in shown and "y = (" in shown and "was never closed" in shown, shown
    for internal in ("magics.py", "cell_compiler.py", "ast.py", "interactiveshell.py"):
        assert internal not in shown, shown
    other = await kernel.run('exec("z = (")', ok=False)  # not a tool body: IPython's usual display
    assert other.error["ename"] == "SyntaxError" and "exec(" in strip_colours("\n".join(other.error["traceback"]))


def strip_colours(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


async def test_fusion_line_magic(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(
        "%%fusion_tool f.query('weather').with_string('city', 'City name')\n'''Forecast.'''\nreturn input.city"
    )
    listing = await kernel.run("%fusion list")
    assert "weather (query, sync)" in listing.stdout and "city: string - City name" in listing.stdout
    status = await kernel.run("%fusion status")
    assert "1 tool(s); 0 call(s) running" in status.stdout and "not serving" in status.stdout
    helped = await kernel.run("%fusion help")
    assert USAGE in helped.stdout and "--no-auth" in helped.stdout


async def test_fusion_help_the_ipython_way_and_unload(kernel):
    await kernel.run("%load_ext fusion_nb")
    helped = await kernel.run("%fusion?")
    pages = [p["data"]["text/plain"] for p in helped.reply["content"].get("payload", []) if p.get("source") == "page"]
    assert pages and "--no-auth" in pages[0] and USAGE in pages[0]
    await kernel.run("%unload_ext fusion_nb")
    gone = await kernel.run("%%fusion_tool x\nreturn 1", ok=False)
    assert "UsageError" in gone.stderr and "fusion_tool" in gone.stderr
    await kernel.run("%load_ext fusion_nb\n%unload_ext fusion_nb\n%load_ext fusion_nb")
    await kernel.run("%%fusion_tool again\nreturn 'back'")
    assert (await kernel.run("print(await again())")).stdout.strip() == "back"
