"""The docs quote benchmark figures only inside blocks a benchmark run wrote (scripts/bench_docs.py)."""

from __future__ import annotations

import importlib.util
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_docs", ROOT / "scripts" / "bench_docs.py")
assert _spec is not None and _spec.loader is not None
bench_docs = importlib.util.module_from_spec(_spec)
sys.modules["bench_docs"] = bench_docs
_spec.loader.exec_module(bench_docs)


def test_every_page_quotes_figures_only_from_a_dated_generated_block() -> None:
    found = [line for page in sorted((ROOT / "docs").glob("*.md")) for line in bench_docs.problems(page)]
    assert found == []


def test_a_figure_written_by_hand_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("The 2025 wire is 4.0-4.1x the SDK's, p50 542 µs, 1.95x FastMCP.\n", encoding="utf-8")
    found = bench_docs.problems(page)
    assert [line.split("figure ")[1].split(" outside")[0] for line in found] == ["'4.0-4.1x'", "'542 µs'", "'1.95x'"]


def test_a_block_without_its_stamp_or_end_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- benchmark: benchmarks/http.py -->\n| a | 1.5x |\n<!-- end benchmark -->\n", encoding="utf-8")
    assert any("has no '_Measured on" in line for line in bench_docs.problems(page))
    page.write_text("<!-- benchmark: benchmarks/http.py -->\nno end\n", encoding="utf-8")
    assert any("is not closed" in line for line in bench_docs.problems(page))
    page.write_text("<!-- benchmark: rm -rf / -->\n<!-- end benchmark -->\n", encoding="utf-8")
    assert any("is not a script in benchmarks/" in line for line in bench_docs.problems(page))


def test_a_stamped_block_may_hold_any_figure(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    stamp = bench_docs.stamp("benchmarks/http.py --rounds 1")
    body = f"| x | 2.20x | 293 µs |\n\n{stamp}\n"
    page.write_text(f"<!-- benchmark: benchmarks/http.py --rounds 1 -->\n{body}<!-- end benchmark -->\n")
    assert bench_docs.problems(page) == []


def figures_in_source(path: Path) -> list[str]:
    """Each benchmark figure in ``path``'s docstrings, strings and comments (``bench_docs.FIGURE``), one line each."""
    found = []
    with path.open("rb") as source:
        for token in tokenize.tokenize(source.readline):
            if token.type in (tokenize.STRING, tokenize.COMMENT):
                for figure in bench_docs.FIGURE.findall(token.string):
                    found.append(f"{path.relative_to(path.parents[1])}:{token.start[0]}: {figure!r}")
    return found


def test_no_docstring_or_comment_in_the_package_quotes_a_benchmark_figure() -> None:
    """A docstring says why and names the benchmark that measures it: a figure there rots (it did)."""
    modules = sorted((ROOT / "fusion_nb").rglob("*.py"))
    assert len(modules) > 50
    assert [line for path in modules for line in figures_in_source(path)] == []


def test_a_figure_in_a_docstring_is_found(tmp_path: Path) -> None:
    module = tmp_path / "pkg" / "fast.py"
    module.parent.mkdir()
    module.write_text('"""Why: the SDK\'s plumbing (p50 293 µs, 5.6x the SDK\'s calls/s).\n\nNo figure: 1 MiB."""\n')
    assert figures_in_source(module) == ["pkg/fast.py:1: '293 µs'", "pkg/fast.py:1: '5.6x'"]
