"""The teaching notebooks are tests: a meaningful change to an output must fail nbval,
and Binder's install (binder/requirements.txt, from the repository root) must run them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
QUICKSTART = NOTEBOOKS / "01-quickstart.ipynb"

pytestmark = pytest.mark.kernel


def run_nbval(notebook: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "--rootdir",
            str(notebook.parent),
            "--nbval",
            "--nbval-current-env",
            "--nbval-sanitize-with",
            str(NOTEBOOKS / "sanitize.cfg"),
            str(notebook),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=notebook.parent,
    )


def test_every_notebook_of_the_readme_exists():
    readme = (ROOT / "README.md").read_text()
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert len(names) == 6
    for name in names:
        assert f"notebooks/{name}" in readme, f"README does not list {name}"


def test_a_changed_output_fails_and_the_original_passes(tmp_path):
    original = tmp_path / "original.ipynb"
    changed = tmp_path / "changed.ipynb"
    shutil.copy(QUICKSTART, original)
    nb = json.loads(QUICKSTART.read_text())
    (cell,) = [
        c
        for c in nb["cells"]
        if c["cell_type"] == "code" and c["source"] and "".join(c["source"]).startswith("await math_add(a=40)")
    ]
    (result,) = [o for o in cell["outputs"] if o["output_type"] == "execute_result"]
    assert "".join(result["data"]["text/plain"]) == "42"
    result["data"]["text/plain"] = ["43"]
    changed.write_text(json.dumps(nb))

    assert run_nbval(original).returncode == 0, run_nbval(original).stdout[-3000:]
    failed = run_nbval(changed)
    assert failed.returncode != 0
    assert "43" in failed.stdout and "42" in failed.stdout, failed.stdout[-3000:]
