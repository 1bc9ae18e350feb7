"""`make lab` is a newcomer's first command: it must open notebook 01 with Notebook 7 installed too,
and the README must say where `fusion-nb` is afterwards (no venv is activated for them)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def jupyter_lab_command() -> list[str]:
    """The `jupyter lab` command line `make lab` runs, as `make -n` prints it (nothing is run)."""
    printed = subprocess.run(
        ["make", "-n", "-B", "lab"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    (line,) = [line for line in printed.splitlines() if re.match(r"\S*/jupyter lab\b", line)]
    return shlex.split(line.split("$(")[0])  # the --allow-root clause is a shell test, not an argument


def test_make_lab_opens_notebook_01_inside_the_served_root():
    command = jupyter_lab_command()
    assert command[:2] == [".venv/bin/jupyter", "lab"]
    (root,) = [arg.split("=", 1)[1] for arg in command if arg.startswith("--ServerApp.root_dir=")]
    opened = [arg for arg in command[2:] if not arg.startswith("-")]
    assert opened == ["notebooks/01-quickstart.ipynb"], "a notebook, not the launcher"
    assert (ROOT / opened[0]).is_file() and (ROOT / opened[0]).parent == ROOT / root


def test_the_lab_extra_installs_jupyterlab_and_notebook_7():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!\[ ]", requirement)[0] for requirement in extras["lab"]}
    assert {"jupyterlab", "notebook"} <= names
    assert any(requirement.startswith("notebook>=7") for requirement in extras["lab"])


def test_readme_quick_start_is_two_commands_and_says_where_fusion_nb_is():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()] == ["make lab", "make test"]
    assert ".venv/bin/fusion-nb" in section and "source .venv/bin/activate" in section
    installed = Path(sys.executable).parent / "fusion-nb"
    assert installed.exists(), "pip puts the console script next to the venv's python, where the README says"
