"""``fusion-nb package SOURCE --out DIR``: what publishing a notebook's tools takes, written once.

SOURCE is loaded as ``fusion-nb check`` loads it (a broken notebook is refused in one
sentence), then DIR gets:

* ``server.json`` for the official MCP Registry (schema 2025-12-11, a ``pypi`` package
  served over stdio, description at most 100 characters);
* ``bundle/``, an MCPB bundle (manifest 0.4, server type ``uv``): the notebook (or ``.py``,
  or the module's files, with the local modules they import), a ``pyproject.toml`` pinning
  fusion-nb to this version and each imported distribution to the version installed here,
  and ``mcp_config`` running ``fusion-nb serve`` on the bundled source over stdio;
  ``mcpb pack DIR/bundle`` makes the ``.mcpb``;
* ``Dockerfile`` serving it over Streamable HTTP as a non-root user, token from
  ``FUSION_NB_TOKEN``, with the OCI label ``io.modelcontextprotocol.server.name``;
* ``README-mcp.md``, a README snippet with the registry's ``mcp-name:`` ownership line.

What only the user can supply (the namespace, the version they publish, a PyPI package
name) gets a placeholder here and one sentence each in the output. Existing files are
never overwritten without ``--force``: they may hold the user's edits.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CliError
from .headless import read_cells
from .source import Loaded, load_source, split_source

HELP = "write server.json, an MCPB bundle, a Dockerfile and a README line to publish a source's tools"

DESCRIPTION = """\
Load SOURCE as `fusion-nb check` does, then write into DIR what the MCP Registry, Claude
Desktop (MCPB bundles) and container catalogs take: server.json, bundle/ (mcpb pack it),
a Dockerfile serving it over HTTP, and README-mcp.md with the mcp-name line. Then say,
one sentence each, what is still to fill in.
"""

EPILOG = """\
examples:
  fusion-nb package notebooks/01-quickstart.ipynb --out dist/quickstart
  fusion-nb package tools.py --out dist/tools --name io.github.you/tools --version 1.0.0
  npx @anthropic-ai/mcpb pack dist/tools/bundle                      # the .mcpb for Claude Desktop
