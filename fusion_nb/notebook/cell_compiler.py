"""Compile a ``%%fusion_tool`` cell body into a handler function, from the AST.

The body becomes the body of ``handler(input, ctx)``: ``async def`` when it awaits,
a plain ``def`` (run in a worker thread) when it does not; a generator when it
yields. ``return value`` in a body that also awaits and yields becomes
``yield respond(value); return`` (Python forbids it in async generators). Line
numbers are shifted so that tracebacks and syntax errors point at the cell's own
lines, whose source is registered in ``linecache``.
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Callable
from typing import Any, TypedDict

RESPOND_NAME = "__fusion_respond__"


#: names a cell body may use without importing them (only where the notebook has no such name)
def fusion_names() -> dict[str, Any]:
    import fusion_nb

    return {
        name: getattr(fusion_nb, name)
        for name in (
            "progress",
            "respond",
            "ask",
            "require_input",
            "read_input",
            "input_response",
            "read_request_state",
            "ToolError",
        )
    }


class BodyScan(ast.NodeVisitor):
    """Awaits, yields and valued returns in a tool body's own scope (nested functions and classes excluded).

    What decides a cell's handler kind (``async`` if it awaits, a generator if it yields) and
    which ``return value`` statements become ``respond(value)``; ``fusion-nb export`` uses the
    same rules, so an exported tool has the kind the cell had.
    """

    def __init__(self) -> None:
        self.awaits = self.yields = False
        self.returns: list[ast.Return] = []

    @classmethod
    def of(cls, statements: list[ast.stmt]) -> BodyScan:
        """Scan ``statements`` (a cell body's top level)."""
        scan = cls()
        for statement in statements:
            scan.visit(statement)
        return scan

    def visit_Await(self, node: ast.AST) -> None:
        self.awaits = True
        self.generic_visit(node)

    visit_AsyncFor = visit_AsyncWith = visit_Await

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.awaits = self.awaits or bool(node.is_async)
        self.generic_visit(node)

    def visit_Yield(self, node: ast.AST) -> None:
        self.yields = True
        self.generic_visit(node)

    visit_YieldFrom = visit_Yield

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.returns.append(node)
        self.generic_visit(node)

    def _own_scope_only(self, node: ast.AST) -> None:
        pass

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _own_scope_only


class _ReturnToRespond(ast.NodeTransformer):
    """``return value`` -> ``yield __fusion_respond__(value); return`` in the body's own scope."""

    def visit_Return(self, node: ast.Return) -> Any:
        if node.value is None:
            return node
        call = ast.Call(ast.Name(RESPOND_NAME, ast.Load()), [node.value], [])
        out = [ast.Expr(ast.Yield(call)), ast.Return(None)]
        for stmt in out:
            ast.copy_location(stmt, node)
        return out

    def _skip(self, node: ast.AST) -> ast.AST:
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _skip


def register_source(filename: str, raw: str) -> None:
    """Make the cell's text available to tracebacks (a non-.py name keeps it cached)."""
    linecache.cache[filename] = (len(raw), None, raw.splitlines(True), filename)


class _Span(TypedDict):
    """The source position every synthesised function node carries."""

    lineno: int
    col_offset: int
    end_lineno: int
    end_col_offset: int


def compile_handler(
    body: str, *, function_name: str, filename: str, first_line: int, namespace: dict[str, Any]
) -> tuple[Callable[..., Any], str | None]:
    """Return ``(handler, docstring)`` for ``body``; its line 1 is ``first_line`` of ``filename``.

    ``namespace`` is the notebook's globals (the handler sees later changes to it).
    Raises ``SyntaxError`` with the cell's line number.
    """
    try:
        tree = ast.parse(body, filename=filename)
    except SyntaxError as exc:
        if exc.lineno is not None:
            exc.lineno += first_line - 1
            if exc.end_lineno:
                exc.end_lineno += first_line - 1
        exc.filename = filename
        raise
    ast.increment_lineno(tree, first_line - 1)
    statements = tree.body
    docstring = ast.get_docstring(tree)
    if docstring is not None:
        statements = statements[1:]
    scan = BodyScan.of(statements)
    if scan.awaits and scan.yields:
        statements = [out for stmt in statements for out in _as_list(_ReturnToRespond().visit(stmt))]
    statements = statements or [ast.Pass(lineno=first_line, col_offset=0, end_lineno=first_line, end_col_offset=0)]
    span: _Span = {
        "lineno": first_line,
        "col_offset": 0,
        "end_lineno": max(getattr(s, "end_lineno", first_line) or first_line for s in statements),
        "end_col_offset": 0,
    }

    defaults = {name: value for name, value in fusion_names().items() if name not in namespace}
    defaults[RESPOND_NAME] = fusion_names()["respond"]
    args = ast.arguments(
        posonlyargs=[], args=[ast.arg("input"), ast.arg("ctx")], kwonlyargs=[], kw_defaults=[], defaults=[]
    )
    kind = ast.AsyncFunctionDef if scan.awaits else ast.FunctionDef
    handler = kind(name=function_name, args=args, body=statements, decorator_list=[], returns=None, **span)
    factory_args = ast.arguments(
        posonlyargs=[], args=[ast.arg(n) for n in defaults], kwonlyargs=[], kw_defaults=[], defaults=[]
    )
    factory = ast.FunctionDef(
        name="__fusion_factory__",
        args=factory_args,
        body=[handler, ast.Return(ast.Name(function_name, ast.Load()))],
        decorator_list=[],
        returns=None,
        **span,
    )
    module = ast.fix_missing_locations(ast.Module([factory], type_ignores=[]))
    code = compile(module, filename, "exec", dont_inherit=True)
    scope: dict[str, Any] = {}
    exec(code, namespace, scope)
    fn = scope["__fusion_factory__"](**defaults)
    return fn, docstring


def _as_list(node: Any) -> list[Any]:
    return node if isinstance(node, list) else [node]


def python_name(tool_name: str) -> str:
    """``report.generate`` -> ``report_generate``: the name a cell binds the tool to."""
    name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in tool_name)
    return name if name.isidentifier() else f"tool_{name}"
