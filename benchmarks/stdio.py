"""MCP over stdio: fusion-nb's ``serve_stdio`` against the SDK's own stdio server, same tool, one run.

Each server is a child process speaking MCP on its stdin/stdout and serving the same
``echo`` tool (text block plus structured content ``{"result": text}`` with an output
schema, as in ``benchmarks/http.py``):

* ``fusion-nb serve_stdio``: ``fusion_nb.mcp.serve_stdio(app)`` (asyncio), and the same on trio;
* ``fusion-nb on the SDK transport``: the same fusion-nb server run by ``Server.run`` on the
  SDK's ``stdio_server`` (how ``serve_stdio`` served before issue 27);
* ``SDK lowlevel``: the SDK's bare low-level ``Server`` (its default middleware) run by
  ``Server.run`` on its ``stdio_server``: the SDK's own stdio server.

Two drivers:

* a raw pipe load generator: this process, blocking ``os.write``/``os.read`` on the
  pipes and ``json`` (no event loop), so the client's own cost stays small next to the
  servers'; both eras (2025-11-25 after ``initialize``, 2026-07-28 with the envelope in
  every request);
* the official Python client (``mcp.Client`` over ``StdioServerParameters``, 2025 era):
  what a Python host sees, client cost included.

Measured per driver, interleaved per round in rotating order so machine noise hits all
alike: sequential calls (p50, p99) and calls/s with 32 requests in flight. Read the
ratios (``vs SDK``: p50 / the SDK's p50, calls/s / the SDK's calls/s). Above the
tables, the seed framework's own figures as the anchor (MCP Fusion on Node, driven by
the TypeScript SDK client over stdio; not run here).

A third driver, optional (``--ts-rounds``; skipped with one line without Node or the pinned
modules): the TypeScript SDK client (``@modelcontextprotocol/sdk`` from
``tests/interop/node_modules``, ``benchmarks/stdio_ts_client.mjs``), the way the seed's figures
were taken, so fusion-nb's row reads against the seed's quoted row (``vs seed``; figures from
another machine), and against the TypeScript SDK's own stdio server (``McpServer`` on Node,
``benchmarks/stdio_ts_server.mjs``: what the seed is built on), measured in the same run.
That table also has fusion-nb serving the echo tool the way the seed's answers it (one text
block, no output schema, no structured content: less for the client to validate), the row to
read against the seed's.

The seed itself, optional (``--seed-dir DIR`` or ``FUSION_NB_SEED_DIR``; without it nothing
changes): MCP Fusion 3.1.31 built from source serves the echo tool
(``benchmarks/stdio_seed_server.mjs``, which says what its answer lacks: no structured
content) as one more row of the TypeScript client's table, whose ratios then read against
it (``vs seed``, measured in the same run), and of the raw pipe table for 2025-11-25 (MCP
Fusion's SDK predates 2026-07-28). It is not on npm; build it outside this repo, from a
clone or mirror of vinkius-labs/mcp-fusion (renamed later; v3.1.31 is commit 6f828ee):
``git -C MIRROR archive 6f828ee | tar -x -C DIR``, then in ``DIR/packages/core``
``npm install --workspaces=false --save-dev @modelcontextprotocol/sdk@1.27.1 zod@3.25.76
typescript@5.9.3 @types/node@25.3.0 fast-json-stringify@6.3.0 esbuild@0.24.2`` (its lockfile's
versions of what the workspace root would provide, without the docs toolchain) and
``npm run build``. Its repository holds neither a benchmark nor the seed's figures above
(``docs/performance.md`` lists optimisations, no numbers): they come from a side-by-side
run like this one.

``--startup N``: spawn to first answer of ``fusion-nb serve NOTEBOOK`` over stdio (median of
N; the process is spawned, handshakes and lists its tools), interleaved with the floor under it,
a Python that only imports the SDK (``import mcp`` runs the SDK's ``__init__``, which imports
its client, its HTTP stack and both eras' pydantic models, none of which fusion-nb can defer),
and, with the seed built, MCP Fusion's own start-up the same way. The table ends with
fusion-nb's own share: the serve row minus the SDK's import.

Run: ``.venv/bin/python benchmarks/stdio.py [--calls N] [--rounds N] [--in-flight N] [--startup N]
[--ts-rounds N] [--seed-dir DIR]``.
"""

