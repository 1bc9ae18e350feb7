"""``fusion-nb serve``: a notebook over stdio (both eras), a module over HTTP, health and SIGTERM drain."""

from __future__ import annotations

import signal
import sys

import anyio
import httpx
import pytest
from mcp import Client, MCPError, StdioServerParameters, types
from served import DATA, REPO, cli_env, run_cli, served

pytestmark = pytest.mark.anyio

MODES = {"2025": "legacy", "2026": "auto"}

# HTTP tests run the client on asyncio only: on trio, the SDK's HTTP client leaves its httpx2
# SSE generators unfinished when a server closes the stream (ResourceWarning from the SDK,
# an error under the gate's warnings-as-errors); stdio and the bridge run on both backends.
asyncio_only = pytest.mark.parametrize("anyio_backend", ["asyncio"])


@pytest.mark.parametrize("era", list(MODES))
async def test_a_notebook_over_stdio_serves_its_tools_and_only_the_client_performs_calls(era, tmp_path):
    ledger = tmp_path / "ledger"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fusion_nb", "serve", str(DATA / "destructive.ipynb")],
        env=cli_env(FUSION_NB_TEST_LEDGER=str(ledger)),
        cwd=str(REPO),
    )
    async with Client(params, mode=MODES[era]) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == {"billing.refund", "ledger.read"}
        assert listed["billing.refund"].annotations.destructive_hint is True
        before = await client.call_tool("ledger.read", {})
        refunded = await client.call_tool("billing.refund", {"id": "inv-9"})
    assert before.content[0].text == "fixture loaded\n"  # the demo cells' refunds never happened
    assert refunded.content[0].text == "refunded inv-9"
    assert ledger.read_text() == "fixture loaded\nrefund inv-9\n"


@asyncio_only
async def test_http_needs_the_token_and_health_needs_nothing():
    async with served("service_app") as server:
        health = await server.get("/healthz")
        assert (health.status_code, health.text) == (200, "ok\n")
        async with httpx.AsyncClient() as http:
            anonymous = await http.post(server.url, json={}, headers={"Accept": "application/json, text/event-stream"})
        assert anonymous.status_code == 401
        for mode in MODES.values():
            async with server.client(mode) as client:
                result = await client.call_tool("echo", {"text": "hi"})
                assert result.structured_content["text"] == "hi"
        server.signal(signal.SIGTERM)
        assert await server.wait() == 0


@asyncio_only
async def test_token_from_the_environment_and_no_auth_warning():
    async with served("service_app", env={"FUSION_NB_TOKEN": "from-env-0123456789"}) as server:
        assert not any("bearer token" in line for line in server.lines)
        async with server.client() as client:
            assert (await client.call_tool("echo", {"text": "x"})).structured_content["text"] == "x"
    async with served("service_app", "--no-auth") as server:
        assert any("WARNING: --no-auth" in line for line in server.lines)
        async with server.client() as client:
            assert (await client.call_tool("echo", {"text": "y"})).structured_content["text"] == "y"


@asyncio_only
@pytest.mark.parametrize("era", list(MODES))
async def test_sigterm_drains_then_cancels_with_cleanup_and_exits_0(era, tmp_path):
    marks = tmp_path / "marks"
    env = {"FUSION_NB_TEST_MARKS": str(marks)}
    async with served("service_app", "--drain-timeout", "3", env=env) as server:
        slow_started, short_started = anyio.Event(), anyio.Event()
        results = {}

        async def call(client, name, args, started):
            async def on_progress(value, total, message):
                started.set()

            results[name] = await client.call_tool(name, args, progress_callback=on_progress)

        async with server.client(MODES[era]) as client, anyio.create_task_group() as group:
            await client.list_tools()  # the client validates results against these: no request after SIGTERM
            group.start_soon(call, client, "slow", {"tag": "inflight"}, slow_started)
            group.start_soon(call, client, "steps", {"n": 4, "delay": 0.1}, short_started)
            with anyio.fail_after(30):
                await slow_started.wait()
                await short_started.wait()
            server.signal(signal.SIGTERM)
            await server.wait_for(r"draining \(2 call\(s\) in flight")
            for path in ("/mcp", "/healthz"):  # no new connection: a balancer retries it elsewhere, even a POST
                with pytest.raises(httpx.ConnectError):
                    await server.get(path)
        assert await server.wait() == 0
    assert results["steps"].structured_content["steps"] == 4  # finished within the drain time
    slow = results["slow"]
    assert slow.is_error and slow.content[0].text.startswith("[CANCELLED]")
    assert "cancelled before it finished: the server is shutting down (its 3 s drain ended)." in slow.content[0].text
    marked = [line.split(" ", 1)[1] for line in marks.read_text().splitlines()]  # lines are "pid text"
    assert marked == ["started inflight", "cleanup inflight"]
    assert any("cancelling 1 call(s)" in line for line in server.lines)


