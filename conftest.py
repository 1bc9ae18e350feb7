"""Unattended runs of the teaching notebooks answer their forms by script.

The plumbing lives here and in ``tests/notebooks_support/`` so that ``notebooks/``, the
folder JupyterLab opens, holds teaching material only.

The notebooks ask with inline forms, as a person uses them. Under nbval nobody clicks, so
the answers a person would give live in ``tests/notebooks_support/answers.json`` and reach
each notebook's kernel as ``FUSION_NB_ANSWERS`` (the forms still show, filled in and marked
"answered by script"). nbval starts a notebook's kernel while its first cell is set up, so
the variable is set around the setup of the notebooks' cells only: no other test's process
or kernel sees it. ``scripts/notebooks.py execute`` reads the same file.

The cells answered by script are stored without outputs (a newcomer must not read a
refund nobody approved); nbval compares them with their example run, kept aside in
``tests/notebooks_support/example-run/NAME.json`` (``scripts/notebooks.py``).
"""

import json
import os
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"
SUPPORT = Path(__file__).resolve().parent / "tests" / "notebooks_support"
ANSWERS = (SUPPORT / "answers.json").read_text()
EXAMPLE_RUN = SUPPORT / "example-run"


def _teaching_cell(item):
    """The nbval cell of a teaching notebook this checkout holds, else ``None``."""
    cell = getattr(item, "cell", None)
    return cell if cell is not None and Path(str(item.fspath)).resolve().parent == NOTEBOOKS else None


def pytest_collection_modifyitems(items):
    """An nbval cell stored without outputs gets its example run's as the reference."""
    for item in items:
        cell = _teaching_cell(item)
        aside = EXAMPLE_RUN / f"{Path(str(item.fspath)).stem}.json"
        if cell is None or cell.outputs or not aside.exists():
            continue
        example = json.loads(aside.read_text()).get(cell.get("id"))
        if example is not None:
            cell.execution_count = example["execution_count"]
            cell.outputs = [nbformat.from_dict(_joined(output)) for output in example["outputs"]]


def _joined(output):
    """An output as nbformat reads it: text stored as a list of lines is one string."""
    output = dict(output)
    if isinstance(output.get("text"), list):
        output["text"] = "".join(output["text"])
    if "data" in output:
        output["data"] = {k: "".join(v) if isinstance(v, list) else v for k, v in output["data"].items()}
    return output


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if _teaching_cell(item) is None:
        return (yield)
    before = os.environ.get("FUSION_NB_ANSWERS")
    os.environ["FUSION_NB_ANSWERS"] = before if before is not None else ANSWERS
    try:
        return (yield)
    finally:
        if before is None:
            del os.environ["FUSION_NB_ANSWERS"]