"""

#: the registry's server.json schema these files follow (tests/cli/schemas/ vendors it)
SERVER_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
#: the OCI label container catalogs read the server's registry name from
OCI_NAME_LABEL = "io.modelcontextprotocol.server.name"
MANIFEST_VERSION = "0.4"
MAX_DESCRIPTION = 100  # the registry's cap on server.json's description
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")  # server.json's "name" pattern
PLACEHOLDER_OWNER = "OWNER"
PLACEHOLDER_VERSION = "0.0.1"
BUNDLE = "bundle"
ENTRY_POINT = "server.py"
FILES = ("server.json", "Dockerfile", "README-mcp.md", BUNDLE)
HTTP_PORT = 8000


def add_parser(commands: Any) -> None:
    """Register ``package`` and its options."""
    parser = commands.add_parser(
        "package",
        help=HELP,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", metavar="SOURCE", help="x.ipynb, x.py or package.module, with optional :NAME")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="the folder to write into")
    parser.add_argument(
        "--name",
        help=f"registry name, e.g. io.github.you/tools (default: io.github.{PLACEHOLDER_OWNER}/<source name>)",
    )
    parser.add_argument("--version", help=f"the version you publish (default: {PLACEHOLDER_VERSION}, a placeholder)")
    parser.add_argument("--description", help=f"at most {MAX_DESCRIPTION} characters (default: from the source)")
    parser.add_argument("--pypi-name", help="the PyPI package that serves it (default: derived from the name)")
    parser.add_argument("--force", action="store_true", help="overwrite files a previous run wrote in DIR")
    parser.set_defaults(run=run)


@dataclass
class Plan:
    """Everything the files are written from; ``todo`` holds the sentences printed at the end."""

    name: str
    version: str
    description: str
    pypi_name: str
    served: str  # the SOURCE argument as the bundle serves it (relative to the bundle)
    files: dict[str, Path]  # bundle path -> where it is copied from
    requirements: list[str]
    tools: list[dict[str, str]]
    todo: list[str] = field(default_factory=list)

    @property
    def short(self) -> str:
        return self.name.rpartition("/")[2]


def run(args: argparse.Namespace) -> int:
    """Check the options, load SOURCE (refusing a broken one), write DIR and say what is left to do."""
    _check_options(args)
    out: Path = args.out
    existing = [name for name in FILES if (out / name).exists()]
    if existing and not args.force:
        raise CliError(f"{out}: already holds {', '.join(existing)}; pass --force to overwrite them")
    loaded = asyncio.run(load_source(args.source))
    if not loaded.app.tools:
        raise CliError(f"{loaded.label}: defines no tools")
    plan = _plan(args, loaded)
    _write(out, plan, force=args.force)
    print(f"wrote {out / 'server.json'}, {out / BUNDLE}/ (MCPB), {out / 'Dockerfile'}, {out / 'README-mcp.md'}")
    print("Still to do:" if plan.todo else "Nothing left to fill in.")
    for sentence in plan.todo:
        print(f"- {sentence}")
    return 0


def _check_options(args: argparse.Namespace) -> None:
    if args.name is not None and not NAME_PATTERN.match(args.name):
        raise CliError(f"--name {args.name!r} is not a registry name like io.github.you/tools", status=2)
    if args.description is not None and not 0 < len(args.description) <= MAX_DESCRIPTION:
        raise CliError(f"--description must be 1 to {MAX_DESCRIPTION} characters (the registry's limit)", status=2)
    given = args.version
    if given is not None and (
        not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z.+-]*", given)
        or given == "latest"
        or re.search(r"(^|\.)[xX](\.|$)", given)
    ):
        raise CliError(f"--version {given!r} is not one exact version like 1.0.0 (no range, no 'latest')", status=2)


def _plan(args: argparse.Namespace, loaded: Loaded) -> Plan:
    location, app_name = split_source(args.source)
    files, scanned, served = _bundled(location)
    suffix = f":{app_name}" if app_name else ""
    stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", Path(location).stem if served else location.replace(".", "-"))
    name = args.name or f"io.github.{PLACEHOLDER_OWNER}/{stem}"
    short = name.rpartition("/")[2]
    tools = [{"name": tool.name, "description": (tool.description or "").strip()} for tool in loaded.app.tools]
    pypi_name = args.pypi_name or re.sub(r"[^a-z0-9]+", "-", short.lower()).strip("-") + "-mcp"
    todo: list[str] = []
    pinned, unpinned = _requirements(scanned, None if files else location, todo)
    plan = Plan(
        name=name,
        version=args.version or PLACEHOLDER_VERSION,
        description=args.description or _description(location, tools),
        pypi_name=pypi_name,
        served=(served or location) + suffix,
        files=files,
        requirements=pinned,
        tools=tools,
        todo=todo,
    )
    _todo(args, plan, unpinned)
    return plan


def _bundled(location: str) -> tuple[dict[str, Path], list[Path], str | None]:
    """The files the bundle holds, the files to scan for imports, and the bundled file SOURCE names.

    A notebook or ``.py`` is copied with the local modules it imports (siblings in its
    folder); a module found in the working folder is copied whole (its top-level package);
    an installed module is not copied: it becomes a pinned requirement instead.
    """
    if location.endswith((".ipynb", ".py")):
        path = Path(location)
        files = {path.name: path}
        for local in _imports([path]) - {path.stem}:
            for candidate in (path.parent / f"{local}.py", path.parent / local):
                if candidate.exists() and candidate != path:
                    files[candidate.name] = candidate
        return files, list(files.values()), path.name
    top = location.split(".")[0]
    spec = importlib.util.find_spec(top)
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    if origin is None or not os.path.abspath(origin).startswith(os.getcwd() + os.sep):
        return {}, [], None  # installed: its distribution is pinned (``_requirements``)
    root = origin.parent if origin.name == "__init__.py" else origin
    return {root.name: root}, [root], None


def _imports(paths: list[Path]) -> set[str]:
    """Top-level names the files import (notebook cells, ``.py`` files, packages' modules)."""
    names: set[str] = set()
    for path in paths:
        if path.is_dir():
            names |= _imports(sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts))
            continue
        texts = [cell.source for cell in read_cells(path)] if path.suffix == ".ipynb" else [path.read_text("utf-8")]
        for text in texts:
            names |= _imported_names(text)
    return names


