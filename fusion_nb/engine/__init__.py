"""The pure engine: tools, calls, streaming and cancellation (anyio only)."""

from .app import Fusion
from .builder import BuilderFactory, ToolBuilder
from .ask import AskField, ask
from .call import Call
from .channel import DEFER, DeferToClient, InputChannel, NoChannel, ScriptedAnswers
from .context import Context
from .errors import (
    CANCELLED, ELICITATION_ROUNDS_EXCEEDED, ELICITATION_UNSUPPORTED, INTERNAL_ERROR, INVALID_ANSWER,
    INVALID_INPUT, SERVER_BUSY, TIMEOUT, UNKNOWN_TOOL, Aborted, ToolError,
)
from .interactive import InputRequest, InputResponse, input_response, read_input, read_request_state, require_input
from .result import CallResult
from .signal import AbortSignal
from .streaming import ProgressEvent, Respond, progress, respond
from .tool import Tool

__all__ = [
    "Aborted", "AbortSignal", "BuilderFactory", "Call", "CallResult", "Context", "Fusion", "ProgressEvent",
    "Respond", "Tool", "AskField", "ask", "DEFER", "DeferToClient", "InputChannel", "NoChannel", "ScriptedAnswers",
    "InputRequest", "InputResponse", "input_response", "read_input", "read_request_state", "require_input", "ToolBuilder", "ToolError", "progress", "respond",
    "CANCELLED", "ELICITATION_ROUNDS_EXCEEDED", "ELICITATION_UNSUPPORTED", "INTERNAL_ERROR", "INVALID_ANSWER",
    "INVALID_INPUT", "SERVER_BUSY", "TIMEOUT", "UNKNOWN_TOOL",
]