# Three Python processes start at once (a supervisor, two workers importing the SDK): about 4 s
# here, but a loaded 2-core CI box once took longer than the default 120 s deadline. Every wait
# below is for a line the processes print (event-driven), each bounded generously.
WORKERS_STARTUP = 240


@asyncio_only
@pytest.mark.timeout(600)
async def test_workers_share_one_port_token_and_state_key_and_stop_together():
    async with served("service_app", "--workers", "2", startup_timeout=WORKERS_STARTUP) as server:
        # "ready" is printed once a worker serves with its drain handler installed
        await server.wait_for(r"worker \d+ ready", count=2, timeout=WORKERS_STARTUP)
        ready = {line.split()[2] for line in server.lines if " ready on port " in line}
        assert len(ready) == 2

        async def unused(context, params):
            raise AssertionError("the rounds are driven by hand")

        # each round on a fresh connection, so the kernel may hand it to either worker: all open the state
        state, responses = None, None
        for key in ("first", "second", None):
            async with server.client(elicitation_callback=unused) as client:
                result = await client.session.call_tool(
                    "two.rounds", {}, input_responses=responses, request_state=state, allow_input_required=True
                )
            if key is None:
                assert result.structured_content["answers"] == ["1", "2"]
                break
            state = result.request_state
            responses = {key: types.ElicitResult(action="accept", content={key: "1" if key == "first" else "2"})}
        server.signal(signal.SIGTERM)
        assert await server.wait(timeout=120) == 0
    assert sum(" stopped" in line for line in server.lines) == 2
    assert not any("exited with status" in line for line in server.lines)


@asyncio_only
@pytest.mark.timeout(600)
async def test_workers_stopped_while_starting_exit_0():
    """SIGTERM as soon as the supervisor announces itself: whatever each worker was doing (importing,
    loading the source, serving), the command stops with status 0 and reports no failed worker."""
    async with served("service_app", "--workers", "2", startup_timeout=WORKERS_STARTUP) as server:
        server.signal(signal.SIGTERM)
        assert await server.wait(timeout=120) == 0
    assert not any("exited with status" in line for line in server.lines), server.lines


@pytest.mark.timeout(600)
def test_workers_that_cannot_start_stop_the_command_with_status_1_and_are_not_restarted():
    """A worker that dies before it was ready would die again (a broken SOURCE): no restart loop."""
    from served import run_cli

    done = run_cli("serve", "no_such_module_anywhere", "--transport", "http", "--port", "0", "--workers", "2")
    assert done.returncode == 1, done.stderr
    assert "(before it was ready); stopping the others" in done.stderr
    assert "starting a new one" not in done.stderr