from __future__ import annotations

import os
import sys

# This file's folder holds mcp.py: when run as a script it would shadow the SDK package.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse
import compileall
import json
import select
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
LEGACY, MODERN = "2025-11-25", "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
INPUT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
BASELINE = "SDK lowlevel"
#: name -> (serve target, backend)
SERVERS = {
    "fusion-nb serve_stdio": ("fusion", "asyncio"),
    "fusion-nb serve_stdio, trio": ("fusion", "trio"),
    "fusion-nb on the SDK transport": ("fusion-sdk-transport", "asyncio"),
    BASELINE: ("sdk", "asyncio"),
}
#: fusion-nb answering as the seed's echo does (the text block alone: no output schema, no structured content)
TEXT_ECHO = "fusion-nb serve_stdio, text only (the seed's answer)"
#: the seed framework's figures (MCP Fusion 3.1.31 on Node, TS SDK client over stdio): (p50 ms, calls/s at 32)
ANCHORS = {
    "MCP Fusion (seed, SPEC section 14)": (0.073, 17_225),
    "MCP Fusion (seed, issue 27)": (0.076, 12_996),
}


class EchoOut(BaseModel):
    result: str


# ---- the servers (each runs in a child process: ``benchmarks/stdio.py --serve NAME``) ----


def fusion_app() -> Any:
    from fusion_nb import Fusion

    app = Fusion("bench-fusion")

    @app.f.query("echo").with_string("text").returns(EchoOut).handle
    async def echo(input: Any, ctx: Any) -> EchoOut:
        return EchoOut(result=input.text)

    return app


def fusion_text_app() -> Any:
    """The echo tool answering as MCP Fusion's does: one text block ``{"result": ...}``, nothing structured."""
    from fusion_nb import Fusion

    app = Fusion("bench-fusion-text")

    @app.f.query("echo").with_string("text").handle
    async def echo(input: Any, ctx: Any) -> str:
        return json.dumps({"result": input.text})

    return app


def sdk_server() -> Any:
    import mcp_types as types
    from mcp.server.lowlevel.server import Server

    tool = types.Tool(name="echo", input_schema=INPUT_SCHEMA, output_schema=EchoOut.model_json_schema())

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        data = {"result": params.arguments["text"]}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(data))], structured_content=data)

    return Server("bench-bare", on_list_tools=list_tools, on_call_tool=call_tool)


