"""The abort signal every call owns: aborted once, observed at every stage."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from ._background import Event, new_event
from ._errors import Aborted

log = logging.getLogger("fusion_nb")


class Owner(Protocol):
    """Whom a signal belongs to (a ``Call``), named in log records."""

    @property
    def id(self) -> str: ...

    @property
    def tool_name(self) -> str: ...


class AbortSignal:
    """One-shot abort flag with an awaitable event and callbacks.

    ``aborted`` is a plain attribute, so worker threads may poll it cheaply.
    ``abort`` must be called on the event loop thread. A callback that raises is
    logged (naming ``label``, e.g. the call it belongs to) and never stops the others
    or the abort itself.
    """

    __slots__ = ("_callbacks", "_event", "_owner", "aborted", "reason")

    def __init__(self, owner: Owner | None = None) -> None:
        self.aborted = False
        self.reason: str | None = None
        self._owner = owner  # (the call: its id and tool name, formatted only when a log record needs it)
        self._event: Event | None = None
        self._callbacks: list[Callable[[str], None]] | None = None  # made by the first ``on_abort``

    def abort(self, reason: str) -> bool:
        """Abort with ``reason`` (an error code); returns False if already aborted."""
        if self.aborted:
            return False
        self.aborted = True
        self.reason = reason
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for callback in callbacks:
                self._run(callback, reason)
        return True

    def on_abort(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Run ``callback(reason)`` on abort (at once if already aborted); returns an undo."""
        if self.aborted:
            self._run(callback, self.reason or "")
            return _noop
        if self._callbacks is None:
            self._callbacks = []
        self._callbacks.append(callback)

        def remove() -> None:
            if self._callbacks is not None:
                with contextlib.suppress(ValueError):
                    self._callbacks.remove(callback)

        return remove

    @property
    def label(self) -> str:
        """Who owns the signal, for log records (``call 7 of tool "sync"``)."""
        if self._owner is None:
            return "a signal"
        return f'call {self._owner.id} of tool "{self._owner.tool_name}"'

    def _run(self, callback: Callable[[str], None], reason: str) -> None:
        try:
            callback(reason)
        except Exception:
            log.exception("fusion-nb: an abort callback of %s failed", self.label)

    async def wait(self) -> str:
        """Wait until aborted; returns the reason."""
        if not self.aborted:
            if self._event is None:
                self._event = new_event()
            await self._event.wait()
        return self.reason or ""

    def raise_if_aborted(self) -> None:
        """Raise ``Aborted`` if the call was aborted: a cheap checkpoint for handlers and threads."""
        if self.aborted:
            raise Aborted(self.reason or "")

    def __repr__(self) -> str:
        return f"<AbortSignal aborted={self.aborted} reason={self.reason!r}>"


def _noop() -> None:
    pass
