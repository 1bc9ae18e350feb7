"""The layers import one way, through each other's public surface (docs/architecture.md).

Read from the source (``ast``), so a function-level import counts as much as a top-level
one: no module outside ``fusion_nb.engine`` imports an engine-private module
(``fusion_nb.engine._*``), and the engine imports nothing of fusion-nb's other layers nor
of the MCP SDK, IPython or ipywidgets. Each check is tested on a module written here, so
a walker that finds nothing cannot make the real test pass.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fusion_nb"
SOURCES = [PACKAGE, ROOT / "widgets"]  # (widgets/ is installed as fusion_nb.widgets)
FOREIGN_TO_ENGINE = (
    *("fusion_nb.mcp", "fusion_nb.notebook", "fusion_nb.cli", "fusion_nb.widgets"),
    *("mcp", "mcp_types", "IPython", "ipywidgets", "ipykernel"),
)


def module_name(path: Path) -> str:
    """``fusion_nb/mcp/tasks.py`` → ``fusion_nb.mcp.tasks`` (``widgets/x.py`` → ``fusion_nb.widgets.x``)."""
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[0] == "widgets":
        parts.insert(0, "fusion_nb")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, name: str, is_package: bool) -> Iterator[str]:
    """Every module ``source`` (the module ``name``) imports, relative imports resolved."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)  # (``from . import _x`` is a module)


def private_engine_use(name: str, imported: str) -> bool:
    parts = imported.split(".")
    inside = name == "fusion_nb.engine" or name.startswith("fusion_nb.engine.")
    return not inside and parts[:2] == ["fusion_nb", "engine"] and len(parts) > 2 and parts[2].startswith("_")


def engine_reaches_out(name: str, imported: str) -> bool:
    inside = name == "fusion_nb.engine" or name.startswith("fusion_nb.engine.")
    return inside and any(imported == other or imported.startswith(other + ".") for other in FOREIGN_TO_ENGINE)


def violations() -> list[str]:
    found = []
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if "node_modules" in path.parts or "__pycache__" in path.parts:
                continue
            name = module_name(path)
            for imported in imports(path.read_text(), name, path.name == "__init__.py"):
                if private_engine_use(name, imported) or engine_reaches_out(name, imported):
                    found.append(f"{path.relative_to(ROOT)} imports {imported}")
    return sorted(set(found))


def test_no_layer_reaches_into_the_engines_private_modules_and_the_engine_stays_pure() -> None:
    assert violations() == []


def test_the_walker_sees_each_kind_of_violation() -> None:
    source = "from ..engine._jobs import x\nfrom . import _tasks\ndef f():\n    import fusion_nb.engine._call\n"
    seen = list(imports(source, "fusion_nb.mcp.tasks", False))
    assert [i for i in seen if private_engine_use("fusion_nb.mcp.tasks", i)] == [
        "fusion_nb.engine._jobs",
        "fusion_nb.engine._jobs.x",
        "fusion_nb.engine._call",
    ]
    inside = list(
        imports(
            "from ._tasks import Task\nfrom ..mcp import server\nimport mcp_types\n", "fusion_nb.engine._app", False
        )
    )
    assert not any(private_engine_use("fusion_nb.engine._app", i) for i in inside)
    assert [i for i in inside if engine_reaches_out("fusion_nb.engine._app", i)] == [
        "fusion_nb.mcp",
        "fusion_nb.mcp.server",
        "mcp_types",
    ]
    assert module_name(ROOT / "widgets" / "status.py") == "fusion_nb.widgets.status"
    assert module_name(PACKAGE / "engine" / "__init__.py") == "fusion_nb.engine"