class UnicodeSafeWriter:
    """The write stream ``serve_stdio`` wrapped the SDK's ``stdio_server`` in before issue 27 (and ``fusion-nb
    connect`` until it moved onto the pipe too): a lone surrogate replaced (U+FFFD) where a message cannot be
    written as UTF-8, checked by one more ``model_dump_json`` per message. Kept here so the row on the SDK's
    transport costs what that path cost."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    async def send(self, item: Any) -> None:
        try:
            item.message.model_dump_json(by_alias=True, exclude_unset=True)
        except ValueError:
            from fusion_nb.mcp.pipe import without_surrogates

            data = without_surrogates(item.message.model_dump(by_alias=True, exclude_unset=True))
            item = type(item)(type(item.message).model_validate(data), metadata=getattr(item, "metadata", None))
        await self.stream.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    async def __aenter__(self) -> UnicodeSafeWriter:  # (the SDK's dispatcher enters it; dunders skip __getattr__)
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self.stream.__aexit__(*exc_info)


async def on_sdk_transport(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, UnicodeSafeWriter(write_stream), server.create_initialization_options())


def serve(target: str, backend: str) -> None:
    import anyio

    if target in ("fusion", "fusion-text"):
        from fusion_nb.mcp import serve_stdio

        anyio.run(serve_stdio, fusion_app() if target == "fusion" else fusion_text_app(), backend=backend)
    elif target == "fusion-sdk-transport":
        from fusion_nb.mcp import mcp_server

        anyio.run(on_sdk_transport, mcp_server(fusion_app()), backend=backend)
    else:
        anyio.run(on_sdk_transport, sdk_server(), backend=backend)


def child_argv(name: str) -> list[str]:
    target, backend = ("fusion-text", "asyncio") if name == TEXT_ECHO else SERVERS[name]
    return [sys.executable, "-u", str(HERE), "--serve", target, "--backend", backend]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


# ---- the raw pipe load generator ----


class RawPipe:
    """One server process driven with blocking syscalls on its pipes (no event loop on this side)."""

    def __init__(self, argv: list[str], era: str) -> None:
        self.era = era
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env()
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.inp = self.process.stdin.fileno()
        self.out = self.process.stdout.fileno()
        self.buffer = b""
        self.next_id = 0
        meta = f',"_meta":{json.dumps(ENVELOPE)}' if era == MODERN else ""
        self.template = (
            '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}'
            + meta
            + "}}\n"
        )
        if era == LEGACY:
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}},
            }
            os.write(self.inp, json.dumps(init).encode() + b"\n")
            self.lines(1)
            os.write(self.inp, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def request(self) -> bytes:
        self.next_id += 1
        return (self.template % self.next_id).encode()

    def lines(self, wanted: int) -> int:
        """Read until at least ``wanted`` whole lines arrived; how many did."""
        count = self.buffer.count(b"\n")
        while count < wanted:
            if not select.select([self.out], [], [], 30)[0]:  # (a child that failed but lives on holds stdout open)
                raise TimeoutError("the server answered nothing for 30 s")
            chunk = os.read(self.out, 1 << 16)
            if not chunk:
                raise EOFError("the server closed stdout")
            self.buffer += chunk
            count = self.buffer.count(b"\n")
        self.buffer = self.buffer.rpartition(b"\n")[2]
        return count

    def sequential(self, calls: int) -> list[float]:
        times = []
        for _ in range(calls):
            line = self.request()
            start = time.perf_counter()
            os.write(self.inp, line)
            self.lines(1)
            times.append(time.perf_counter() - start)
        return times

    def in_flight(self, depth: int, calls: int) -> float:
        """calls/s with ``depth`` requests always in flight."""
        start = time.perf_counter()
        os.write(self.inp, b"".join(self.request() for _ in range(depth)))
        sent, answered = depth, 0
        while answered < calls:
            got = self.lines(1)
            answered += got
            more = min(got, calls - sent)
            if more > 0:
                os.write(self.inp, b"".join(self.request() for _ in range(more)))
                sent += more
        return calls / (time.perf_counter() - start)

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


# ---- the official Python client ----


async def client_figures(name: str, calls: int, depth: int, per_task: int) -> tuple[list[float], float]:
    import anyio
    from mcp import Client, StdioServerParameters

    argv = child_argv(name)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env())
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        for _ in range(50):
            await client.call_tool("echo", {"text": "hi"})
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            await client.call_tool("echo", {"text": "hi"})
            times.append(time.perf_counter() - start)

        async def worker() -> None:
            for _ in range(per_task):
                await client.call_tool("echo", {"text": "hi"})

        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(depth):
                group.start_soon(worker)
        rate = depth * per_task / (time.perf_counter() - start)
    return times, rate


# ---- the TypeScript SDK client ----

NODE_MODULES = REPO / "tests" / "interop" / "node_modules"
TS_CLIENT = HERE.parent / "stdio_ts_client.mjs"
#: the TypeScript SDK's own stdio server (``McpServer``, Node), the seed's foundation: measured in this run
TS_SERVER = "TypeScript SDK McpServer (Node)"
#: the seed's figures the TypeScript client's table reads against (issue 27's side-by-side run)
SEED = "MCP Fusion (seed, issue 27)"
#: the seed itself, built from source (``--seed-dir``): measured in this run when given
SEED_SERVER = "MCP Fusion 3.1.31 (seed, Node)"
SEED_SERVER_SCRIPT = HERE.parent / "stdio_seed_server.mjs"


def ts_client_missing() -> str | None:
    """Why the TypeScript client cannot run here, or ``None``."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_MODULES / "@modelcontextprotocol" / "sdk").is_dir():
        return f"the pinned @modelcontextprotocol/sdk is not in {NODE_MODULES} (npm ci there)"
    return None


