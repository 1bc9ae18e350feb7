"""The .ipynb files are the teaching notebooks' source: committed normalised, with no token.

scripts/notebooks.py normalises them (notebooks/README.md says why each rule exists).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
QUICKSTART = NOTEBOOKS / "01-quickstart.ipynb"


def load_notebooks_tool():
    """scripts/notebooks.py, the normaliser (scripts/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebooks_tool", ROOT / "scripts" / "notebooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_every_committed_notebook_is_normalised_and_holds_no_token(path):
    assert load_notebooks_tool().problems(path) == [], "run: .venv/bin/python scripts/notebooks.py normalize"


def test_the_check_command_fails_on_a_notebook_saved_by_jupyterlab(tmp_path):
    """Timings (recordTiming) and widget state (saveState) are what a JupyterLab session adds: both go."""
    saved = json.loads(QUICKSTART.read_text())
    saved["cells"][1]["metadata"]["execution"] = {"iopub.execute_input": "2026-11-30T09:39:35.299491Z"}
    saved["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    path = tmp_path / "01-quickstart.ipynb"
    path.write_text(json.dumps(saved, indent=1))
    check = [sys.executable, str(ROOT / "scripts" / "notebooks.py"), "check", str(path)]
    failed = subprocess.run(check, capture_output=True, text=True)
    assert failed.returncode == 1 and "01-quickstart.ipynb: not normalised" in failed.stderr
    tool = load_notebooks_tool()
    assert tool.main(["normalize", str(path)]) == 0
    assert tool.problems(path) == []
    assert path.read_text() == QUICKSTART.read_text()


def test_language_info_is_the_kernels_full_record_and_a_stored_version_is_kept():
    """JupyterLab writes the kernel's whole language_info; rewriting its version would be a diff on every save."""
    tool = load_notebooks_tool()
    reduced = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"language_info": {"name": "python"}}, "cells": []}
    info = tool.normalize(reduced)["metadata"]["language_info"]
    assert {"name", "version", "mimetype", "codemirror_mode", "pygments_lexer", "file_extension"} <= set(info)
    other = {**info, "version": "3.12.1"}
    kept = tool.normalize({**reduced, "metadata": {"language_info": other}})
    assert kept["metadata"]["language_info"] == other


def test_numbers_are_written_as_a_browser_writes_them():
    tool = load_notebooks_tool()
    data = {"application/json": {"percent": 100.0, "rate": 0.5, "count": 3}, "text/plain": "x"}
    output = {"output_type": "display_data", "metadata": {}, "data": data}
    cell = {"cell_type": "code", "id": "c", "execution_count": 1, "metadata": {}, "source": "", "outputs": [output]}
    normalised = tool.normalize({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]})
    shown = normalised["cells"][0]["outputs"][0]["data"]["application/json"]
    assert shown == {"percent": 100, "rate": 0.5, "count": 3} and isinstance(shown["percent"], int)


def widget_notebook(token: str) -> dict:
    """A small executed notebook: a token in a stream, widget views and their stored state."""
    first, second = "a" * 32, "b" * 32
    state = {
        second: {"model_name": "HBoxModel", "state": {"children": [f"IPY_MODEL_{first}"]}},
        first: {"model_name": "HTMLModel", "state": {"value": f"Bearer {token}"}},
    }
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": second}, "text/plain": "<view>"}
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3"},
            "widgets": {"application/vnd.jupyter.widget-state+json": {"state": state}},
        },
        "cells": [
            {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": "Bearer tokens/credentials are secrets."},
            {
                "cell_type": "code",
                "id": "c1",
                "execution_count": 17,
                "metadata": {"scrolled": True, "tags": ["keep"]},
                "source": "%fusion serve",
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": f"Bearer token: {token}\n"},
                    {"output_type": "stream", "name": "stdout", "text": "?token=" + token + "\n"},
                    {"output_type": "execute_result", "execution_count": 17, "metadata": {}, "data": view},
                ],
            },
        ],
    }