@asyncio_only
async def test_a_served_notebook_shows_nothing_of_client_calls():
    """No cell runs once start-up is over: a client's call is not rendered as the last cell's output
    (it was, on the server's stdout, until the headless shell fired post_execute itself)."""
    async with served(str(REPO / "notebooks" / "01-quickstart.ipynb")) as server:
        async with server.client() as client:
            result = await client.call_tool("math.add", {"a": 40})
        assert result.structured_content == {"result": 42}
        server.signal(signal.SIGTERM)
        assert await server.wait() == 0
        assert server.process.stdout is not None
        printed = b"".join([chunk async for chunk in server.process.stdout])
        assert printed == b""


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (["--worker-name", "a.b"], "--worker-name must be 1 to 32 letters, digits, - or _, got 'a.b'."),
        (["--host", ""], "host must be an interface name or address, got ''"),
    ],
)
def test_a_bad_http_flag_is_one_sentence_before_anything_loads(flags, refusal):
    """The flags become ``HttpOptions`` (http_app's one definition), checked before the source runs."""
    done = run_cli("serve", str(DATA / "destructive.ipynb"), "--transport", "http", "--port", "0", *flags)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [f"fusion-nb: error: {refusal}"], done.stderr


#: spawn to first answer of ``fusion-nb serve NB.ipynb`` over stdio: about 0.7-1.1 s here
#: (``benchmarks/stdio.py --startup``); the bound only catches a tenfold regression
STARTUP_BOUND = 7.5