def seed_missing(seed_dir: Path) -> str | None:
    """Why the seed built in ``seed_dir`` cannot run here, or ``None``."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (seed_dir / "packages" / "core" / "dist" / "index.js").is_file():
        return f"no built MCP Fusion in {seed_dir} (packages/core/dist/index.js; see this file's docstring)"
    return None


def server_argv(name: str, seed_dir: Path | None = None) -> list[str]:
    """The command that starts the server called ``name``: one of ``SERVERS``, ``TS_SERVER`` or ``SEED_SERVER``."""
    if name == TS_SERVER:
        return ["node", str(HERE.parent / "stdio_ts_server.mjs"), str(NODE_MODULES)]
    if name == SEED_SERVER:
        assert seed_dir is not None
        return ["node", str(SEED_SERVER_SCRIPT), str(seed_dir)]
    return child_argv(name)


def ts_client_figures(
    name: str, calls: int, depth: int, total: int, seed_dir: Path | None = None
) -> tuple[list[float], float]:
    """Sequential latencies and calls/s at ``depth`` in flight, the TypeScript client driving ``name``."""
    server = server_argv(name, seed_dir)
    command = ["node", str(TS_CLIENT), str(NODE_MODULES), str(calls), str(depth), str(total), *server]
    done = subprocess.run(command, capture_output=True, env=child_env(), timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the TypeScript client against {name} failed: {done.stderr.decode()[-500:]}")
    figures = json.loads(done.stdout)
    return figures["times"], figures["rate"]


# ---- start-up ----


#: what every start-up answering through the SDK pays first: ``import mcp`` (its ``__init__``
#: imports the client, the HTTP server stack and both eras' pydantic models)
SDK_IMPORT = "importing the SDK alone (python -c 'import mcp.server.lowlevel')"


def startup_wire() -> bytes:
    """``initialize``, ``initialized`` and ``tools/list``, as a desktop host sends them on spawn."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}},
    }
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    return b"".join(
        json.dumps(m).encode() + b"\n" for m in (init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call)
    )


def spawn_to_answer(command: list[str], wire: bytes) -> float:
    """Seconds from spawning ``command`` to the answer of the second request in ``wire``."""
    start = time.perf_counter()
    with subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
        cwd=str(REPO),
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(wire)
        process.stdin.flush()
        answered = 0
        while answered < 2:
            line = process.stdout.readline()
            if not line:
                raise EOFError(f"{command[0]} exited before answering")
            answered += '"id":' in line.decode() and '"method"' not in line.decode()
        seconds = time.perf_counter() - start
        process.stdin.close()
        process.wait(30)
    return seconds


