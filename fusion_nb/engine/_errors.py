"""Tool errors: one exception type carrying a stable code, shown to clients as one sentence.

The framework's own errors are built by the factories at the end of this module, so
each sentence is written once and every caller says the same thing.
"""

from __future__ import annotations

import difflib
import secrets
from collections.abc import Iterable
from typing import Any

INVALID_INPUT = "INVALID_INPUT"
UNKNOWN_TOOL = "UNKNOWN_TOOL"
CANCELLED = "CANCELLED"
TIMEOUT = "TIMEOUT"
SERVER_BUSY = "SERVER_BUSY"
ELICITATION_UNSUPPORTED = "ELICITATION_UNSUPPORTED"
ELICITATION_ROUNDS_EXCEEDED = "ELICITATION_ROUNDS_EXCEEDED"
INVALID_ANSWER = "INVALID_ANSWER"
DECLINED = "DECLINED"
INTERNAL_ERROR = "INTERNAL_ERROR"


class ToolError(Exception):
    """Raise from a handler to return an error result (``isError: true``) to the caller.

    ``code`` is a short stable identifier clients can branch on; ``message`` is one
    sentence for a person; ``recovery`` says what to do about it. The message is the
    author's and reaches the client unchanged, so it must not hold secrets::

        if not invoice.refundable:
            raise ToolError(
                "NOT_REFUNDABLE",
                f"Invoice {invoice.id} was paid more than 90 days ago.",
                recovery="Open a support ticket instead.",
            )
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        recovery: str | None = None,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.recovery = recovery
        self.details = details
        self.retry_after = retry_after

    def __str__(self) -> str:
        text = f"[{self.code}] {self.message}"
        if self.recovery:
            text += f" Recovery: {self.recovery}"
        if self.retry_after is not None:
            text += f" Retry after {self.retry_after:g} s."
        return text

    def __repr__(self) -> str:
        return f"ToolError({self.code!r}, {self.message!r})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON-compatible form sent to clients as structured content."""
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.recovery is not None:
            data["recovery"] = self.recovery
        if self.details is not None:
            data["details"] = self.details
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        return data


class Aborted(Exception):
    """Raised by ``ctx.signal.raise_if_aborted()`` once the call was aborted.

    It is an ordinary exception (not a cancellation) so that it also works inside
    worker threads running sync handlers.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"call aborted: {reason}")
        self.reason = reason


# -- the framework's own errors ---------------------------------------------------------


def new_error_id() -> str:
    """A short id that ties an INTERNAL_ERROR a client saw to its traceback in the log."""
    return secrets.token_hex(4)


def internal_error(tool_name: str, exc: BaseException, error_id: str) -> ToolError:
    """What a client learns of an unexpected exception: its class and an id, never its text.

    ``str(exc)`` often holds paths, hosts or data (``[Errno 2] No such file ...
    '/srv/acme/secrets/db.ini'``); the log has it, under the same id.
    """
    kind = type(exc).__name__
    return ToolError(
        INTERNAL_ERROR,
        f'Tool "{tool_name}" failed with {kind} (error id {error_id}).',
        recovery="This may be a bug in the tool or a transient failure; retrying may help. "
        "The server log has the details under the error id.",
        details={"exception": kind, "error_id": error_id},
    )


def abort_error(tool_name: str, reason: str, timeout: float | None, because: str | None = None) -> ToolError:
    """The result of an aborted call: TIMEOUT when its timer fired, CANCELLED otherwise (``because``: why)."""
    if reason == TIMEOUT:
        return ToolError(
            TIMEOUT,
            f'Tool "{tool_name}" did not finish within its {timeout or 0:g} s timeout.',
            recovery="Retry with a smaller request, or raise the tool's timeout.",
        )
    return ToolError(
        CANCELLED,
        f'The call to tool "{tool_name}" was cancelled before it finished' + (f": {because}." if because else "."),
        recovery="Call the tool again if you still need its result.",
    )


def did_you_mean(name: str, choices: Iterable[str]) -> str | None:
    """The choice closest to a mistyped ``name`` (``with_integr`` -> ``with_integer``), or ``None``."""
    if len(name) > 200:  # (difflib is quadratic: a pasted paragraph is no typo)
        return None
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def no_such_attribute(owner: str, what: str, name: str, choices: Iterable[str], prefix: str = ".") -> AttributeError:
    """``ask has no field kind "integr" (did you mean ask.integer?)``: a mistyped name as one sentence."""
    public = sorted(c for c in choices if not c.startswith("_"))
    near = did_you_mean(name, public)
    hint = f"did you mean {prefix}{near}?" if near else f"the {what}s are {', '.join(public)}"
    error = AttributeError(f'{owner} has no {what} "{name}" ({hint})')
    error.name = name
    return error


def unknown_tool(name: str, known: Iterable[str]) -> ToolError:
    """A call to a name the app does not have: the near name if one is, else (a bounded number of) the names."""
    names = sorted(known)
    listed = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    shown = name if len(name) <= 60 else name[:57] + "..."
    near = did_you_mean(name, names)
    hint = f'did you mean "{near}"? ' if near else ""
    return ToolError(
        UNKNOWN_TOOL,
        f'There is no tool named "{shown}" ({hint}available tools: {listed or "none"}).',
        recovery="Call tools/list and use one of the listed names.",
        details={"tool": shown},
    )


def server_busy(tool_name: str, active: int, queued: int) -> ToolError:
    """A call refused because the tool's concurrency limit and queue are full."""
    return ToolError(
        SERVER_BUSY,
        f'Tool "{tool_name}" is at capacity ({active} active, {queued} queued).',
        recovery="Retry after a short delay, or make fewer concurrent calls to this tool.",
        details={"active": active, "queued": queued},
        retry_after=1,
    )


