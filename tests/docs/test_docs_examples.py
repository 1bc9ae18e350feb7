"""The runnable examples of docs/*.md run and print what the docs say they print."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def example(doc: str, marker: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / doc).read_text(), re.S)
    (found,) = [block for block in blocks if marker in block]
    return found


def test_the_content_blocks_example_prints_what_mcp_md_says():
    done = subprocess.run(
        [sys.executable, "-c", example("mcp.md", "ResourceLink(")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['image', 'text', 'resource_link']", "['text', 'resource']"]
    said = (ROOT / "docs" / "mcp.md").read_text()
    assert "prints `['image', 'text', 'resource_link']` and `['text', 'resource']`" in said
