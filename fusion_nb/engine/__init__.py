"""The pure engine: tools, calls, streaming and cancellation (anyio and pydantic only).

Every name other layers may use is re-exported here, and the event-loop seam (backends,
detached tasks) in ``fusion_nb.engine.lowlevel``, as anyio keeps ``anyio.lowlevel``; the
modules behind them are private (``_call``, ``_runner``...) and may change shape freely. See
docs/architecture.md for the modules in import order and one call followed through.
"""

from ._app import App, EngineStats
from ._ask import AskField, ask, form_schema, validate_form
from ._builder import ToolBuilder
from ._call import Call, CallStatus
from ._catalog import MAX_COMPLETIONS, Catalog, CatalogChange, Completer, Prompt, Resource, complete
from ._channel import DEFER, DeferToClient, InputChannel, NoChannel, ScriptedAnswers
from ._content import Audio, EmbeddedResource, Image, ResourceLink
from ._context import Context
from ._errors import (
    CANCELLED,
    DECLINED,
    ELICITATION_ROUNDS_EXCEEDED,
    ELICITATION_UNSUPPORTED,
    INTERNAL_ERROR,
    INVALID_ANSWER,
    INVALID_INPUT,
    SERVER_BUSY,
    TIMEOUT,
    UNKNOWN_TOOL,
    Aborted,
    NoWayToAsk,
    ToolError,
    did_you_mean,
)
from ._handlers import HandlerKind
from ._interactive import (
    InputAction,
    InputQuestion,
    InputRequest,
    InputResponse,
    input_response,
    read_input,
    read_request_state,
    require_input,
    with_input,
)
from ._middleware import Middleware
from ._present import (
    DEFAULT_LIMITS,
    AnswerLimits,
    Presented,
    answer_limits,
    image_type,
    present,
    use_presenter,
)
from ._request import CallRequest
from ._result import CallResult
from ._schema import validation_sentence
from ._signal import AbortSignal
from ._streaming import LOG_LEVELS, LogEvent, ProgressEvent, Respond, progress, respond
from ._task_records import SharedTasks, TaskRecord
from ._tasks import MAX_TTL, MemoryTaskStore, Task, TaskOptions, Tasks, TaskStatus, TaskStore, tasks_of
from ._tool import BoundTool, Tool, Verb

__all__ = [
    "CANCELLED",
    "DECLINED",
    "DEFAULT_LIMITS",
    "DEFER",
    "ELICITATION_ROUNDS_EXCEEDED",
    "ELICITATION_UNSUPPORTED",
    "INTERNAL_ERROR",
    "INVALID_ANSWER",
    "INVALID_INPUT",
    "LOG_LEVELS",
    "MAX_COMPLETIONS",
    "MAX_TTL",
    "SERVER_BUSY",
    "TIMEOUT",
    "UNKNOWN_TOOL",
    "AbortSignal",
    "Aborted",
    "AnswerLimits",
    "App",
    "AskField",
    "Audio",
    "BoundTool",
    "Call",
    "CallRequest",
    "CallResult",
    "CallStatus",
    "Catalog",
    "CatalogChange",
    "Completer",
    "Context",
    "DeferToClient",
    "EmbeddedResource",
    "EngineStats",
    "HandlerKind",
    "Image",
    "InputAction",
    "InputChannel",
    "InputQuestion",
    "InputRequest",
    "InputResponse",
    "LogEvent",
    "MemoryTaskStore",
    "Middleware",
    "NoChannel",
    "NoWayToAsk",
    "Presented",
    "ProgressEvent",
    "Prompt",
    "Resource",
    "ResourceLink",
    "Respond",
    "ScriptedAnswers",
    "SharedTasks",
    "Task",
    "TaskOptions",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "Tasks",
    "Tool",
    "ToolBuilder",
    "ToolError",
    "Verb",
    "answer_limits",
    "ask",
    "complete",
    "did_you_mean",
    "form_schema",
    "image_type",
    "input_response",
    "present",
    "progress",
    "read_input",
    "read_request_state",
    "require_input",
    "respond",
    "tasks_of",
    "use_presenter",
    "validate_form",
    "validation_sentence",
    "with_input",
]
