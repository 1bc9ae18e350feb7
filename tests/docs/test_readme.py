"""README examples are code that runs."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_module_example_runs():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    (example,) = [b for b in blocks if "anyio.run(main)" in b]
    done = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ProgressEvent(percent=30.0, message='rows loaded')",
        "ProgressEvent(percent=90.0, message='charts rendered')",
        "{'quarter': '2026Q3', 'charts': 3}",
    ]


def test_notebook_snippets_match_the_quickstart_notebook():
    import json

    readme = (ROOT / "README.md").read_text()
    cells = [
        "".join(c["source"])
        for c in json.loads((ROOT / "notebooks" / "01-quickstart.ipynb").read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    tool_cell = next(c for c in cells if c.startswith('%%fusion_tool f.query("math.add")'))
    assert tool_cell in readme, "the README's tool cell must be the one notebook 01 runs"
    assert "await math_add(a=40)" in cells


def test_every_picture_the_readme_shows_is_committed():
    """The README's pictures come from the browser test (docs/images holds copies of its screenshots)."""
    import re

    readme = (ROOT / "README.md").read_text()
    pictures = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", readme)
    assert "docs/images/inline-form.png" in pictures
    for picture in pictures:
        if not picture.startswith("http"):
            assert (ROOT / picture).is_file(), picture
            assert (ROOT / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{picture} is not a PNG"
