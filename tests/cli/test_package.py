"""``fusion-nb package``: what it writes is accepted by the real checkers, and the bundle serves.

server.json is validated against the registry's published schema (vendored in schemas/,
its source named there); the MCPB bundle goes through the pinned ``mcpb validate`` and
``mcpb pack`` (tests/interop/package.json), and the packed ``.mcpb``, unzipped, serves its
tools with the manifest's own command line; the Dockerfile is parsed (and built where a
Docker engine answers).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import jsonschema
import pytest
from desktop_host import host_client
from served import DATA, REPO, cli_env

import fusion_nb
from fusion_nb.cli import build_parser
from fusion_nb.cli.package import OCI_NAME_LABEL, SERVER_SCHEMA

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "server.schema.json").read_text())
MCPB = REPO / "tests" / "interop" / "node_modules" / ".bin" / "mcpb"
QUICKSTART = REPO / "notebooks" / "01-quickstart.ipynb"


def registry_errors(document: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return [error.message for error in validator.iter_errors(document)]


def mcpb(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The pinned ``@anthropic-ai/mcpb`` CLI (``make interop`` installs it)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the MCPB checks run the @anthropic-ai/mcpb CLI (Node 20+)")
    if not MCPB.exists():
        pytest.fail("@anthropic-ai/mcpb is not installed: run `make interop` (npm install --prefix tests/interop)")
    return subprocess.run([str(MCPB), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def package(*args: str, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fusion_nb", "package", *args],
        cwd=cwd,
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def dockerfile(path: Path) -> dict[str, list[str]]:
    """Each instruction's arguments, continuation lines joined."""
    found: dict[str, list[str]] = {}
    for line in path.read_text().replace("\\\n", " ").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            found.setdefault(word.upper(), []).append(rest.strip())
    return found


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("package") / "quickstart"
    done = package(str(QUICKSTART), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_server_json_is_accepted_by_the_registrys_schema(quickstart):
    out, _ = quickstart
    server = json.loads((out / "server.json").read_text())
    assert server["$schema"] == SERVER_SCHEMA == SCHEMA["$id"]
    assert registry_errors(server) == []
    assert server["name"] == "io.github.OWNER/01-quickstart"
    assert server["description"] == "01 · Quickstart: a first tool in two minutes"
    (pypi,) = server["packages"]
    assert pypi["registryType"] == "pypi" and pypi["transport"] == {"type": "stdio"}
    assert pypi["version"] == server["version"]
    # the schema really checks: the registry's limits are enforced by this validator
    assert registry_errors({**server, "description": "x" * 101})
    assert registry_errors({**server, "name": "no-slash"})


def test_the_sentences_say_what_is_left_to_fill_in(quickstart):
    _, printed = quickstart
    todo = [line[2:] for line in printed.splitlines() if line.startswith("- ")]
    assert any("Replace OWNER in io.github.OWNER/01-quickstart" in line and "--name" in line for line in todo)
    assert any("placeholder" in line and "--version" in line for line in todo)
    assert any("PyPI package 01-quickstart-mcp" in line and "--pypi-name" in line for line in todo)
    assert all(line.count(". ") == 0 and line.endswith(".") for line in todo), "one sentence each"


def test_the_readme_snippet_carries_the_mcp_name_line(quickstart):
    out, _ = quickstart
    text = (out / "README-mcp.md").read_text()
    assert re.search(r"^<!-- mcp-name: io\.github\.OWNER/01-quickstart -->$", text, flags=re.M)


@pytest.fixture(scope="module")
def packed(quickstart, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle through ``mcpb validate`` and ``mcpb pack``, then unzipped as a host installs it."""
    out, _ = quickstart
    work = tmp_path_factory.mktemp("mcpb")
    validated = mcpb("validate", str(out / "bundle" / "manifest.json"), cwd=work)
    assert validated.returncode == 0 and "validation passes" in validated.stdout, validated.stdout + validated.stderr
    packed_file = work / "quickstart.mcpb"
    packed = mcpb("pack", str(out / "bundle"), str(packed_file), cwd=work)
    assert packed.returncode == 0 and packed_file.is_file(), packed.stdout + packed.stderr
    installed = work / "installed"
    with zipfile.ZipFile(packed_file) as archive:
        archive.extractall(installed)
    return installed


def test_the_bundle_pins_fusion_nb_and_mcpb_accepts_it(quickstart, packed, tmp_path):
    out, _ = quickstart
    bundle = out / "bundle"
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["manifest_version"] == "0.4" and manifest["server"]["type"] == "uv"
    assert {tool["name"] for tool in manifest["tools"]} == {"greet", "math.add"}
    pins = tomllib.loads((bundle / "pyproject.toml").read_text())["project"]["dependencies"]
    assert pins == [f"fusion-nb=={fusion_nb.__version__}"]  # notebook 01 imports nothing else
    assert (bundle / "requirements.txt").read_text().split() == pins
    assert {p.name for p in packed.iterdir()} == {p.name for p in bundle.iterdir()} - {".mcpbignore"}
    # the checker is real: a manifest it must refuse is refused
    broken = tmp_path / "broken"
    shutil.copytree(bundle, broken)
    (broken / "manifest.json").write_text(json.dumps({**manifest, "server": {"type": "uvx", "entry_point": "x"}}))
    assert mcpb("validate", str(broken / "manifest.json"), cwd=tmp_path).returncode != 0


@pytest.mark.anyio
async def test_the_packed_bundle_serves_with_the_manifests_command(packed):
    """``uv run --directory ${__dirname}`` would make an environment from pyproject.toml (there is no
    uv here, and this fusion-nb is not on PyPI): this venv's ``fusion-nb`` stands in for it, with
    exactly the manifest's arguments after it, launched as a desktop host launches (empty env, ``/``)."""
    config = json.loads((packed / "manifest.json").read_text())["server"]["mcp_config"]
    assert config["command"] == "uv" and config["args"][:4] == ["run", "--directory", "${__dirname}", "fusion-nb"]
    args = [arg.replace("${__dirname}", str(packed)) for arg in config["args"][4:]]
    assert args[0] == "serve" and build_parser().parse_args(args).transport == "stdio"
    entry = {"command": str(Path(sys.executable).parent / "fusion-nb"), "args": args}
    async with host_client(entry) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"greet", "math.add"}
        assert (await client.call_tool("math.add", {"a": 40})).structured_content == {"result": 42}


def test_the_dockerfile_serves_http_as_a_non_root_user_with_the_registry_label(quickstart):
    out, _ = quickstart
    steps = dockerfile(out / "Dockerfile")
    assert steps["FROM"] == [f"python:{sys.version_info.major}.{sys.version_info.minor}-slim"]
    assert steps["LABEL"] == [f'{OCI_NAME_LABEL}="io.github.OWNER/01-quickstart"']
    (user,) = steps["USER"]
    assert user not in ("root", "0")
    command = json.loads(steps["ENTRYPOINT"][0]) + json.loads(steps["CMD"][0])
    assert command[0] == "fusion-nb"
    args = build_parser().parse_args(command[1:])
    assert (args.command, args.transport, args.host, args.port) == ("serve", "http", "0.0.0.0", 8000)
    assert args.token is None and not args.no_auth, "the token comes from FUSION_NB_TOKEN, never the image"
    assert args.source == "/app/01-quickstart.ipynb" and (out / "bundle" / "01-quickstart.ipynb").is_file()
    assert "bundle/ /app/" in steps["COPY"]


def test_the_image_builds_where_docker_runs(quickstart):
    out, _ = quickstart
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip("no Docker engine answers on this machine (CI may lack one): the Dockerfile is parsed only")
    built = subprocess.run([docker, "build", "-q", str(out)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr


def test_a_broken_notebook_is_refused_in_one_sentence_and_nothing_is_written(tmp_path):
    done = package(str(DATA / "failing.ipynb"), "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("fusion-nb: error: ") and "cell" in line and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--name", "not a name", "is not a registry name"),
        ("--description", "x" * 101, "1 to 100 characters"),
        ("--version", "^1.2", "one exact version"),
        ("--version", "1.x", "one exact version"),
    ],
)
def test_a_bad_option_is_one_sentence_and_exit_2(tmp_path, option, value, said):
    done = package(str(QUICKSTART), "--out", str(tmp_path), option, value)
    assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_earlier_files_are_kept_unless_forced(tmp_path):
    (tmp_path / "server.json").write_text("my edits")
    done = package(str(QUICKSTART), "--out", str(tmp_path))
    assert done.returncode == 1 and "--force" in done.stderr
    assert (tmp_path / "server.json").read_text() == "my edits"
    forced = package(str(QUICKSTART), "--out", str(tmp_path), "--force", "--name", "io.github.me/tools")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((tmp_path / "server.json").read_text())["name"] == "io.github.me/tools"
    assert "Replace OWNER" not in forced.stdout


TOOLS_PY = '''\
"""Reports for the sales team."""

import yaml

import helpers
from fusion_nb import Fusion

app = Fusion("reports")


@app.f.query("report").with_string("text", "Text").handle
def report(input, ctx):
    import not_installed_anywhere_xyz  # only when called: the source still loads

    return helpers.shout(yaml.safe_dump(input.text))
'''


def test_a_py_source_bundles_its_local_modules_and_pins_what_it_imports(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "tools.py").write_text(TOOLS_PY)
    (source / "helpers.py").write_text("def shout(text):\n    return text.upper()\n")
    out = tmp_path / "out"
    done = package(str(source / "tools.py"), "--out", str(out), "--version", "1.2.3", "--name", "com.example/reports")
    assert done.returncode == 0, done.stderr
    bundle = out / "bundle"
    assert {p.name for p in bundle.iterdir()} >= {"tools.py", "helpers.py", "manifest.json", "pyproject.toml"}
    pins = tomllib.loads((bundle / "pyproject.toml").read_text())["project"]["dependencies"]
    assert pins == [f"fusion-nb=={fusion_nb.__version__}", f"PyYAML=={version('PyYAML')}"]
    assert "Imported but not installed here, so not pinned: not_installed_anywhere_xyz;" in done.stdout
    server = json.loads((out / "server.json").read_text())
    assert registry_errors(server) == [] and server["description"] == "Reports for the sales team."
    assert server["version"] == server["packages"][0]["version"] == "1.2.3"
    assert "placeholder" not in done.stdout and "Replace OWNER" not in done.stdout
    assert mcpb("validate", str(bundle / "manifest.json"), cwd=tmp_path).returncode == 0


def test_a_module_in_the_working_folder_is_bundled_and_served_by_its_name(tmp_path):
    out = tmp_path / "out"
    done = package("service_app:app", "--out", str(out), "--name", "io.github.me/svc", cwd=DATA, PYTHONPATH=str(REPO))
    assert done.returncode == 0, done.stderr
    bundle = out / "bundle"
    assert (bundle / "service_app.py").read_text() == (DATA / "service_app.py").read_text()
    config = json.loads((bundle / "manifest.json").read_text())["server"]["mcp_config"]
    assert config["args"][-2:] == ["serve", "service_app:app"]  # `uv run --directory` runs it in the bundle
    pins = (bundle / "requirements.txt").read_text().split()
    assert f"anyio=={version('anyio')}" in pins and f"fusion-nb=={fusion_nb.__version__}" in pins
    assert json.loads(dockerfile(out / "Dockerfile")["CMD"][0])[:2] == ["serve", "service_app:app"]
