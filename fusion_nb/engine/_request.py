"""``CallRequest``: one call to make, as data, before it runs.

httpx's ``build_request()`` / ``send()`` is the model: ``app.request(...)`` builds
the request (every option a call can have, checked once), ``app.start(request)``
runs it detached and returns its ``Call``, ``await app.run(request)`` runs it in the
awaiting task (transports). A tuple underneath: immutable, no ``__dict__``, and
made in a fraction of a frozen dataclass's time (it is made for every call).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ._channel import InputChannel
from ._streaming import LogEvent, ProgressEvent


class CallRequest(NamedTuple):
    """A call of ``tool`` with ``arguments``, and who hears and answers it.

    ``on_progress`` hears the call's progress; ``channel`` answers its input requests
    (``None``: the app's ``input_channel``); ``request_info`` is what the app's
    ``context_factory`` reads (a transport's request); ``resume`` is a continuation
    from an earlier input-required result and ``response`` the client's answer to it.
    ``ended_by`` is asked why when the caller's cancellation aborts the call (a
    transport knows: its client disconnected, or cancelled); its answer ends the
    result's sentence. ``on_log`` hears the handler's ``ctx.log`` lines.
    """

    tool: str
    arguments: Mapping[str, Any] | None = None
    on_progress: Callable[[ProgressEvent], None] | None = None
    channel: InputChannel | None = None
    request_info: Any = None
    resume: Mapping[str, Any] | None = None
    response: Any = None
    ended_by: Callable[[], str | None] | None = None
    on_log: Callable[[LogEvent], None] | None = None

    def __repr__(self) -> str:
        return f"<CallRequest {self.tool!r}>"


def bad_request(method: str, what: str) -> TypeError:
    """The one sentence for a request that cannot be built (a host's bug, so it raises)."""
    return TypeError(f"app.{method}(): {what}")