def spawn_to_exit(command: list[str]) -> float:
    """Seconds from spawning ``command`` to its exit (``SDK_IMPORT``: the floor under fusion-nb's start-up)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, env=child_env(), cwd=str(REPO))
    return time.perf_counter() - start


def startup(notebook: Path, times: int, seed_dir: Path | None = None) -> dict[str, list[float]]:
    """Start-up seconds per row, interleaved: ``fusion-nb serve NOTEBOOK`` spawn to the answer of
    its first ``tools/list``, the SDK's import alone (spawn to exit), and the seed (when built).

    fusion-nb's bytecode is compiled first, as installing a package compiles it (the SDK's
    was, by pip): a checkout never run, or run with ``PYTHONDONTWRITEBYTECODE`` set, would
    otherwise compile every module of fusion-nb's on every start, which no installed copy does.
    """
    compileall.compile_dir(str(REPO / "fusion_nb"), quiet=1)
    wire = startup_wire()
    rows: dict[str, Any] = {
        f"fusion-nb serve {os.path.relpath(notebook, REPO)}": lambda: spawn_to_answer(
            [sys.executable, "-m", "fusion_nb", "serve", str(notebook)], wire
        ),
        SDK_IMPORT: lambda: spawn_to_exit([sys.executable, "-c", "import mcp.server.lowlevel"]),
    }
    if seed_dir is not None:
        rows[SEED_SERVER] = lambda: spawn_to_answer(server_argv(SEED_SERVER, seed_dir), wire)
    seconds: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(times):
        for name, measure in rows.items():
            seconds[name].append(measure())
    return seconds


def startup_table(seconds: dict[str, list[float]]) -> str:
    """One row per start-up measured; the serve row's own share is what it adds to the SDK's import."""
    serve = next(iter(seconds))
    lines = [
        f"### Start-up over stdio, spawn to first answer ({len(seconds[serve])} runs each, interleaved)",
        "",
        "| process | median s | min s |",
        "|---|---:|---:|",
    ]
    for name, runs in seconds.items():
        lines.append(f"| {name} | {statistics.median(runs):.3f} | {min(runs):.3f} |")
    # each run of serve against the import run next to it (the machine's drift cancels), and the
    # fastest of each (the least disturbed): a share this small is within the noise of either alone
    paired = statistics.median(a - b for a, b in zip(seconds[serve], seconds[SDK_IMPORT], strict=True))
    fastest = min(seconds[serve]) - min(seconds[SDK_IMPORT])
    lines += [
        "",
        f"fusion-nb's own share (serve minus the SDK's import): {paired:.3f} s, the median of the paired runs; "
        f"{fastest:.3f} s, fastest minus fastest",
    ]
    return "\n".join(lines)


# ---- the run ----


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def table(
    title: str,
    latencies: dict[str, list[float]],
    rates: dict[str, list[float]],
    depth: int,
    versus: str = "SDK",
    anchor: tuple[str, float, float] | None = None,
    baseline: str = BASELINE,
) -> str:
    """p50, p99 and calls/s per server, with ratios to ``baseline``'s row (or to ``anchor``: name, p50 s, calls/s)."""
    lines = [
        f"### {title}",
        "",
        f"| server | p50 µs | p99 µs | p50 vs {versus} | calls/s, {depth} in flight | calls/s vs {versus} |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    if anchor is None:
        base_p50, base_rate = statistics.median(latencies[baseline]), statistics.median(rates[baseline])
    else:
        label, base_p50, base_rate = anchor
        lines.append(f"| {label} | {base_p50 * 1e6:,.0f} | | 1.00x | {base_rate:,.0f} | 1.00x |")
    for name in latencies:
        p50, p99 = statistics.median(latencies[name]), quantile(latencies[name], 0.99)
        rate = statistics.median(rates[name])
        lines.append(
            f"| {name} | {p50 * 1e6:,.0f} | {p99 * 1e6:,.0f} | {p50 / base_p50:.2f}x"
            f" | {rate:,.0f} | {rate / base_rate:.2f}x |"
        )
    return "\n".join(lines)


def paired_by_round(round_p50s: dict[str, list[float]], baseline: str) -> str:
    """Each row's p50 over ``baseline``'s, round by round: the median ratio, its range, the rounds at or below.

    A round runs every server back to back, so what the machine is doing then weighs on
    all of them alike: the ratio within a round is steadier than the pooled p50s, and
    counting the rounds says how often a row really is at or below the baseline.
    """
    base = round_p50s[baseline]
    lines = [f"p50 paired by round against {baseline} ({len(base)} rounds): median ratio [range], rounds at or below"]
    lines.append("")
    for name, p50s in round_p50s.items():
        if name == baseline:
            continue
        ratios = [mine / theirs for mine, theirs in zip(p50s, base, strict=True)]
        at_or_below = sum(ratio <= 1.0 for ratio in ratios)
        lines.append(
            f"- {name}: {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}],"
            f" {at_or_below} of {len(ratios)}"
        )
    return "\n".join(lines)


def seed_option(args: argparse.Namespace) -> Path | None:
    """The seed's folder to measure (``--seed-dir``, else ``FUSION_NB_SEED_DIR``), ``None`` without one or
    when it cannot run (then one line says why)."""
    given = args.seed_dir or os.environ.get("FUSION_NB_SEED_DIR")
    if not given:
        return None
    seed_dir = Path(given).expanduser().resolve()
    missing = seed_missing(seed_dir)
    if missing is not None:
        print(f"### MCP Fusion (seed): skipped ({missing})\n")
        return None
    return seed_dir


def main(args: argparse.Namespace) -> None:
    import anyio

    seed_dir = seed_option(args)
    print("### Anchor: the seed framework's quoted figures (from another machine)\n")
    print("| framework | echo p50 ms | calls/s, 32 in flight |\n|---|---:|---:|")
    for label, (p50, anchor_rate) in ANCHORS.items():
        print(f"| {label} | {p50:.3f} | {anchor_rate:,} |")
    print()
    names = list(SERVERS)
    for era in (LEGACY, MODERN) if args.rounds else ():
        # MCP Fusion's SDK (1.27) predates 2026-07-28: the seed is driven in the 2025 era only
        era_names = [*names, SEED_SERVER] if seed_dir is not None and era == LEGACY else names
        latencies: dict[str, list[float]] = {name: [] for name in era_names}
        rates: dict[str, list[float]] = {name: [] for name in era_names}
        pipes = {name: RawPipe(server_argv(name, seed_dir), era) for name in era_names}
        try:
            for pipe in pipes.values():
                pipe.sequential(args.warmup)
            for round_ in range(args.rounds):
                order = era_names[round_ % len(era_names) :] + era_names[: round_ % len(era_names)]
                for name in order:
                    latencies[name] += pipes[name].sequential(args.calls)
                for name in order:
                    rates[name].append(pipes[name].in_flight(args.in_flight, args.in_flight_calls))
        finally:
            for pipe in pipes.values():
                pipe.close()
        print(table(f"raw pipe load generator, {era}", latencies, rates, args.in_flight))
        print()
    if args.client_rounds:
        latencies = {name: [] for name in names}
        rates = {name: [] for name in names}
        for round_ in range(args.client_rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                times, rate = anyio.run(client_figures, name, args.calls, args.in_flight, args.client_per_task)
                latencies[name] += times
                rates[name].append(rate)
        print(table("official Python client (mcp.Client, 2025-11-25)", latencies, rates, args.in_flight))
        print()
    if args.ts_rounds:
        missing = ts_client_missing()
        if missing is not None:
            print(f"### TypeScript SDK client: skipped ({missing})\n")
        else:
            ts_names = [*names, TEXT_ECHO, TS_SERVER, *([SEED_SERVER] if seed_dir is not None else [])]
            latencies = {name: [] for name in ts_names}
            rates = {name: [] for name in ts_names}
            round_p50s: dict[str, list[float]] = {name: [] for name in ts_names}
            for round_ in range(args.ts_rounds):
                for name in ts_names[round_ % len(ts_names) :] + ts_names[: round_ % len(ts_names)]:
                    times, rate = ts_client_figures(name, args.calls, args.in_flight, args.in_flight_calls, seed_dir)
                    latencies[name] += times
                    rates[name].append(rate)
                    round_p50s[name].append(statistics.median(times))
            title = "TypeScript SDK client (@modelcontextprotocol/sdk, 2025-11-25)"
            if seed_dir is not None:
                here = f"{title}, against the seed run here"
                print(table(here, latencies, rates, args.in_flight, "seed", baseline=SEED_SERVER))
                print()
                print(paired_by_round(round_p50s, SEED_SERVER))
            else:
                seed = (f"{SEED}, quoted (not run here)", ANCHORS[SEED][0] / 1e3, ANCHORS[SEED][1])
                print(table(f"{title}, against the seed's figures", latencies, rates, args.in_flight, "seed", seed))
            print()
    if args.startup:
        print(startup_table(startup(REPO / args.notebook, args.startup, seed_dir)))


def arguments() -> argparse.ArgumentParser:
    """The command line (a function, so a test parses it as the script does)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per server per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the raw pipe load generator (0: none)")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--in-flight-calls", type=int, default=5000, help="calls per in-flight measurement")
    parser.add_argument("--client-rounds", type=int, default=1, help="rounds with the official client (0: none)")
    parser.add_argument("--client-per-task", type=int, default=40)
    parser.add_argument("--ts-rounds", type=int, default=1, help="rounds with the TypeScript SDK client (0: none)")
    parser.add_argument("--startup", type=int, default=5, help="start-up runs of fusion-nb serve (0: none)")
    parser.add_argument("--notebook", default="notebooks/01-quickstart.ipynb")
    parser.add_argument(
        "--seed-dir",
        help="MCP Fusion 3.1.31 built from source (default: $FUSION_NB_SEED_DIR; none: the seed is not run)",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="asyncio", help=argparse.SUPPRESS)
    return parser


if __name__ == "__main__":
    args = arguments().parse_args()
    if args.serve:
        serve(args.serve, args.backend)
    else:
        main(args)
