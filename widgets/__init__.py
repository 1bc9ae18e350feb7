"""ipywidgets views of fusion-nb calls and tools.

``CallView`` follows one call; ``ElicitationForm`` / ``UrlPrompt`` collect an answer;
``WidgetInputChannel`` puts them in front of a person; ``ToolCard`` shows a tool
with a Run form (``describe_tool`` is the same card as text); ``ActivityPanel``
lists an app's calls. ``text_progress`` and ``show_call`` cover frontends that
cannot render widgets. Every look (icons, colours, widths) lives in ``status``.
"""

from .activity import ActivityPanel
from .call_view import CallView, crash_of, views_for
from .channel import ShownScriptedAnswers, WidgetInputChannel, make_prompt
from .fields import FieldInput, flat_fields
from .form import ElicitationForm
from .frontend import has_widget_frontend
from .inspector import InspectorView
from .prompt import Prompt
from .text import progress_line, show_call, text_progress
from .tool_card import ToolCard, describe_tool
from .url_prompt import UrlPrompt

__all__ = [
    "ActivityPanel",
    "CallView",
    "ElicitationForm",
    "FieldInput",
    "InspectorView",
    "Prompt",
    "ShownScriptedAnswers",
    "ToolCard",
    "UrlPrompt",
    "WidgetInputChannel",
    "crash_of",
    "describe_tool",
    "flat_fields",
    "has_widget_frontend",
    "make_prompt",
    "progress_line",
    "show_call",
    "text_progress",
    "views_for",
]
