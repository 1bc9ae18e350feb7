"""Unattended runs of the teaching notebooks answer their forms by script.

The notebooks ask with inline forms, as a person uses them. Under nbval nobody clicks, so
the answers a person would give live in ``answers.json`` and reach each notebook's kernel
as ``FUSION_NB_ANSWERS`` (the forms still show, filled in and marked "answered by
script"). nbval starts a notebook's kernel while its first cell is set up, so the variable
is set around the setup of the notebooks' cells only: no other test's process or kernel
sees it. ``scripts/notebooks.py execute`` reads the same file.
"""

import os
from pathlib import Path

import pytest

ANSWERS = (Path(__file__).parent / "answers.json").read_text()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    before = os.environ.get("FUSION_NB_ANSWERS")
    os.environ["FUSION_NB_ANSWERS"] = before if before is not None else ANSWERS
    try:
        return (yield)
    finally:
        if before is None:
            del os.environ["FUSION_NB_ANSWERS"]
