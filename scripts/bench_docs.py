"""Regenerate the benchmark tables in the docs from a fresh run of the benchmark that prints them.

Figures quoted by hand rot: a re-run contradicted six rows of ``docs/mcp.md`` and the
CHANGELOG within a week. So every figure in the docs lives in a generated block that
names its command and the day it ran::

    <!-- benchmark: benchmarks/http.py --rounds 2 -->
    ...whatever that command printed, with a line saying when and where...
    <!-- end benchmark -->

``python scripts/bench_docs.py`` re-runs each block's command (with this interpreter,
from the repository root) and writes its output between the markers;
``--check`` only verifies the blocks are well formed (``tests/docs/test_bench_docs.py``
runs it, with a scan for figures written outside any block); ``--only http.py`` re-runs
the blocks of one benchmark. Machines are noisy: read the ratios, not the microseconds.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "docs").glob("*.md")

BLOCK = re.compile(r"(<!-- benchmark: (?P<command>[^>]*?) -->\n)(?P<body>.*?)(<!-- end benchmark -->)", re.S)
OPEN = "<!-- benchmark:"
CLOSE = "<!-- end benchmark -->"
#: the line a generated block ends its body with: when, on what, how to reproduce
STAMP = re.compile(r"^_Measured on \d{4}-\d{2}-\d{2} .*, by `python [^`]+`\._$", re.M)
#: what a benchmark figure looks like in prose: a duration, a rate or a ratio
#: (a millisecond figure is as often a setting, "pauses 20 ms", so only these count)
FIGURE = re.compile(r"\b\d[\d,.]*\s?(?:µs|calls/s)|\b\d+\.\d+x\b|\b\d+(?:\.\d+)?-\d+(?:\.\d+)?x\b")


@dataclass(frozen=True)
class Block:
    """One generated block of a page: the command that prints it and what it holds now."""

    page: Path
    command: str
    body: str

    @property
    def script(self) -> Path:
        return ROOT / shlex.split(self.command)[0]


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(page, match["command"], match["body"]) for match in BLOCK.finditer(text)]


def problems(page: Path) -> list[str]:
    """What is wrong with a page's blocks, and every figure written outside them (one line each)."""
    text = page.read_text(encoding="utf-8")
    found = []
    if text.count(OPEN) != text.count(CLOSE) or text.count(OPEN) != len(BLOCK.findall(text)):
        found.append(f"{page.name}: a benchmark block is not closed by {CLOSE!r}")
    for block in blocks(page):
        if not block.script.is_file() or block.script.parent.name != "benchmarks":
            found.append(f"{page.name}: block command {block.command!r} is not a script in benchmarks/")
        if not STAMP.search(block.body):
            found.append(f"{page.name}: block {block.command!r} has no '_Measured on DATE ..., by `python ...`._' line")
    outside = BLOCK.sub("", text)
    outside = re.sub(r"```.*?```", "", outside, flags=re.S)  # code samples may print anything
    for line in outside.splitlines():
        for figure in FIGURE.findall(line):
            found.append(f"{page.name}: figure {figure!r} outside a generated block: {line.strip()[:100]}")
    return found


def stamp(command: str) -> str:
    day = datetime.date.today().isoformat()
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return f"_Measured on {day} ({machine}), by `python {command}`._"


def regenerate(page: Path, only: str | None) -> int:
    """Re-run each block's command and write its output back; the number of blocks rewritten."""
    text = page.read_text(encoding="utf-8")
    rewritten = 0

    def run(match: re.Match[str]) -> str:
        nonlocal rewritten
        command = match["command"]
        if only is not None and Path(shlex.split(command)[0]).name != only:
            return match[0]
        print(f"running {command} for {page.name} ...", file=sys.stderr, flush=True)
        printed = subprocess.run(
            [sys.executable, *shlex.split(command)], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout.strip()
        rewritten += 1
        if not printed.startswith(("#", "|")):  # plain text keeps its columns in a fence
            printed = f"```text\n{printed}\n```"
        return f"{match[1]}{printed}\n\n{stamp(command)}\n{match[4]}"

    page.write_text(BLOCK.sub(run, text), encoding="utf-8")
    return rewritten


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the blocks and figures, run nothing")
    parser.add_argument("--only", help="re-run only the blocks of this benchmark script (e.g. http.py)")
    args = parser.parse_args()
    pages = sorted(DOCS)
    if args.check:
        found = [line for page in pages for line in problems(page)]
        print("\n".join(found) or "benchmark blocks: ok")
        return 1 if found else 0
    total = sum(regenerate(page, args.only) for page in pages)
    print(f"{total} benchmark block(s) regenerated", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
