"""``CliError``: a failure the command reports as one sentence (no traceback) and exit status 1."""

from __future__ import annotations


class CliError(Exception):
    """A runtime error for the person at the terminal; ``main`` prints it on stderr and exits 1."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status
