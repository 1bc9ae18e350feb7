"""ipywidgets views of fusion-nb calls and tools (built by the widgets issue)."""