def threads_busy(tool_name: str, abandoned: int, limit: int) -> ToolError:
    """A sync call refused while this tool's aborted calls still occupy the abandoned-thread pool."""
    return ToolError(
        SERVER_BUSY,
        f'Tool "{tool_name}" has {abandoned} cancelled calls whose threads are still running '
        f"(the app allows {limit} such threads); it takes new calls once they end.",
        recovery="Retry later; the tool's author can make its body check ctx.signal.aborted and stop early.",
        details={"abandoned_threads": abandoned, "limit": limit},
        retry_after=1,
    )


def rounds_exceeded(tool_name: str, limit: int) -> ToolError:
    """A call that asked for input more often than its round cap allows."""
    return ToolError(
        ELICITATION_ROUNDS_EXCEEDED,
        f'Tool "{tool_name}" asked for input more than {limit} times in one call.',
        recovery="Answer fewer follow-up questions per call, or raise the tool's max_rounds.",
    )


class NoWayToAsk(ToolError):
    """``ELICITATION_UNSUPPORTED`` because this caller cannot answer the ``kind`` of request asked
    (``elicit``, ``url``, ``sample``, ``roots``): a protocol adapter may say which capability is missing."""

    def __init__(self, kind: str, message: str, recovery: str) -> None:
        super().__init__(ELICITATION_UNSUPPORTED, message, recovery=recovery)
        self.kind = kind


def no_way_to_ask(tool_name: str, message: str, kind: str = "elicit") -> NoWayToAsk:
    """A call that needs input from a caller that cannot ask anybody: fails at once, never hangs."""
    shown = message if len(message) <= 80 else message[:77] + "..."
    if kind == "sample":
        return NoWayToAsk(
            kind,
            f'Tool "{tool_name}" asks the client\'s model ({shown!r}) but this caller declared no sampling.',
            "Call it from an MCP client that supports sampling.",
        )
    if kind == "roots":
        return NoWayToAsk(
            kind,
            f'Tool "{tool_name}" asks for the client\'s roots but this caller declared no roots.',
            "Call it from an MCP client that declares its roots.",
        )
    return NoWayToAsk(
        kind,
        f'Tool "{tool_name}" needs input ({shown!r}) but this caller has no way to ask for it.',
        "Call it from a client that supports elicitation, or give scripted answers.",
    )


def refused_again(tool_name: str, message: str, action: str) -> ToolError:
    """A handler asking again for an answer the person declined or dismissed in this call.

    A person's "no" ends the question: without this rule a handler that tests
    ``read_input(key) is None`` shows the same form after every Decline until somebody
    stops the call. A decline is the person's answer (``DECLINED``); a dismissal ends the
    call as cancelled (``CANCELLED``), as the Stop button would.
    """
    shown = message if len(message) <= 80 else message[:77] + "..."
    if action == "decline":
        return ToolError(
            DECLINED,
            f'Tool "{tool_name}": the person declined {shown!r}, so the call ends without asking again.',
            recovery="Call the tool again if they change their mind.",
        )
    return ToolError(
        CANCELLED,
        f'Tool "{tool_name}": the person dismissed {shown!r} without answering, so the call ends.',
    )


def invalid_answer(tool_name: str, problems: list[str]) -> ToolError:
    """An answer that does not fit the requested form, from a channel that cannot re-ask."""
    return ToolError(
        INVALID_ANSWER,
        f'Invalid answer for tool "{tool_name}": ' + "; ".join(problems) + ".",
        recovery="Answer again with values that match the requested fields.",
        details={"errors": problems},
    )


def bad_action(tool_name: str, action: object) -> ToolError:
    """An answer whose action is none of accept, decline, cancel."""
    shown = repr(action)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ToolError(
        INVALID_ANSWER,
        f'Tool "{tool_name}" got an answer with action {shown}; expected accept, decline or cancel.',
    )
