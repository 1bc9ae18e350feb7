"""The teaching notebooks are tests: a meaningful change to an output must fail nbval,
and Binder's install (binder/requirements.txt, from the repository root) must run them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nbval_run import run_nbval

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
QUICKSTART = NOTEBOOKS / "01-quickstart.ipynb"

pytestmark = pytest.mark.kernel


def test_every_notebook_of_the_readme_exists():
    readme = (ROOT / "README.md").read_text()
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert len(names) >= 6, "the six teaching notebooks, and any added since"
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

    passed = run_nbval(original)
    assert passed.returncode == 0, passed.stdout[-3000:]
    failed = run_nbval(changed)
    assert failed.returncode != 0
    assert "43" in failed.stdout and "42" in failed.stdout, failed.stdout[-3000:]


def test_make_notebooks_stores_outputs_with_every_views_fallback_and_reports_a_failure(tmp_path):
    """``scripts/notebooks.py execute`` (``make notebooks``): a broken notebook is named and left as it was."""
    import nbformat

    good, broken = tmp_path / "good.ipynb", tmp_path / "broken.ipynb"
    for path, cells in (
        (good, ["%load_ext fusion_nb", '%%fusion_tool hello\n"""Say hello."""\nreturn "hi"', "await hello()"]),
        (broken, ["raise ValueError('this notebook is broken')"]),
    ):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
        nbformat.write(nb, path)
    before = broken.read_text()
    tool = [sys.executable, str(ROOT / "scripts" / "notebooks.py")]
    done = subprocess.run([*tool, "execute", str(good), str(broken)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "FAILED broken.ipynb" in done.stderr and "this notebook is broken" in done.stderr
    assert broken.read_text() == before
    assert subprocess.run([*tool, "check", str(good)], capture_output=True).returncode == 0

    executed = json.loads(good.read_text())
    assert "widgets" not in executed["metadata"], "no widget state: nbconvert and nbviewer show the fallbacks"
    shown = [
        output["data"]
        for cell in executed["cells"]
        for output in cell["outputs"]
        if "application/vnd.jupyter.widget-view+json" in output.get("data", {})
    ]
    card, view = shown
    assert "".join(card["text/plain"]).startswith("hello (action, sync)\n  Say hello.")
    assert "".join(view["text/plain"]).startswith("hello: ✔ done 100%"), "the view's final state, not its first"
    assert "✔ done" in "".join(view["text/html"])
    (result,) = [o for o in executed["cells"][2]["outputs"] if o["output_type"] == "execute_result"]
    assert "".join(result["data"]["text/plain"]) == "'hi'"
    assert [cell["execution_count"] for cell in executed["cells"]] == [1, 2, 3]


def test_the_teaching_folder_holds_teaching_material_only():
    """Issue 43: JupyterLab's file browser showed conftest.py, sanitize.cfg and answers.json beside the lessons."""
    shown = sorted(p.name for p in NOTEBOOKS.iterdir() if not p.name.startswith((".", "__")))
    assert [n for n in shown if not n.endswith(".ipynb") and n != "README.md"] == [], shown
