"""Cost that should follow the work, not the workspace (issue 51): how reads grow with what is held.

Tables: a shared DataFrame of 10^4 .. 10^7 rows read as a resource (CSV, and JSON records)
through the SDK's in-memory client. Each read sends at most the answer bound (1 MiB), so its
time should follow the bytes sent, not the rows held: the ratio column reads each size
against 10^5 rows. Machines here are noisy: read the ratios.
Run: ``.venv/bin/python benchmarks/growth.py [--rounds N] [--max-rows N]``.
"""

from __future__ import annotations

import os
import sys

# benchmarks/mcp.py sits beside this file: as a script, its folder would shadow the SDK package.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse
import statistics
import time

import anyio
import numpy as np
import pandas as pd
from mcp import Client

from fusion_nb import Fusion
from fusion_nb.mcp import mcp_server


def frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"id": np.arange(rows), "score": np.random.default_rng(0).random(rows), "name": np.full(rows, "row", object)}
    )


async def table_reads(sizes: list[int], rounds: int) -> list[tuple[int, str, float, int, str]]:
    """(rows, form, median ms per read, bytes sent, the cut line) for each size and form."""
    app = Fusion("growth")
    for rows in sizes:
        table = frame(rows)
        app.resource(f"data://t{rows}.csv", table)
        app.resource(f"data://t{rows}.json", table, mime_type="application/json")
    found = []
    async with Client(mcp_server(app)) as client:
        for rows in sizes:
            for form in ("csv", "json"):
                uri = f"data://t{rows}.{form}"
                times = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    read = await client.read_resource(uri)
                    times.append(time.perf_counter() - started)
                texts = [getattr(c, "text", "") for c in read.contents]
                sent = sum(len(text.encode()) for text in texts)
                said = texts[-1].rstrip("\n").rsplit("\n", 1)[-1]
                found.append((rows, form, statistics.median(times) * 1000, sent, said[:60]))
    await app.aclose()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-rows", type=int, default=10_000_000)
    args = parser.parse_args()
    sizes = [n for n in (10_000, 100_000, 1_000_000, 10_000_000) if n <= args.max_rows]
    found = anyio.run(table_reads, sizes, args.rounds)
    base = {form: ms for rows, form, ms, *_ in found if rows == 100_000}
    print("| rows held | form | ms per read (median) | vs 10^5 rows | bytes sent | ends with |")
    print("|---:|---|---:|---:|---:|---|")
    for rows, form, ms, sent, said in found:
        ratio = f"{ms / base[form]:.2f}x" if form in base else "-"
        print(f"| {rows:,} | {form} | {ms:.1f} | {ratio} | {sent:,} | {said} |")


if __name__ == "__main__":
    main()
