import pytest

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]


async def test_kernel_runs_cells_and_tracks_widgets(kernel):
    cell = await kernel.run(
        "import sys, ipywidgets as w\nb = w.Button(description='Go')\nclicks = []\n"
        "b.on_click(lambda _: clicks.append(1))\ndisplay(b)\nprint(sys.executable)"
    )
    assert ".venv" in cell.stdout
    (button,) = kernel.find_widgets("ButtonModel", description="Go")
    kernel.click(button)
    check = await kernel.run("print(len(clicks))")  # shell messages are handled in order
    assert check.stdout.strip() == "1"
