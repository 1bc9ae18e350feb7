"""``await app.wait_background()`` as a cell's last line shows nothing (it returns ``True`` for scripts).

The engine's ``wait_background`` returns whether the background settled in time, which
a script checks and a notebook person does not want as a stray ``Out[n]: True``. An
IPython AST transformer rewrites exactly that last statement into
``if not (await ...): print(<why>)``: nothing shows when it settled, one sentence when
it timed out. Nothing else in the cell is touched.
"""

from __future__ import annotations

import ast

TIMED_OUT = "background tasks were still running when wait_background timed out"


class QuietWaitBackground(ast.NodeTransformer):
    """Rewrites a cell whose last statement is ``await <anything>.wait_background(...)``."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        """Only the last statement: the one IPython would display."""
        if node.body and _is_wait_background(node.body[-1]):
            last = node.body[-1]
            assert isinstance(last, ast.Expr)
            warn = ast.Expr(ast.Call(ast.Name("print", ast.Load()), [ast.Constant(TIMED_OUT)], []))
            quiet = ast.If(ast.UnaryOp(ast.Not(), last.value), [warn], [])
            node.body[-1] = ast.fix_missing_locations(ast.copy_location(quiet, last))
        return node


def _is_wait_background(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Await)
        and isinstance(statement.value.value, ast.Call)
        and isinstance(statement.value.value.func, ast.Attribute)
        and statement.value.value.func.attr == "wait_background"
    )
