"""Keep the teaching notebooks clean: the ``.ipynb`` files are the source, edited in JupyterLab.

``normalize`` rewrites them so that only meaningful changes show in a diff; ``check`` fails
(exit 1, naming each file) when one is not normalised, which ``tests/docs`` runs; ``execute``
re-runs them top to bottom with nbclient, storing the outputs (each view's final state in
its fallbacks, which GitHub, nbviewer and nbconvert show), then normalises them. ``make notebooks`` is ``execute``.

What normalising does, and why:

- the file is what JupyterLab (or Notebook 7) writes when it opens and saves it, so opening
  a committed notebook marks nothing modified: ``kernelspec`` is the ``python3`` one,
  ``language_info`` is the kernel's full record (missing keys filled from this ipykernel,
  a stored ``version`` kept: the kernel of whoever ran it last reported it), and numbers
  are written as JavaScript writes them (``100.0`` is ``100``);
- no widget state is stored: with it, nbconvert and nbviewer render each widget output as
  an empty placeholder for JavaScript from a CDN, and JupyterLab shows an untrusted
  (freshly cloned) notebook's outputs from their fallbacks anyway. Without it every
  reader gets the fallbacks the views put next to the widget (a call view's HTML
  snapshot of its final state, a tool card's text);
- cell metadata keeps ``tags`` only (JupyterLab's timings, collapse and scroll state go);
- execution counts are renumbered 1, 2, 3... over the code cells that ran, as ``execute``
  runs them, so a session of trial and error in JupyterLab leaves no trace;
- consecutive stream outputs of one stream are joined (nbval compares them joined too);
- widget model ids (random per run) become sequential in the order the outputs show them,
  so rebuilding with unchanged widgets changes nothing;
- the absolute path of a printed ``"command"`` (this machine's venv) becomes
  ``/path/to/.venv/bin/...``, and a quoted absolute ``.ipynb`` path ``"/path/to/NAME.ipynb"``;
- secrets are replaced by ``TOKEN``: a bearer token (``%fusion serve`` prints one), a
  ``FUSION_NB_TOKEN`` value or a ``token=`` query value found in an output, everywhere in
  the file. nbval's sanitiser (``tests/notebooks_support/sanitize.cfg``) maps live values the same way.

Outputs of an unattended run never show a person a result that did not happen: a cell whose
outputs hold a form answered by script (notebook 04's refund, "refunded 1250 cents") is
stored without outputs, as a cell not run yet; its outputs are the example run kept in
``tests/notebooks_support/example-run/NAME.json``, the reference nbval compares with
(the repository's ``conftest.py`` reads them). ``check`` fails on a notebook that stores one.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: the outputs of the cells answered by script, by notebook (``NAME.json``: cell id -> count and outputs)
EXAMPLE_RUN = Path(__file__).resolve().parents[1] / "tests" / "notebooks_support" / "example-run"
#: what a form answered by script says (``Prompt.answer_by_script``): nobody approved that result
SCRIPTED = "(answered by script)"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PLACEHOLDER = "TOKEN"
SECRET_PATTERNS = (
    re.compile(r"Bearer(?: token:)?\s+([A-Za-z0-9_\-.~+/]{16,}=*)"),
    re.compile(r"[?&]token=([A-Za-z0-9_\-.~]{16,})"),
    re.compile(r'FUSION_NB_TOKEN(?:\\?"\s*:\s*\\?"|=)([A-Za-z0-9_\-.~]{16,})'),  # in JSON text, quotes are \"
)
#: a printed config's command: ``"command": "/home/me/x/.venv/bin/fusion-nb"`` (quotes escaped in JSON text)
COMMAND = re.compile(r'(\\"command\\": \\")/[^"\\]*/([^/"\\]+\\")')
COMMAND_DIR = "/path/to/.venv/bin/"
#: an absolute notebook path in a printed config (``fusion-nb check``'s stdio entry)
NOTEBOOK_PATH = re.compile(r'(\\")/[^"\\]*/([^/"\\]+\.ipynb\\")')
MODEL_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")


def notebook_paths(names: list[str]) -> list[Path]:
    """The notebooks named (paths, or parts of a file name), or all of ``notebooks/``."""
    every = sorted(NOTEBOOKS.glob("*.ipynb"))
    if not names:
        return every
    chosen = [Path(name) for name in names if Path(name).suffix == ".ipynb" and Path(name).exists()]
    chosen += [path for path in every for name in names if name in path.name and path not in chosen]
    if not chosen:
        raise SystemExit(f"no notebook matches {' '.join(names)} in {NOTEBOOKS}")
    return chosen


def join_streams(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive ``stream`` outputs of the same stream as one output."""
    joined: list[dict[str, Any]] = []
    for output in outputs:
        previous = joined[-1] if joined else None
        if (
            previous is not None
            and output["output_type"] == "stream"
            and previous["output_type"] == "stream"
            and previous["name"] == output["name"]
        ):
            previous["text"] = "".join(previous["text"]) + "".join(output["text"])
        else:
            joined.append(output)
    return joined