def _wire(*messages: dict) -> bytes:
    import json

    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def first_answers(tmp_path, *python_flags: str) -> tuple[list[dict], float, str]:
    """Spawn ``fusion-nb serve`` on the destructive notebook over stdio, handshake, list the tools.

    Returns the two answers, the seconds from spawn to the second, and what the process wrote
    on stderr by then (it is killed after the second answer).
    """
    import json
    import subprocess
    import time

    wire = _wire(_INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, _LIST)
    errors = tmp_path / "stderr"
    start = time.perf_counter()
    with (
        errors.open("wb") as stderr,
        subprocess.Popen(
            [sys.executable, *python_flags, "-m", "fusion_nb", "serve", str(DATA / "destructive.ipynb")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=cli_env(FUSION_NB_TEST_LEDGER=str(tmp_path / "ledger")),
            cwd=str(REPO),
        ) as process,
    ):
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(wire)
            process.stdin.flush()
            answers = [json.loads(process.stdout.readline()) for _ in range(2)]
            elapsed = time.perf_counter() - start
        finally:
            process.kill()
    return answers, elapsed, errors.read_text(errors="replace")


def test_serving_a_notebook_over_stdio_answers_its_first_request_soon_after_spawn(tmp_path):
    answers, elapsed, _ = first_answers(tmp_path)
    assert [answer["id"] for answer in answers] == [1, 2]
    assert {tool["name"] for tool in answers[1]["result"]["tools"]} == {"billing.refund", "ledger.read"}
    assert elapsed < STARTUP_BOUND, f"spawn to first answer took {elapsed:.2f} s (bound {STARTUP_BOUND} s)"


def test_serving_a_notebook_over_stdio_never_imports_the_widgets(tmp_path):
    """Headless, no widget can show: ipywidgets and the widget modules stay unimported (start-up time).

    ``-X importtime`` lists every module the real server process imported, the notebook's
    cells included (this one calls a tool while it loads); the widget modules load on first
    use (``fusion_nb/widgets/__init__.py``), and nothing on the stdio path uses them.
    """
    answers, _, imported = first_answers(tmp_path, "-X", "importtime")
    assert [answer["id"] for answer in answers] == [1, 2]
    modules = {line.rpartition("|")[2].strip() for line in imported.splitlines() if line.startswith("import time:")}
    assert "fusion_nb.mcp.pipe" in modules, imported[-2000:]  # (the listing is there: it names the stdio server)
    widgets = sorted(
        m for m in modules if m.split(".")[0] in ("ipywidgets", "comm") or m == "fusion_nb.widgets.call_view"
    )
    assert widgets == [], f"serving over stdio imported {len(widgets)} widget modules: {', '.join(widgets[:4])}..."


@pytest.mark.parametrize("closed", [0, 1, 2], ids=["stdin", "stdout", "stderr"])
def test_serve_launched_with_a_standard_descriptor_closed_exits_0(tmp_path, closed):
    """``fusion-nb serve NB <&-`` (``>&-``, ``2>&-``), as a careless launcher does: no traceback, exit 0.

    A closed stdin is empty input (nothing to answer); a closed stdout discards the
    answers; a closed stderr discards the start-up line and still answers.
    """
    import json
    import subprocess

    serve = [sys.executable, "-m", "fusion_nb", "serve", str(DATA / "destructive.ipynb")]
    done = subprocess.run(
        ["sh", "-c", f'exec "$@" {closed}>&-', "sh", *serve],  # as a launcher closes it
        input=None if closed == 0 else _wire(_INIT, _LIST),
        stdout=None if closed == 1 else subprocess.PIPE,
        stderr=None if closed == 2 else subprocess.PIPE,
        env=cli_env(FUSION_NB_TEST_LEDGER=str(tmp_path / "ledger")),
        cwd=str(REPO),
        timeout=120,
    )
    assert done.returncode == 0, done
    if closed != 2:
        assert b"Traceback" not in done.stderr, done.stderr.decode()
    if closed == 0:
        assert done.stdout == b""
    if closed == 2:
        assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [1, 2]


def test_serve_says_in_one_line_on_stderr_that_the_client_stopped_reading(tmp_path):
    """A host keeps the server's stderr as its log: the reason the server ended is in it, once."""
    import subprocess

    with subprocess.Popen(
        [sys.executable, "-m", "fusion_nb", "serve", str(DATA / "destructive.ipynb")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(FUSION_NB_TEST_LEDGER=str(tmp_path / "ledger")),
        cwd=str(REPO),
    ) as process:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        process.stdin.write(_wire(_INIT))
        process.stdin.flush()
        assert process.stdout.readline()  # the handshake's answer: the server is serving
        process.stdout.close()  # the client went away: the next answer hits a broken pipe
        process.stdin.write(_wire(_LIST))
        process.stdin.flush()
        assert process.wait(timeout=60) == 0  # stdin is still open: the server must not wait for it
        lines = process.stderr.read().decode().splitlines()
    stopped = "fusion-nb: the MCP client stopped reading; stdio server stopped"
    assert lines[-2:] == ["fusion-nb: tools: billing.refund, ledger.read", stopped], lines
    assert not [line for line in lines if "Traceback" in line], lines


#: every path an OAuth client probes for discovery (RFC 9728, RFC 8414, OpenID), and where it registers
DISCOVERY = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/openid-configuration",
)


async def _discovery_and_challenge(server) -> tuple[dict[str, int], str]:
    """What each discovery path answers, and the ``WWW-Authenticate`` of an unauthenticated POST."""
    async with httpx.AsyncClient() as http:
        statuses = {path: (await server.get(path)).status_code for path in DISCOVERY}
        registered = await http.post(server.url.removesuffix("/mcp") + "/register", json={})
        statuses["POST /register"] = registered.status_code
        anonymous = await http.post(server.url, json={}, headers={"Accept": "application/json, text/event-stream"})
    assert anonymous.status_code == 401
    return statuses, anonymous.headers["www-authenticate"]


@asyncio_only
async def test_named_tokens_from_a_file_are_separate_clients_and_static_mode_publishes_no_discovery(tmp_path):
    """Alice's sealed request state is hers: bob's token cannot resume her call. Static tokens publish no
    discovery documents (a client finding one drops its configured header and starts OAuth)."""
    tokens = tmp_path / "tokens"
    tokens.write_text("# the team's clients\nalice=alice-secret-0123456789\n\nbob=bob-secret-0123456789\n")
    tokens.chmod(0o600)
    async with served("service_app", "--tokens-file", str(tokens)) as server:
        await server.wait_for("named tokens, each its own client: alice, bob")
        assert not any("secret-0123456789" in line for line in server.lines)
        statuses, challenge = await _discovery_and_challenge(server)
        assert set(statuses.values()) == {404}, statuses
        assert challenge == 'Bearer error="invalid_token", error_description="Authentication required"'

        async def unused(context, params):
            raise AssertionError("the rounds are driven by hand")

        server.token = "alice-secret-0123456789"
        async with server.client(elicitation_callback=unused) as alice:
            first = await alice.session.call_tool("two.rounds", {}, allow_input_required=True)
        answer = {"first": types.ElicitResult(action="accept", content={"first": "1"})}
        server.token = "bob-secret-0123456789"
        async with server.client(elicitation_callback=unused) as bob:
            assert (await bob.call_tool("echo", {"text": "bob"})).structured_content["text"] == "bob"
            with pytest.raises(MCPError) as stolen:
                await bob.session.call_tool(
                    "two.rounds",
                    {},
                    input_responses=answer,
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            assert stolen.value.error.code == types.INVALID_PARAMS and "belongs to another call" in str(stolen.value)
        server.token = "alice-secret-0123456789"
        async with server.client(elicitation_callback=unused) as alice:
            second = await alice.session.call_tool(
                "two.rounds", {}, input_responses=answer, request_state=first.request_state, allow_input_required=True
            )
        assert second.request_state is not None  # alice's own state opened: her second round is asked


@asyncio_only
async def test_named_tokens_from_the_environment_reach_every_worker():
    env = {"FUSION_NB_TOKENS": "alice=alice-secret-0123456789,ci=ci-secret-0123456789"}
    async with served("service_app", "--workers", "2", env=env, startup_timeout=WORKERS_STARTUP) as server:
        await server.wait_for(r"worker \d+ ready", count=2, timeout=WORKERS_STARTUP)
        assert not any("secret-0123456789" in line for line in server.lines)
        for name in ("alice", "ci", "alice", "ci"):  # (fresh connections: the kernel spreads them over the workers)
            server.token = f"{name}-secret-0123456789"
            async with server.client() as client:
                assert (await client.call_tool("echo", {"text": name})).structured_content["text"] == name
        server.signal(signal.SIGTERM)
        assert await server.wait(timeout=120) == 0


@pytest.mark.parametrize(
    ("mode", "content", "refusal"),
    [
        (
            0o644,
            "alice=a-secret",
            "--tokens-file {path} may be read by other users (mode 644): it holds secrets, "
            "so make it owner-only (chmod 600 {path})",
        ),
        (
            0o600,
            "alice=a-secret\nbroken\n",
            "--tokens-file {path}: entry 2 is not name=token (expected alice=<token>,ci=<token>).",
        ),
        (0o600, "# nothing\n", "--tokens-file {path}: no name=token entry."),
    ],
    ids=["others-may-read", "malformed", "empty"],
)
def test_a_tokens_file_others_may_read_or_malformed_is_one_sentence(tmp_path, mode, content, refusal):
    path = tmp_path / "tokens"
    path.write_text(content)
    path.chmod(mode)
    done = run_cli("serve", "service_app", "--transport", "http", "--port", "0", "--tokens-file", str(path))
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [f"fusion-nb: error: {refusal.format(path=path)}"], done.stderr
    assert "a-secret" not in done.stderr


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (
            ["--auth-issuer", "https://as.example.com", "--token", "x" * 20],
            "--auth-issuer and --token contradict each other: pick one way to authenticate clients",
        ),
        (["--auth-audience", "https://nb.example.com/mcp"], "--auth-audience applies with --auth-issuer only"),
        (
            ["--auth-issuer", "http://as.example.com"],
            "--auth-issuer must be https (http only on loopback), got 'http://as.example.com'",
        ),
        (
            ["--auth-issuer", "https://as.example.com", "--public-url", "https://nb.example.com/x"],
            "--public-url must be an origin such as https://nb.example.com, without a path; got 'https://nb.example.com/x'",
        ),
        (
            ["--auth-issuer", "https://as.example.com", "--auth-key-refresh", "soon"],
            "--auth-key-refresh must be a number of seconds, got 'soon'",
        ),
        (
            ["--auth-issuer", "https://as.example.com", "--auth-key-refresh", "0"],
            "--auth-key-refresh must be a positive number of seconds, got 0.0",
        ),
    ],
    ids=["with-token", "audience-alone", "http-issuer", "public-url-path", "key-refresh-word", "key-refresh-zero"],
)
def test_a_bad_oauth_flag_is_one_sentence_before_anything_loads(flags, refusal):
    done = run_cli("serve", "service_app", "--transport", "http", "--port", "0", *flags)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [f"fusion-nb: error: {refusal}"], done.stderr


