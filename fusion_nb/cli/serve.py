"""``fusion-nb serve SOURCE``: a notebook, module or file served over stdio or Streamable HTTP.

stdio is the default (what desktop hosts launch). HTTP binds loopback unless told
otherwise, requires a bearer token (``--token``, ``FUSION_NB_TOKEN`` or a generated
one printed on stderr; or named tokens, each its own client, from ``--tokens-file`` or
``FUSION_NB_TOKENS``) and serves ``/healthz``. ``--workers N`` starts N processes
on one listening socket sharing the token and the request-state key, and restarts
one that dies (``_Workers``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..mcp.client_config import TOKEN_ENV, http_configs, mcp_url, new_token, restart_note
from ..mcp.options import PAGE_SIZE, TASK_PAGE_SIZE, parse_tokens
from .errors import CliError
from .keys import STATE_KEY_ENV, resolve_state_key
from .service import log_to_stderr
from .source import load_source

if TYPE_CHECKING:
    from ..mcp.options import HttpOptions

WORKER_FD_ENV = "FUSION_NB_WORKER_FD"
TASK_STORE_ENV = "FUSION_NB_TASK_STORE"
TASK_LEASE_ENV = "FUSION_NB_TASK_LEASE"
READY_FD_ENV = "FUSION_NB_READY_FD"
TOKENS_ENV = "FUSION_NB_TOKENS"
#: each OAuth flag's environment variable (the client secret has no flag: argv is visible to ps)
OAUTH_ENV = {
    "auth_issuer": "FUSION_NB_AUTH_ISSUER",
    "auth_audience": "FUSION_NB_AUTH_AUDIENCE",
    "auth_scopes": "FUSION_NB_AUTH_SCOPES",
    "auth_client_id": "FUSION_NB_AUTH_CLIENT_ID",
    "auth_key_refresh": "FUSION_NB_AUTH_KEY_REFRESH",
    "public_url": "FUSION_NB_PUBLIC_URL",
}
CLIENT_SECRET_ENV = "FUSION_NB_AUTH_CLIENT_SECRET"

HELP = "serve a notebook's tools over MCP (stdio or Streamable HTTP)"

DESCRIPTION = """\
Serve the tools of SOURCE over MCP.

SOURCE is a notebook (x.ipynb), a Python file (x.py) or a module (package.module),
optionally followed by :NAME to pick the app (default: the one app it defines).

A notebook's code cells run in order in a headless IPython shell with the fusion-nb
extension loaded. Start-up is safe by default: a cell that calls a tool stops at that
call (nothing is performed) and is skipped; %fusion magics do nothing; tag a cell
fusion:skip to leave it out or fusion:run to run it with real calls. A cell that raises
stops start-up with a message naming it.
"""

EPILOG = """\
examples:
  fusion-nb serve notebooks/01-quickstart.ipynb
  fusion-nb serve tools.py --transport http --port 8000
  FUSION_NB_TOKEN=secret fusion-nb serve mypkg.tools:app --transport http --host 0.0.0.0 --allow-host api.example.com
  fusion-nb serve tools.py --transport http --port 8000 --workers 2 --state-key-file /run/fusion-nb/state.key

environment:
  FUSION_NB_TOKEN       bearer token clients must send (HTTP)
  FUSION_NB_TOKENS      named tokens, each its own client: alice=<token>,ci=<token> (--tokens-file)
  FUSION_NB_AUTH_ISSUER, FUSION_NB_AUTH_AUDIENCE, FUSION_NB_AUTH_SCOPES, FUSION_NB_AUTH_CLIENT_ID,
  FUSION_NB_AUTH_KEY_REFRESH, FUSION_NB_PUBLIC_URL  the OAuth flags of the same names
  FUSION_NB_AUTH_CLIENT_SECRET  the introspection client's secret (with --auth-client-id)
  FUSION_NB_STATE_KEY   key (>= 32 characters) sealing 2026-era request state; share it between workers
  FUSION_NB_TASK_STORE  redis://HOST:PORT/DB shared by the workers for tasks (--task-store)
  FUSION_NB_TASK_LEASE  seconds a dead worker's tasks stay working before they fail (--task-lease)