def secrets_in(notebook: dict[str, Any]) -> set[str]:
    """Every token value the patterns find in the outputs and widget state (the placeholder excepted).

    Sources and prose are not searched ("Bearer tokens/credentials" is a sentence), but a
    value found is then replaced everywhere.
    """
    stored = [cell.get("outputs", []) for cell in notebook.get("cells", [])], notebook.get("metadata", {})
    text = json.dumps(stored)
    return {match.group(1) for pattern in SECRET_PATTERNS for match in pattern.finditer(text)} - {PLACEHOLDER}


def language_info(stored: dict[str, Any] | None) -> dict[str, Any]:
    """The kernel's ``language_info`` as JupyterLab stores it: this ipykernel's, under what is stored."""
    from ipykernel.ipkernel import IPythonKernel

    return {**copy.deepcopy(IPythonKernel.language_info), **(stored or {})}


def as_javascript(value: Any) -> Any:
    """``value`` with every integral float an int, as a browser's ``JSON.stringify`` writes it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: as_javascript(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_javascript(item) for item in value]
    return value


def shown_model_ids(notebook: dict[str, Any]) -> list[str]:
    """The widget model ids the outputs show, in order (each once)."""
    shown: dict[str, None] = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if isinstance(view, dict) and MODEL_ID.fullmatch(str(view.get("model_id", ""))):
                shown[view["model_id"]] = None
    return list(shown)


def normalize(notebook: dict[str, Any]) -> dict[str, Any]:
    """The normalised form of one notebook (a JSON dict); the input is not modified."""
    nb = as_javascript(copy.deepcopy(notebook))
    nb["nbformat"], nb["nbformat_minor"] = 4, max(nb.get("nbformat_minor", 5), 5)
    stored = nb.get("metadata", {}).get("language_info")
    nb["metadata"] = {"kernelspec": dict(KERNELSPEC), "language_info": language_info(stored)}
    count = 0
    for index, cell in enumerate(nb["cells"]):
        cell.setdefault("id", f"cell-{index}")
        cell["metadata"] = {"tags": cell["metadata"]["tags"]} if cell.get("metadata", {}).get("tags") else {}
        if cell["cell_type"] != "code":
            continue
        ran = cell.get("execution_count") is not None
        count += ran
        cell["execution_count"] = count if ran else None
        cell["outputs"] = join_streams(cell.get("outputs", []))
        for output in cell["outputs"]:
            if output["output_type"] == "execute_result":
                output["execution_count"] = cell["execution_count"]
    text = COMMAND.sub(lambda match: match.group(1) + COMMAND_DIR + match.group(2), json.dumps(nb))
    text = NOTEBOOK_PATH.sub(lambda match: match.group(1) + "/path/to/" + match.group(2), text)
    for secret in sorted(secrets_in(json.loads(text)), key=len, reverse=True):
        text = text.replace(secret, PLACEHOLDER)
    shown = shown_model_ids(json.loads(text))
    renames = {old: f"{number:032x}" for number, old in enumerate(shown, start=1)}
    if renames:
        text = MODEL_ID.sub(lambda match: renames.get(match.group(0), match.group(0)), text)
    normalised: dict[str, Any] = json.loads(text)
    return normalised


def split_example_run(notebook: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(stored, example)``: the cells answered by script, emptied (not run), and their outputs by cell id.

    A newcomer opening the notebook reads a refund nobody approved as this kernel's
    result; the test run still needs those outputs, so they move to the example run.
    """
    stored = copy.deepcopy(notebook)
    example: dict[str, Any] = {}
    for cell in stored["cells"]:
        if cell["cell_type"] == "code" and SCRIPTED in json.dumps(cell.get("outputs", [])):
            example[cell["id"]] = {"execution_count": cell["execution_count"], "outputs": cell["outputs"]}
            cell["execution_count"], cell["outputs"] = None, []
    return stored, example