def test_normalising_removes_tokens_everywhere_and_numbers_what_varies():
    tool = load_notebooks_tool()
    token = "4r8VPif_8Ypv5RuGO2bIOEpX0SrhM--gibfvbZc6Yio"
    normalised = tool.normalize(widget_notebook(token))
    text = json.dumps(normalised)
    assert token not in text
    prose, cell = normalised["cells"]
    assert prose["source"] == "Bearer tokens/credentials are secrets."
    assert cell["execution_count"] == 1 and cell["outputs"][-1]["execution_count"] == 1
    assert cell["metadata"] == {"tags": ["keep"]}
    assert cell["outputs"][0]["text"] == "Bearer token: TOKEN\n?token=TOKEN\n"
    assert "widgets" not in normalised["metadata"], "no widget state: readers get the views' fallbacks"
    assert cell["outputs"][-1]["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] == f"{1:032x}"
    assert tool.normalize(normalised) == normalised


def test_a_printed_config_loses_its_token_and_this_machines_path():
    tool = load_notebooks_tool()
    token = "Zq9VPif_8Ypv5RuGO2bIOEpX0SrhM--gibfvbZc6Yio"
    printed = (
        '{"mcpServers": {"fusion-nb": {"command": "/home/ada/src/fusion-nb/.venv/bin/fusion-nb",\n'
        f'  "args": ["connect", "http://127.0.0.1:8765/mcp"], "env": {{"FUSION_NB_TOKEN": "{token}"}}}}}}}}\n'
        '{"args": ["serve", "/home/ada/src/reports.ipynb"]}\n'
    )
    output = {"output_type": "stream", "name": "stdout", "text": printed}
    cell = {"cell_type": "code", "id": "c", "execution_count": 1, "metadata": {}, "source": "", "outputs": [output]}
    normalised = tool.normalize({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]})
    text = normalised["cells"][0]["outputs"][0]["text"]
    assert token not in text and '"FUSION_NB_TOKEN": "TOKEN"' in text
    assert '"command": "/path/to/.venv/bin/fusion-nb"' in text and '"/path/to/reports.ipynb"' in text
    assert "/home/ada" not in text


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"BINDER_LAUNCH_HOST": "https://mybinder.org/"}, "runs on Binder or JupyterHub (BINDER_LAUNCH_HOST is set)"),
        ({"JUPYTERHUB_API_URL": "http://hub:8081/hub/api"}, "they use the URL printed 'Through the Jupyter server'"),
        ({}, "runs on this machine"),
    ],
)
def test_notebook_05_tells_binder_visitors_which_url_outside_agents_reach(environment, expected, monkeypatch, capsys):
    nb = json.loads((NOTEBOOKS / "05-serving-to-agents.ipynb").read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    (cell,) = [source for source in sources if "HOSTED_MARKERS" in source]
    for name in ("BINDER_LAUNCH_HOST", "BINDER_REQUEST", "BINDER_SERVICE_HOST", "JUPYTERHUB_API_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    exec(cell, {})
    assert expected in capsys.readouterr().out


def test_the_sanitizer_replaces_every_shown_task_id_whatever_its_first_character():
    """Task ids are ``secrets.token_urlsafe``: one in 64 begins with ``-`` (a clean-clone CI run showed one)."""
    import configparser
    import re

    config = configparser.ConfigParser()
    config.read(Path(__file__).resolve().parents[1] / "notebooks_support" / "sanitize.cfg")
    rule = config["task-id"]
    for shown in ("-zSiPKMn", "_aBcDeFg", "aBcD-e_f"):
        cell = f"<td style='text-align:left'>{shown}…</td>"
        assert re.sub(rule["regex"], rule["replace"], cell) == "<td style='text-align:left'>TASK…</td>"


def test_outputs_answered_by_script_are_kept_aside_not_shown(tmp_path):
    """Issue 43: notebook 04 read "refunded 1250 cents ... (answered by script)" before anything ran."""
    tool = load_notebooks_tool()
    answered = {
        "output_type": "display_data",
        "metadata": {},
        "data": {"text/html": "✔ Submitted (answered by script)"},
    }
    value = {"output_type": "execute_result", "execution_count": 2, "metadata": {}, "data": {"text/plain": "'ok'"}}
    plain = {"output_type": "stream", "name": "stdout", "text": "hello\n"}
    cells = [
        {"cell_type": "code", "id": "a", "execution_count": 1, "metadata": {}, "source": "", "outputs": [plain]},
        {
            "cell_type": "code",
            "id": "b",
            "execution_count": 2,
            "metadata": {},
            "source": "",
            "outputs": [answered, value],
        },
    ]
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    stored, example = tool.split_example_run(nb)
    assert stored["cells"][0]["outputs"] == [plain], "outputs of a real run stay"
    assert stored["cells"][1]["outputs"] == [] and stored["cells"][1]["execution_count"] is None, "shown as not run"
    assert example == {"b": {"execution_count": 2, "outputs": [answered, value]}}
    path = tmp_path / "n.ipynb"
    path.write_text(tool.serialize(tool.normalize(nb)))
    assert any("answered by script" in problem for problem in tool.problems(path))
    path.write_text(tool.serialize(tool.normalize(stored)))
    assert tool.problems(path) == []