def _imported_names(text: str) -> set[str]:
    """Absolute imports in a cell or file; IPython lines (``%``, ``!``) dropped, a tool cell's body parsed as one."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    for attempt in (
        code,
        "async def _cell():\n" + "\n".join(f"    {line}" for line in code.splitlines()) + "\n    pass",
    ):
        try:
            tree = compile(attempt, "<cell>", "exec", flags=flags)
        except SyntaxError:
            continue
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
        return found
    return set(re.findall(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", code, flags=re.M))


def _requirements(scanned: list[Path], installed_module: str | None, todo: list[str]) -> tuple[list[str], list[str]]:
    """``fusion-nb==this`` and ``dist==installed`` for each import, and the imports that are not installed."""
    names = _imports(scanned) - set(sys.stdlib_module_names) - {"fusion_nb", "__future__"}
    names -= {path.stem for path in scanned}  # the bundled local modules themselves
    if installed_module is not None:
        names.add(installed_module.split(".")[0])
    by_module = importlib.metadata.packages_distributions()
    pins = {"fusion-nb": importlib.metadata.version("fusion-nb")}
    unpinned: list[str] = []
    for module in sorted(names):
        dists = by_module.get(module)
        if not dists:
            unpinned.append(module)
            continue
        for dist in dists:
            pins.setdefault(dist, importlib.metadata.version(dist))
    local = [dist for dist in pins if not _from_an_index(dist)]
    if local:
        shown = ", ".join(f"{dist} {pins[dist]}" for dist in local)
        todo.append(
            f"{shown} {'is' if len(local) == 1 else 'are'} installed here from a local folder or URL, not from PyPI: "
            "the bundle and the image pin that version, so publish it or point uv and pip at an index that has it."
        )
    return [f"{dist}=={version}" for dist, version in sorted(pins.items(), key=lambda kv: kv[0].lower())], unpinned


def _from_an_index(dist_name: str) -> bool:
    """Whether a distribution came from a package index (no ``direct_url.json``, in a site-packages folder)."""
    dist = importlib.metadata.distribution(dist_name)
    if dist.read_text("direct_url.json"):
        return False
    where = str(dist.locate_file(""))
    return "site-packages" in where or "dist-packages" in where


def _description(location: str, tools: list[dict[str, str]]) -> str:
    """A notebook's first heading, a file's docstring's first line, else the tool names; cut to 100 characters."""
    text = ""
    path = Path(location)
    if location.endswith(".ipynb"):
        cells = json.loads(path.read_text("utf-8")).get("cells", [])
        for cell in cells:
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else source
            heading = re.search(r"^#+\s*(.+)$", source, flags=re.M) if cell.get("cell_type") == "markdown" else None
            if heading:
                text = heading[1].strip()
                break
    elif location.endswith(".py"):
        docstring = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
        text = docstring.strip().splitlines()[0] if docstring.strip() else ""
    text = text or "MCP tools: " + ", ".join(tool["name"] for tool in tools)
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 3].rstrip() + "..."