def example_run_path(path: Path) -> Path:
    """Where the example run of the notebook ``path`` is kept (a notebook elsewhere: next to it)."""
    if path.resolve().parent == NOTEBOOKS:
        return EXAMPLE_RUN / f"{path.stem}.json"
    return path.with_suffix(".example-run.json")


def serialize(notebook: dict[str, Any]) -> str:
    """The file's text, as JupyterLab writes it (nbformat's layout), so saving there changes nothing."""
    text: str = nbformat.writes(nbformat.from_dict(notebook), version=4)  # type: ignore[no-untyped-call]
    return text + "\n"  # jupyter server's nbformat.write ends the file with a newline


def problems(path: Path) -> list[str]:
    """Why ``path`` is not as ``normalize`` would write it (empty when it is)."""
    text = path.read_text()
    found = []
    if secrets_in(json.loads(text)):
        found.append(f"{path.name}: a token is stored in it")
    if serialize(normalize(json.loads(text))) != text:
        found.append(f"{path.name}: not normalised")
    if SCRIPTED in text:
        found.append(f"{path.name}: stores outputs answered by script (make notebooks keeps them aside)")
    return found


async def _shutdown(kernel: Any) -> None:
    """``asyncio.run`` takes a coroutine; jupyter_client types ``shutdown_kernel`` as an awaitable."""
    await kernel.shutdown_kernel(now=True)


def execute(path: Path, timeout: int) -> None:
    """Run ``path`` top to bottom in a fresh kernel (in its folder) and store its outputs.

    The kernel is this interpreter's own ipykernel, never a ``python3`` kernelspec found
    elsewhere on the machine (a user-level one may point at a Python without fusion-nb).
    """
    import asyncio
    import os

    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    # nobody clicks in an unattended run: the forms get the answers a person would give
    os.environ.setdefault("FUSION_NB_ANSWERS", (EXAMPLE_RUN.parent / "answers.json").read_text())
    nb = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    this_python = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[]))
    client = NotebookClient(
        nb,
        km=this_python,
        timeout=timeout,
        store_widget_state=False,  # see "no widget state" in the module docstring
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()
    finally:
        if this_python.has_kernel:
            asyncio.run(_shutdown(this_python))
    stored, example = split_example_run(normalize(nb))
    path.write_text(serialize(normalize(stored)))
    aside = example_run_path(path)
    if example:
        aside.parent.mkdir(parents=True, exist_ok=True)
        aside.write_text(json.dumps(example, indent=1, ensure_ascii=False) + "\n")
    elif aside.exists():
        aside.unlink()


def main(argv: list[str] | None = None) -> int:
    """``normalize`` / ``check`` / ``execute`` [NOTEBOOK ...]; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["normalize", "check", "execute"])
    parser.add_argument("notebooks", nargs="*", help="paths or parts of names (default: every notebook)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell for execute")
    options = parser.parse_args(argv)
    paths = notebook_paths(options.notebooks)
    if options.command == "check":
        found = [problem for path in paths for problem in problems(path)]
        for problem in found:
            print(problem, file=sys.stderr)
        if found:
            print("run: .venv/bin/python scripts/notebooks.py normalize (or make notebooks)", file=sys.stderr)
        return 1 if found else 0
    failed = []
    for path in paths:
        if options.command == "execute":
            started = time.monotonic()
            try:
                execute(path, options.timeout)
            except Exception as error:  # one failing notebook must not stop the others' rebuild
                failed.append(path.name)
                print(f"FAILED {path.name} (left unchanged): {str(error).strip()[-2000:]}", file=sys.stderr)
            else:
                print(f"executed {path.name} in {time.monotonic() - started:.0f} s")
        else:
            text = path.read_text()
            normalised = serialize(normalize(json.loads(text)))
            if normalised != text:
                path.write_text(normalised)
                print("normalised", path.name)
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
