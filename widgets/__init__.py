"""ipywidgets views of fusion-nb calls and tools.

``CallView`` follows one call; ``ElicitationForm`` / ``UrlPrompt`` collect an answer;
``WidgetInputChannel`` puts them in front of a person; ``ToolCard`` shows a tool
with a Run form (``describe_tool`` is the same card as text); ``ActivityPanel``
lists an app's calls. ``text_progress`` and ``show_call`` cover frontends that
cannot render widgets. Every look (icons, colours, widths) lives in ``status``.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from fusion_nb._lazy import lazy_attributes as _lazy_attributes

if _TYPE_CHECKING:
    from .activity import ActivityPanel
    from .app_preview import AppPreview
    from .call_view import CallView
    from .channel import ShownScriptedAnswers, WidgetInputChannel, make_prompt
    from .fields import FieldInput, flat_fields
    from .form import ElicitationForm
    from .frontend import has_widget_frontend
    from .inspector import InspectorView
    from .live_views import views_for
    from .prompt import Prompt
    from .status import call_label, crash_of
    from .text import progress_line, show_call, text_progress
    from .tool_card import ToolCard
    from .tool_summary import describe_tool
    from .url_prompt import UrlPrompt

#: where each public name lives: its module is imported on first use (PEP 562), so loading
#: fusion-nb where no widget can show (``fusion-nb serve``, headless) never imports ipywidgets
_HOMES = {
    "ActivityPanel": ".activity",
    "AppPreview": ".app_preview",
    "CallView": ".call_view",
    "ElicitationForm": ".form",
    "FieldInput": ".fields",
    "InspectorView": ".inspector",
    "Prompt": ".prompt",
    "ShownScriptedAnswers": ".channel",
    "ToolCard": ".tool_card",
    "UrlPrompt": ".url_prompt",
    "WidgetInputChannel": ".channel",
    "call_label": ".status",
    "crash_of": ".status",
    "describe_tool": ".tool_summary",
    "flat_fields": ".fields",
    "has_widget_frontend": ".frontend",
    "make_prompt": ".channel",
    "progress_line": ".text",
    "show_call": ".text",
    "text_progress": ".text",
    "views_for": ".live_views",
}

__all__ = [
    "ActivityPanel",
    "AppPreview",
    "CallView",
    "ElicitationForm",
    "FieldInput",
    "InspectorView",
    "Prompt",
    "ShownScriptedAnswers",
    "ToolCard",
    "UrlPrompt",
    "WidgetInputChannel",
    "call_label",
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


__getattr__ = _lazy_attributes(__name__, _HOMES)
