"""Standard descriptors closed at start (``fusion-nb serve <&-``) read and write the null device instead.

A process started with fd 0, 1 or 2 closed hands that number to the next descriptor
it opens: the event loop's epoll, a socket, the null device opened for a diversion.
The stdio server would then read, write or ``dup2`` over its own loop. Entry points
(the ``fusion-nb`` command, ``python -m fusion_nb.mcp.stdio``) call this first, as a
service manager would have set them up: a closed stdin is empty input (the server ends
at once, exit 0), a closed stdout or stderr discards what is written.
"""

from __future__ import annotations

import os
import sys

_STREAMS = ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY))


def reopen_closed_std_fds() -> None:
    """Point each closed standard descriptor at the null device, and its ``sys`` stream (``None`` then) at it."""
    for fd, name, flags in _STREAMS:
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, flags)  # the lowest free number: ``fd`` (the lower ones are open by now)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:  # (Python sets a stream closed at start to None)
            mode = "r" if flags == os.O_RDONLY else "w"
            # the process's own stream, never closed (as Python's are)
            stream = open(fd, mode, buffering=1 if fd == 2 else -1, closefd=False, encoding="utf-8")  # noqa: SIM115
            setattr(sys, name, stream)