"""


def add_parser(commands: Any) -> None:
    """Register ``serve`` and its options."""
    parser = commands.add_parser(
        "serve",
        help=HELP,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", metavar="SOURCE", help="x.ipynb, x.py or package.module, with optional :NAME")
    parser.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or http (endpoint /mcp)"
    )
    http = parser.add_argument_group("http options")
    http.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1, loopback only)")
    http.add_argument("--port", type=int, default=8000, help="port to bind (default: 8000; 0 picks a free one)")
    http.add_argument("--token", help=f"bearer token clients must send (default: ${TOKEN_ENV}, else generated)")
    http.add_argument(
        "--tokens-file",
        type=Path,
        metavar="PATH",
        help=f"named tokens, one name=token a line, each its own client; owner-only readable (or ${TOKENS_ENV})",
    )
    http.add_argument("--no-auth", action="store_true", help="serve without a bearer token (development only)")
    oauth = parser.add_argument_group(
        "OAuth resource server (http): accept an outside authorization server's tokens instead of bearer tokens"
    )
    oauth.add_argument("--auth-issuer", metavar="URL", help="the issuer whose access tokens are accepted (https)")
    oauth.add_argument(
        "--auth-audience", metavar="URL", help="the audience tokens must name (default: the public URL + /mcp)"
    )
    oauth.add_argument("--auth-scopes", metavar="A,B", help="scopes every call needs (a tool may add its own)")
    oauth.add_argument(
        "--auth-client-id",
        metavar="ID",
        help=f"client this server introspects opaque tokens as (its secret: ${CLIENT_SECRET_ENV})",
    )
    oauth.add_argument(
        "--auth-key-refresh",
        metavar="SECONDS",
        help="re-read the issuer's keys for an unknown key id at most this often (default: 30)",
    )
    oauth.add_argument(
        "--public-url",
        metavar="URL",
        help="the origin clients reach this server at, named in every document (behind a proxy: https://...)",
    )
    http.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="extra Host header to accept (DNS-rebinding check), e.g. api.example.com:*; repeatable",
    )
    http.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes on one socket (default 1)")
    http.add_argument(
        "--worker-name",
        metavar="NAME",
        help="begin this worker's 2025 session ids with NAME. (behind nginx: deploy/nginx routes a session by it)",
    )
    http.add_argument(
        "--state-key-file",
        type=Path,
        metavar="PATH",
        help=f"file holding the request-state key (created when missing); default ${STATE_KEY_ENV}",
    )
    http.add_argument(
        "--drain-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="on SIGTERM, how long calls in flight may finish before they are cancelled (default 10)",
    )
    http.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a connection's next request headers must arrive within this; else 408 and closed (default 10)",
    )
    http.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help="open connections per worker; once all are open a new one evicts a silent one, else gets 503 "
        "(default: the descriptor limit less 128)",
    )
    http.add_argument(
        "--connections-per-address",
        type=int,
        default=None,
        metavar="N",
        help="what one client address keeps once --max-connections are open: more from it get 503 (default: half)",
    )
    parser.add_argument(
        "--answer-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long a question to the client (a 2025 elicitation) waits for its answer, on stdio and HTTP; "
        "then the call fails in one sentence (default 600)",
    )
    parser.add_argument(
        "--page-size",
        type=int,
        metavar="N",
        help=f"items per page of tools/list, resources/list, prompts/list and tasks/list; a longer list is paged "
        f"with nextCursor (default: {PAGE_SIZE} tools, resources or prompts, for clients that never ask for more; "
        f"{TASK_PAGE_SIZE} tasks)",
    )
    parser.add_argument(
        "--job-tools",
        action="store_true",
        help="add jobs.wait and jobs.cancel: a task tool called by a client without MCP tasks answers with a job id "
        "(for hosts with hard timeouts: Claude Desktop, claude.ai)",
    )
    tasks = parser.add_argument_group("tasks across workers")
    tasks.add_argument(
        "--task-store",
        metavar="URL",
        help=f"redis://HOST:PORT/DB: share tasks with every worker using this Redis (default: ${TASK_STORE_ENV}, "
        "else in this process's memory)",
    )
    tasks.add_argument(
        "--task-lease",
        type=float,
        metavar="SECONDS",
        help=f"a dead worker's tasks fail this long after it stops renewing (default: ${TASK_LEASE_ENV}, else 15)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="copy the notebook's cell output to stderr")
    parser.set_defaults(run=run)


def _task_options(args: argparse.Namespace) -> None:
    """``--task-store`` / ``--task-lease`` or their environment variables, checked; the store reached once."""
    args.task_store = args.task_store or os.environ.get(TASK_STORE_ENV) or None
    if args.task_lease is None and os.environ.get(TASK_LEASE_ENV):
        given = os.environ[TASK_LEASE_ENV]
        try:
            args.task_lease = float(given)
        except ValueError:
            raise CliError(f"${TASK_LEASE_ENV} must be a number of seconds, got {given[:40]!r}") from None
    if args.task_lease is not None and not (args.task_lease > 0 and args.task_lease < float("inf")):
        raise CliError("--task-lease must be a positive number of seconds")
    if args.task_lease is not None and args.task_store is None:
        raise CliError(f"--task-lease applies with --task-store (or ${TASK_STORE_ENV}) only")
    if args.task_store is not None and WORKER_FD_ENV not in os.environ:  # (a worker's master checked it)
        _check_task_store(args.task_store)


def run(args: argparse.Namespace) -> int:
    """Validate the options, then serve until the client leaves (stdio) or a signal drains (HTTP)."""
    if args.workers < 1:
        raise CliError("--workers must be 1 or more")
    if not args.header_timeout > 0:
        raise CliError("--header-timeout must be a positive number of seconds")
    if args.max_connections is not None and args.max_connections < 1:
        raise CliError("--max-connections must be 1 or more")
    if not 0 < args.answer_timeout < float("inf"):
        raise CliError("--answer-timeout must be a positive number of seconds")
    if args.connections_per_address is not None and args.connections_per_address < 1:
        raise CliError("--connections-per-address must be 1 or more")
    if args.page_size is not None and args.page_size < 1:
        raise CliError("--page-size must be 1 or more")
    _task_options(args)
    if args.transport == "stdio":
        http_only = (("--workers", args.workers != 1), ("--no-auth", args.no_auth), ("--token", args.token))
        for flag, given in (*http_only, ("--tokens-file", args.tokens_file)):
            if given:
                raise CliError(f"{flag} applies to --transport http only")
        return asyncio.run(_serve_stdio(args))
    for name, variable in OAUTH_ENV.items():
        if getattr(args, name) is None and os.environ.get(variable):
            setattr(args, name, os.environ[variable])
    if args.auth_issuer is not None:
        for flag, given in (("--token", args.token), ("--tokens-file", args.tokens_file), ("--no-auth", args.no_auth)):
            if given:
                raise CliError(f"--auth-issuer and {flag} contradict each other: pick one way to authenticate clients")
    else:
        for name in OAUTH_ENV:
            if name != "public_url" and getattr(args, name) is not None:
                raise CliError(f"--{name.replace('_', '-')} applies with --auth-issuer only")
    args.tokens = _named_tokens(args) if args.auth_issuer is None else None
    oauth = args.auth_issuer is not None
    token = None if args.no_auth or args.tokens or oauth else (args.token or os.environ.get(TOKEN_ENV) or None)
    _http_options(args, token, key=None)  # a bad flag stops here, before any source is loaded or worker started
    if args.no_auth:
        log_to_stderr("WARNING: --no-auth: any program that can reach this port may call every tool")
    if args.workers > 1 and WORKER_FD_ENV not in os.environ:
        return _supervise(args, token or (None if args.tokens or oauth else new_token()))
    return asyncio.run(_serve_http(args, token))


def _named_tokens(args: argparse.Namespace) -> dict[str, str] | None:
    """``--tokens-file`` (owner-only readable) or ``$FUSION_NB_TOKENS``: named tokens, each its own client.

    The file holds secrets, so one that others may read is refused (as ssh refuses a
    private key): a token leaked to another account would let it act as that client.
    """
    given = [flag for flag, on in (("--token", args.token), ("--tokens-file", args.tokens_file)) if on]
    if args.no_auth and given:
        raise CliError(f"--no-auth and {given[0]} contradict each other: pick one")
    if len(given) > 1:
        raise CliError("--token and --tokens-file contradict each other: pick one")
    if args.no_auth or args.token:
        return None
    if args.tokens_file is None:
        raw = os.environ.get(TOKENS_ENV, "").strip()
        if raw and os.environ.get(TOKEN_ENV):
            raise CliError(f"${TOKEN_ENV} and ${TOKENS_ENV} are both set: unset one")
        try:
            return parse_tokens(raw, f"${TOKENS_ENV}") if raw else None
        except ValueError as refused:
            raise CliError(str(refused)) from None
    path = args.tokens_file
    try:
        mode = path.stat().st_mode
        if mode & 0o077:
            raise CliError(
                f"--tokens-file {path} may be read by other users (mode {mode & 0o777:o}): "
                f"it holds secrets, so make it owner-only (chmod 600 {path})"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as failed:
        raise CliError(f"--tokens-file {path}: {failed.strerror or failed}") from None
    except UnicodeDecodeError:
        raise CliError(f"--tokens-file {path} is not UTF-8 text (expected one name=token a line)") from None
    try:
        return parse_tokens(text, f"--tokens-file {path}", separators="\n")
    except ValueError as refused:
        raise CliError(str(refused)) from None


def _job_tools(args: argparse.Namespace, app: Any) -> None:
    """``--job-tools``: jobs.wait and jobs.cancel for hosts without MCP tasks."""
    if args.job_tools:
        from ..mcp import enable_job_tools

        enable_job_tools(app)


async def _serve_stdio(args: argparse.Namespace) -> int:
    from ..mcp import serve_stdio
    from ..mcp.stdio import log_connection_events

    log_connection_events()
    loaded = await load_source(args.source, echo=args.verbose)
    _job_tools(args, loaded.app)
    _report_startup(loaded)
    sys.stdout.flush()
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # a handler's print reaches stderr now, not the wire at exit
    key = resolve_state_key(args.state_key_file, create=False)
    async with _shared_tasks(args, loaded.app):
        await serve_stdio(
            loaded.app,
            request_state_keys=[key] if key else None,
            answer_timeout=args.answer_timeout,
            page_size=args.page_size,
        )
    return 0


def _check_task_store(url: str) -> None:
    """Refuse a task store that is malformed or cannot be reached now: one sentence, exit 1, nothing started."""
    try:
        from ..redis_tasks import reach
    except ImportError:
        raise CliError("--task-store needs the redis package: pip install 'fusion-nb[redis]'") from None
    from ..engine import ToolError

    try:
        asyncio.run(reach(url))
    except (ToolError, ValueError) as refused:
        raise CliError(str(getattr(refused, "message", refused))) from None


@contextlib.asynccontextmanager
async def _shared_tasks(args: argparse.Namespace, app: Any) -> Any:
    """``--task-store``: this worker's tasks in Redis, every worker's reachable from here, while serving."""
    if args.task_store is None:
        yield
        return
    from ..engine import ToolError
    from ..redis_tasks import DEFAULT_LEASE, share_tasks

    lease = args.task_lease if args.task_lease is not None else DEFAULT_LEASE
    shared = share_tasks(app, args.task_store, lease=lease, worker=args.worker_name or f"pid{os.getpid()}")
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(shared)
        except ToolError as refused:
            raise CliError(refused.message) from None
        yield


#: the command's flag for each option whose refusal names it (their sentences start with the option's name)
_FLAGS = {
    "allowed_hosts": "--allow-host",
    "allowed_origins": "--allow-host",
    "worker_name": "--worker-name",
    "public_url": "--public-url",
    "issuer_url": "--auth-issuer",
    "audience": "--auth-audience",
    "required_scopes": "--auth-scopes",
    "key_refresh_interval": "--auth-key-refresh",
}


def _oauth(args: argparse.Namespace) -> Any:
    """The ``OAuthSettings`` of ``--auth-*`` (``None`` without ``--auth-issuer``)."""
    from ..mcp.options import OAuthSettings

    if args.auth_issuer is None:
        return None
    scopes = [scope for scope in (args.auth_scopes or "").replace(" ", ",").split(",") if scope]
    refresh = OAuthSettings.key_refresh_interval
    if args.auth_key_refresh is not None:
        try:
            refresh = float(args.auth_key_refresh)
        except ValueError:
            given = args.auth_key_refresh[:40]
            raise CliError(f"--auth-key-refresh must be a number of seconds, got {given!r}") from None
    return OAuthSettings(
        issuer_url=args.auth_issuer,
        audience=args.auth_audience,
        required_scopes=scopes,
        client_id=args.auth_client_id,
        client_secret=os.environ.get(CLIENT_SECRET_ENV) or None,
        key_refresh_interval=refresh,
    )


def _http_options(args: argparse.Namespace, token: str | None, key: str | None, port: int = 1) -> HttpOptions:
    """The ``HttpOptions`` this command serves with (``http_app``'s one definition); a bad flag is one sentence.

    With ``--auth-issuer`` and no ``--public-url``, the public URL is where it listens (loopback).
    """
    from ..mcp.options import HttpOptions

    public_url = args.public_url
    if public_url is None and args.auth_issuer is not None:
        public_url = mcp_url(args.host, port).removesuffix("/mcp")
    try:
        return HttpOptions(
            oauth=_oauth(args),
            public_url=public_url,
            host=args.host,
            token=token,
            tokens=getattr(args, "tokens", None),
            auth=not args.no_auth,
            allowed_hosts=args.allow_host,
            allowed_origins=[f"{scheme}://{host}" for host in args.allow_host for scheme in ("http", "https")],
            request_state_keys=[key] if key else None,
            worker_name=args.worker_name,
            answer_timeout=args.answer_timeout,
            page_size=args.page_size,
        )
    except ValueError as refused:
        message = str(refused)
        for option, flag in _FLAGS.items():
            if message.startswith(option):
                message = flag + message[len(option) :]
        raise CliError(message) from None


async def _serve_http(args: argparse.Namespace, token: str | None) -> int:
    from ..mcp.http import HttpApp

    inherited = os.environ.get(WORKER_FD_ENV)
    key = resolve_state_key(args.state_key_file, create=args.workers > 1)
    loaded = await load_source(args.source, echo=args.verbose)
    _job_tools(args, loaded.app)
    if inherited is None:
        _report_startup(loaded)
        sock = _bind(args.host, args.port)
    else:
        sock = socket.socket(fileno=int(inherited))
        sock.setblocking(False)
    asgi = HttpApp(loaded.app, _http_options(args, token, key, port=sock.getsockname()[1]))
    from ..mcp.uvicorn_server import ConnectionLimits
    from .service import HttpService

    limits = ConnectionLimits(
        header_timeout=args.header_timeout,
        max_connections=args.max_connections,
        per_address=args.connections_per_address,
    )
    service = HttpService(loaded.app, asgi, sock, drain_timeout=args.drain_timeout, log=log_to_stderr, limits=limits)
    port = sock.getsockname()[1]

    def announce() -> None:  # once serving, with SIGTERM already meaning "drain"
        if inherited is None:
            _announce(f"serving {len(loaded.app.tools)} tool(s)", args, port, asgi.token or _any_named(args))
        else:
            log_to_stderr(f"worker {os.getpid()} ready on port {port}")
            signal_ready()

    async with _shared_tasks(args, loaded.app):
        await service.serve(on_ready=announce)
    log_to_stderr(f"worker {os.getpid()} stopped" if inherited else "stopped")
    return 0


def _announce(what: str, args: argparse.Namespace, port: int, token: str | None) -> None:
    """The start-up lines on stderr: where, a generated token (once), then the pasteable client configs.

    They go to stderr: a person reads them, stdout stays free. A token the operator chose
    (``--token``, ``FUSION_NB_TOKEN``) reads ``TOKEN`` in the configs: they know it, and a
    service's log must not keep it. A generated one is printed (nobody could connect otherwise).
    """
    url = mcp_url(args.host, port)
    log_to_stderr(f"{what} at {url} (health: /healthz)")
    if args.auth_issuer is not None:
        public = (args.public_url or url.removesuffix("/mcp")).rstrip("/")
        log_to_stderr(f"OAuth resource server for {public}/mcp: tokens from {args.auth_issuer}")
        log_to_stderr(f"metadata: {public}/.well-known/oauth-protected-resource/mcp")
        return
    if args.tokens:
        log_to_stderr(f"named tokens, each its own client: {', '.join(args.tokens)}")
    generated = token is not None and not (args.token or os.environ.get(TOKEN_ENV) or args.tokens)
    if generated:
        log_to_stderr(f"bearer token (generated; set {TOKEN_ENV} to choose one): {token}")
    note = restart_note(
        port_fixed=args.port != 0, token_fixed=not generated, how=f"--port PORT and --token <secret> (or ${TOKEN_ENV})"
    )
    hidden = None if generated else f"the one given by --token or ${TOKEN_ENV}"
    if args.tokens:
        hidden = f"each client's own, from --tokens-file or ${TOKENS_ENV}"
    with contextlib.suppress(OSError, ValueError):
        print(http_configs(url, token, note=note, hidden=hidden), file=sys.stderr, flush=True)


def _any_named(args: argparse.Namespace) -> str | None:
    """A stand-in token for the printed configs when named tokens are served (they show ``TOKEN``)."""
    return "TOKEN" if args.tokens else None


def _bind(host: str, port: int) -> socket.socket:
    from ..mcp.uvicorn_server import listening_socket

    try:
        return listening_socket(host, port)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _report_startup(loaded: Any) -> None:
    report = loaded.report
    if report is not None:
        skipped = [o for o in report.outcomes if o.status == "skipped"]
        log_to_stderr(f"{loaded.label}: {len(report.ran)} cell(s) ran, {len(skipped)} skipped")
        for outcome in skipped:
            log_to_stderr(f"  skipped cell {outcome.cell.number} ({outcome.cell.first_line!r}): {outcome.reason}")
    log_to_stderr(f"tools: {', '.join(tool.name for tool in loaded.app.tools) or 'none'}")


def _supervise(args: argparse.Namespace, token: str | None) -> int:
    """Bind once, then keep ``args.workers`` copies of this command serving on the inherited socket.

    SIGTERM and SIGINT are forwarded to the workers from before the first line is printed,
    so a signal at any moment stops the command with status 0: workers already serving
    drain, one still starting (no drain handler yet) just ends, having taken no request.
    """
    workers = _Workers(args, token)
    previous = {s: signal.signal(s, workers.forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        return workers.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Workers:
    """The supervising master of ``--workers N``: starts the workers and restarts one that dies.

    Why a master of our own rather than gunicorn or a systemd template: the workers are
    this same command on one inherited socket, sharing a token and a key the master may
    have generated, and the only policy needed is small: a worker that dies after it
    served (killed, out of memory, a crash) is replaced at once, as uvicorn's and
    gunicorn's masters do; one that dies before it was ready is a start-up failure
    (a broken SOURCE would fail again), so the others are stopped and the command exits
    1, as it does when more than ``MAX_RESTARTS`` restarts come within ``RESTART_WINDOW``
    seconds. A worker tells the master it is ready by writing one byte on a pipe; the
    master reads it only when the worker has exited (``os.wait`` is the one event it
    waits for), so supervising costs nothing while all is well.
    """

    MAX_RESTARTS = 5
    RESTART_WINDOW = 60.0

    def __init__(self, args: argparse.Namespace, token: str | None) -> None:
        self.args = args
        self.token = token
        self.children: dict[int, tuple[subprocess.Popen[bytes], int]] = {}  # pid -> (process, ready pipe)
        self.stopping: list[int] = []  # the signals forwarded so far
        self.restarts: list[float] = []

    def forward(self, signum: int, frame: Any) -> None:
        """Pass a stopping signal to every running worker (and start no new one)."""
        self.stopping.append(signum)
        for child, _ in list(self.children.values()):
            if child.poll() is None:
                child.send_signal(signum)

    def run(self) -> int:
        """Start the workers (unless stopping already) and supervise them; 1 if one could not start."""
        args = self.args
        key = resolve_state_key(args.state_key_file, create=True) or secrets.token_urlsafe(48)
        sock = _bind(args.host, args.port)
        port = sock.getsockname()[1]
        env = {**os.environ, WORKER_FD_ENV: str(sock.fileno()), STATE_KEY_ENV: key}
        if self.args.task_store is not None:
            env[TASK_STORE_ENV] = self.args.task_store  # (not in argv: ps shows argv, and the URL may hold a password)
        if args.tokens:  # (the environment, not argv: ps shows argv)
            env.pop(TOKEN_ENV, None)
            env[TOKENS_ENV] = "\n".join(f"{name}={secret}" for name, secret in args.tokens.items())
        elif not args.no_auth and self.token is not None:
            env[TOKEN_ENV] = self.token
        _announce(
            f"starting {args.workers} workers", args, port, None if args.no_auth else self.token or _any_named(args)
        )
        try:
            for _ in range(args.workers if not self.stopping else 0):
                self._start(sock, env)
            return self._supervise(sock, env)
        finally:
            sock.close()
            for _, ready in self.children.values():
                os.close(ready)

    def _start(self, sock: socket.socket, env: dict[str, str]) -> None:
        ready_r, ready_w = os.pipe()
        os.set_blocking(ready_r, False)
        argv = [sys.executable, "-m", "fusion_nb", *_worker_argv(self.args)]
        try:
            started = subprocess.Popen(
                argv,
                env={**env, READY_FD_ENV: str(ready_w)},
                pass_fds=[sock.fileno(), ready_w],
                preexec_fn=_stop_with_parent,
            )
        finally:
            os.close(ready_w)
        self.children[started.pid] = (started, ready_r)
        if self.stopping:  # a signal came while this one was being started: `forward` did not know it yet
            started.send_signal(self.stopping[-1])

    def _supervise(self, sock: socket.socket, env: dict[str, str]) -> int:
        while self.children:
            pid, status = os.wait()
            entry = self.children.pop(pid, None)
            if entry is None:
                continue
            child, ready_pipe = entry
            child.returncode = code = os.waitstatus_to_exitcode(status)
            was_ready = _read_ready(ready_pipe)
            os.close(ready_pipe)
            if self.stopping:
                if code != 0 and -code not in self.stopping:
                    log_to_stderr(f"worker {pid} exited with status {code} while stopping")
                continue
            if not was_ready or self._too_many_restarts():
                why = "before it was ready" if not was_ready else f"{self.MAX_RESTARTS} restarts within a minute"
                log_to_stderr(f"worker {pid} exited with status {code} ({why}); stopping the others")
                self.forward(signal.SIGTERM, None)
                self._wait_all()
                return 1
            log_to_stderr(f"worker {pid} exited with status {code}; starting a new one")
            self._start(sock, env)
        return 0

    def _too_many_restarts(self) -> bool:
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < self.RESTART_WINDOW] + [now]
        return len(self.restarts) > self.MAX_RESTARTS

    def _wait_all(self) -> None:
        for child, ready in list(self.children.values()):
            child.wait()
            os.close(ready)
        self.children.clear()


def _read_ready(fd: int) -> bool:
    """Whether the worker on the other end of this pipe wrote its ready byte before it exited."""
    try:
        return os.read(fd, 1) == b"1"
    except BlockingIOError:
        return False


def signal_ready() -> None:
    """In a worker: tell the supervising master this worker serves (one byte on its pipe), once."""
    fd = os.environ.pop(READY_FD_ENV, None)
    if fd is not None:
        with contextlib.suppress(OSError, ValueError):
            os.write(int(fd), b"1")
            os.close(int(fd))


def _stop_with_parent() -> None:
    """In a worker, before exec: SIGTERM (a drain) when the supervisor dies, so no worker is orphaned (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker_argv(args: argparse.Namespace) -> list[str]:
    argv = ["serve", args.source, "--transport", "http", "--host", args.host, "--port", str(args.port)]
    argv += ["--workers", str(args.workers), "--drain-timeout", str(args.drain_timeout)]
    argv += ["--header-timeout", str(args.header_timeout), "--answer-timeout", str(args.answer_timeout)]
    if args.page_size is not None:
        argv += ["--page-size", str(args.page_size)]
    if args.max_connections is not None:
        argv += ["--max-connections", str(args.max_connections)]
    if args.connections_per_address is not None:
        argv += ["--connections-per-address", str(args.connections_per_address)]
    for host in args.allow_host:
        argv += ["--allow-host", host]
    if args.no_auth:
        argv.append("--no-auth")
    for name in OAUTH_ENV:  # (the client secret stays in the environment)
        if getattr(args, name) is not None:
            argv += [f"--{name.replace('_', '-')}", getattr(args, name)]
    if args.task_lease is not None:
        argv += ["--task-lease", str(args.task_lease)]
    if args.verbose:
        argv.append("--verbose")
    return argv