def _todo(args: argparse.Namespace, plan: Plan, unpinned: list[str]) -> None:
    """One sentence per thing only the user can fill in (``plan.todo`` may already hold one)."""
    if args.name is None:
        plan.todo.insert(
            0,
            f"Replace {PLACEHOLDER_OWNER} in {plan.name} (server.json, README-mcp.md, the Dockerfile's label) with the "
            "GitHub login or reversed domain you publish under, or run again with --name.",
        )
    if args.version is None:
        plan.todo.append(
            f"{PLACEHOLDER_VERSION} is a placeholder: run again with --version set to the version you publish "
            "(server.json, the bundle and the PyPI package must all say the same one).",
        )
    plan.todo.append(
        f"server.json lists the PyPI package {plan.pypi_name} {plan.version}: publish it with README-mcp.md's "
        "mcp-name line in its README (the registry reads the README of that very release)"
        + ("." if args.pypi_name else ", or name yours with --pypi-name."),
    )
    if unpinned:
        plan.todo.append(
            f"Imported but not installed here, so not pinned: {', '.join(unpinned)}; add them to "
            f"{BUNDLE}/pyproject.toml and {BUNDLE}/requirements.txt if they are needed.",
        )


def _write(out: Path, plan: Plan, *, force: bool) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        bundle = out / BUNDLE
        if force and bundle.exists():
            shutil.rmtree(bundle)
        bundle.mkdir()
        for target, source in plan.files.items():
            if source.is_dir():
                shutil.copytree(source, bundle / target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copyfile(source, bundle / target)
        _dump(bundle / "manifest.json", _manifest(plan))
        (bundle / "pyproject.toml").write_text(_pyproject(plan), encoding="utf-8")
        (bundle / "requirements.txt").write_text("".join(f"{line}\n" for line in plan.requirements), encoding="utf-8")
        (bundle / ENTRY_POINT).write_text(_entry_point(plan), encoding="utf-8")
        (bundle / ".mcpbignore").write_text(".venv/\n__pycache__/\n*.pyc\n", encoding="utf-8")
        _dump(out / "server.json", _server_json(plan))
        (out / "Dockerfile").write_text(_dockerfile(plan), encoding="utf-8")
        (out / "README-mcp.md").write_text(_readme(plan), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{out}: cannot write there ({exc.strerror or exc})") from None


def _dump(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _server_json(plan: Plan) -> dict[str, Any]:
    """The registry's entry: one PyPI package run with ``uvx`` over stdio."""
    package = {
        "registryType": "pypi",
        "registryBaseUrl": "https://pypi.org",
        "identifier": plan.pypi_name,
        "version": plan.version,
        "runtimeHint": "uvx",
        "transport": {"type": "stdio"},
    }
    return {
        "$schema": SERVER_SCHEMA,
        "name": plan.name,
        "description": plan.description,
        "version": plan.version,
        "packages": [package],
    }


def _serve_args(plan: Plan, folder: str) -> list[str]:
    """``serve SOURCE`` with SOURCE in ``folder`` (a module source is found from the working folder)."""
    location, _ = split_source(plan.served)
    source = f"{folder}/{plan.served}" if location.endswith((".ipynb", ".py")) else plan.served
    return ["serve", source]


def _manifest(plan: Plan) -> dict[str, Any]:
    """MCPB manifest 0.4: ``uv`` installs ``pyproject.toml``'s pins, then runs ``fusion-nb serve`` over stdio."""
    owner = plan.name.partition("/")[0].rpartition(".")[2]
    command = ["run", "--directory", "${__dirname}", "fusion-nb", *_serve_args(plan, "${__dirname}")]
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": plan.short,
        "version": plan.version,
        "description": plan.description,
        "author": {"name": owner},
        "server": {"type": "uv", "entry_point": ENTRY_POINT, "mcp_config": {"command": "uv", "args": command}},
        "tools": [
            {"name": tool["name"], **({"description": tool["description"]} if tool["description"] else {})}
            for tool in plan.tools
        ],
        "compatibility": {"platforms": ["darwin", "linux", "win32"], "runtimes": {"python": ">=3.11"}},
        "keywords": ["jupyter", "notebook", "fusion-nb"],
    }


def _pyproject(plan: Plan) -> str:
    """A project uv can run but need not build (``package = false``): just the pinned requirements."""
    deps = "".join(f"    {json.dumps(line)},\n" for line in plan.requirements)
    return (
        "# The MCPB bundle's requirements, pinned by `fusion-nb package` to what served it there.\n"
        "[project]\n"
        f"name = {json.dumps(re.sub(r'[^A-Za-z0-9._-]+', '-', plan.short))}\n"
        f"version = {json.dumps(plan.version)}\n"
        f"description = {json.dumps(plan.description)}\n"
        'requires-python = ">=3.11"\n'
        f"dependencies = [\n{deps}]\n\n"
        "[tool.uv]\n"
        "package = false\n"
    )


def _entry_point(plan: Plan) -> str:
    """``server.py``: the same ``fusion-nb serve`` for a host that runs the entry point itself."""
    args = _serve_args(plan, "{here}")
    rendered = ", ".join(f'f"{arg}"' if "{here}" in arg else json.dumps(arg) for arg in args)
    return (
        f'"""Serve {plan.served} over stdio: `fusion-nb serve` on the bundled source (MCPB entry point)."""\n\n'
        "import os\nimport sys\n\nfrom fusion_nb.cli import main\n\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        "os.chdir(here)  # a module source imports from the bundle's folder\n"
        f"sys.exit(main([{rendered}]))\n"
    )


def _dockerfile(plan: Plan) -> str:
    """The bundle served over Streamable HTTP by an unprivileged user; the token comes from the environment."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    command = [*_serve_args(plan, "/app"), "--transport", "http", "--host", "0.0.0.0", "--port", str(HTTP_PORT)]
    health = (
        "import sys, urllib.request; "
        f"sys.exit(urllib.request.urlopen('http://127.0.0.1:{HTTP_PORT}/healthz', timeout=2).status != 200)"
    )
    return f"""\
# {plan.name}: {plan.served} served over Streamable HTTP at /mcp (written by `fusion-nb package`).
#
#   docker build -t {plan.short.lower()} .
#   docker run -p {HTTP_PORT}:{HTTP_PORT} -e FUSION_NB_TOKEN="$TOKEN" {plan.short.lower()}
#
# Clients send `Authorization: Bearer $TOKEN`; the token is read from FUSION_NB_TOKEN, never
# baked in (without it fusion-nb generates one and prints it on the container's log).
# Add `--allow-host your.domain:*` to CMD for each name clients use to reach it.
FROM python:{python}-slim
LABEL {OCI_NAME_LABEL}="{plan.name}"

ENV PYTHONUNBUFFERED=1 \\
    PIP_NO_CACHE_DIR=1 \\
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY {BUNDLE}/requirements.txt /tmp/requirements.txt
RUN pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt

# an unprivileged user owns nothing but its home; the tools are read-only to it
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin fusion
WORKDIR /app
COPY {BUNDLE}/ /app/
USER fusion

EXPOSE {HTTP_PORT}
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \\
    CMD ["python", "-c", {json.dumps(health)}]

# exec form: fusion-nb is PID 1 and receives SIGTERM itself (drain, then exit 0)
ENTRYPOINT ["fusion-nb"]
CMD {json.dumps(command)}
"""


def _readme(plan: Plan) -> str:
    """The README lines: the registry's ownership marker (it must ship in the released README) and how to run it."""
    tools = "\n".join(
        f"- `{tool['name']}`" + (f": {tool['description'].splitlines()[0]}" if tool["description"] else "")
        for tool in plan.tools
    )
    return f"""\
<!-- mcp-name: {plan.name} -->

## {plan.short}: MCP tools

{plan.description}

{tools}

Run it over stdio with `uvx {plan.pypi_name}`, install the MCPB bundle in Claude Desktop, or
serve it over HTTP with `docker run -p {HTTP_PORT}:{HTTP_PORT} -e FUSION_NB_TOKEN=... IMAGE`.
"""