@asyncio_only
async def test_bad_input_to_the_oauth_server_is_one_sentence_and_one_log_line_and_it_keeps_serving():
    """A malformed header, an oversized token, a JWKS that is not JSON, an issuer that does not answer:
    each a 401 or a 503 with one sentence and one log line, and the next good token is served. A
    1 MB token meets the server's 64 KB header limit before any token check: a 431 sentence, read
    whole although the client is still sending (the server drops the rest before it closes). The issuer
    is tests/oauth_issuer.py: no real provider serves a broken JWKS."""
    from oauth_issuer import dead_url, issuing

    async def post(server, authorization: str) -> httpx.Response:
        headers = {"Accept": "application/json, text/event-stream", "Authorization": authorization}
        async with httpx.AsyncClient() as http:
            return await http.post(server.url, json={}, headers=headers)

    async with issuing() as issuer:
        flags = ["--auth-issuer", issuer.url, "--auth-key-refresh", "0.001"]
        async with served("service_app", *flags) as server:
            audience = server.url
            answers = {
                "malformed": await post(server, "Basic YWxpY2U6c2VjcmV0"),
                "20 KB": await post(server, "Bearer " + "x" * 20_000),
            }
            huge = await post(server, "Bearer " + "x" * 1_000_000)
            assert (huge.status_code, huge.text) == (431, "Request headers exceed 65536 bytes.\n")
            issuer.jwks_body = b"<html>not json</html>"
            answers["JWKS"] = await post(server, "Bearer " + issuer.token(aud=audience))
            await server.wait_for("cannot check bearer tokens: its JWKS at ")
            logged = [line for line in server.lines if not line.startswith("fusion-nb: ")]
            issuer.jwks_body = None
            server.token = issuer.token(aud=audience)
            async with server.client() as client:
                assert (await client.call_tool("echo", {"text": "still"})).structured_content["text"] == "still"
        async with served("service_app", "--auth-issuer", dead_url()) as dead:
            answers["dead issuer"] = await post(dead, "Bearer " + issuer.token(aud=audience))
            await dead.wait_for("cannot check bearer tokens: ")
            assert (await dead.get("/healthz")).status_code == 200
    descriptions = {case: answer.json()["error_description"] for case, answer in answers.items()}
    assert {case: answer.status_code for case, answer in answers.items()} == {
        "malformed": 401,
        "20 KB": 401,
        "JWKS": 503,
        "dead issuer": 503,
    }
    assert descriptions["malformed"] == "the Authorization header is not 'Bearer <token>'"
    assert descriptions["20 KB"] == "the token is 20000 bytes long, more than the 16384 accepted"
    assert descriptions["JWKS"] == f"its JWKS at {issuer.url}/jwks is not JSON"
    assert descriptions["dead issuer"].startswith("the authorization server http://127.0.0.1:")
    assert descriptions["dead issuer"].endswith(": ConnectError)")
    assert logged == [
        "bearer token refused: the Authorization header is not 'Bearer <token>'",
        "bearer token refused: the token is 20000 bytes long, more than the 16384 accepted",
        "refused a request from 127.0.0.1: Request headers exceed 65536 bytes. (431)",
        f"cannot check bearer tokens: its JWKS at {issuer.url}/jwks is not JSON",
    ], logged
    assert not [line for line in server.lines + dead.lines if "Traceback" in line]
