"""The pure engine: tools, calls, streaming and cancellation (anyio only)."""

from .app import Fusion
from .ask import AskField, ask
from .builder import BuilderFactory, ToolBuilder
from .call import Call
from .channel import DEFER, DeferToClient, InputChannel, NoChannel, ScriptedAnswers
from .context import Context
from .errors import (
    CANCELLED,
    ELICITATION_ROUNDS_EXCEEDED,
    ELICITATION_UNSUPPORTED,
    INTERNAL_ERROR,
    INVALID_ANSWER,
    INVALID_INPUT,
    SERVER_BUSY,
    TIMEOUT,
    UNKNOWN_TOOL,
    Aborted,
    ToolError,
)
from .interactive import InputRequest, InputResponse, input_response, read_input, read_request_state, require_input
from .result import CallResult
from .signal import AbortSignal
from .streaming import ProgressEvent, Respond, progress, respond
from .tool import Tool

__all__ = [
    "CANCELLED",
    "DEFER",
    "ELICITATION_ROUNDS_EXCEEDED",
    "ELICITATION_UNSUPPORTED",
    "INTERNAL_ERROR",
    "INVALID_ANSWER",
    "INVALID_INPUT",
    "SERVER_BUSY",
    "TIMEOUT",
    "UNKNOWN_TOOL",
    "AbortSignal",
    "Aborted",
    "AskField",
    "BuilderFactory",
    "Call",
    "CallResult",
    "Context",
    "DeferToClient",
    "Fusion",
    "InputChannel",
    "InputRequest",
    "InputResponse",
    "NoChannel",
    "ProgressEvent",
    "Respond",
    "ScriptedAnswers",
    "Tool",
    "ToolBuilder",
    "ToolError",
    "ask",
    "input_response",
    "progress",
    "read_input",
    "read_request_state",
    "require_input",
    "respond",
]
