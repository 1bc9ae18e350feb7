"""What an app offers besides tools: resources (read by URI) and prompts (filled by name).

Both are plain registries here: the engine only knows what is registered and how to get
its value; the MCP layer (``fusion_nb.mcp.catalog``) serves them and presents the values.
A listener hears every change (a resource or prompt added or removed, a resource's value
updated), so servers can tell their clients.
"""

from __future__ import annotations

import enum
import inspect
import re
import string
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: ``complete(argument, value, context)``: suggestions for ``argument`` starting from ``value``
#: (``context`` holds the arguments already filled); sync or async, any iterable of strings
Completer = Callable[[str, str, Mapping[str, str]], Any]
#: the most values one completion answers with (MCP's limit); ``total`` says how many there were
MAX_COMPLETIONS = 100

#: a change: ``("resources" | "prompts", None)`` for the list, ``("resource", uri)`` for one value
CatalogChange = tuple[str, str | None]


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource at ``uri``, or a family of them when ``uri`` is a template (``nb://vars/{name}``).

    ``read`` takes the template's placeholders as keyword arguments (none for a plain URI) and
    returns the value (sync or async), presented like a tool's answer.
    """

    uri: str
    read: Callable[..., Any]
    name: str
    description: str | None = None
    mime_type: str | None = None
    pattern: re.Pattern[str] | None = field(default=None, compare=False)
    #: suggests a template placeholder's values (``None``: only its enum or Literal values)
    complete: Completer | None = field(default=None, compare=False)
    #: each placeholder's fixed choices, read from the function's Literal or Enum annotations
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    @property
    def is_template(self) -> bool:
        """Whether ``uri`` has ``{placeholders}`` (listed by ``resources/templates/list``)."""
        return self.pattern is not None

    def match(self, uri: str) -> dict[str, str] | None:
        """The placeholders' values if ``uri`` is this resource (or one of its template's), else ``None``."""
        if self.pattern is None:
            return {} if uri == self.uri else None
        found = self.pattern.fullmatch(uri)
        return found.groupdict() if found else None


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt: ``render(**arguments)`` gives its text (or a list of ``{"role", "content"}`` messages)."""

    name: str
    render: Callable[..., Any]
    description: str | None = None
    #: (argument name, required)
    arguments: tuple[tuple[str, bool], ...] = ()
    #: suggests an argument's values (``None``: only its enum or Literal values)
    complete: Completer | None = field(default=None, compare=False)
    #: each argument's fixed choices, read from the function's Literal or Enum annotations
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)


def choices_of(function: Callable[..., Any]) -> dict[str, tuple[str, ...]]:
    """The parameters annotated ``Literal[...]`` or with an ``Enum`` class, and their values as strings."""
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # an annotation that does not resolve offers no choices; the function still works
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for name, hint in hints.items():
        if typing.get_origin(hint) is typing.Literal:
            found[name] = tuple(str(value) for value in typing.get_args(hint))
        elif isinstance(hint, type) and issubclass(hint, enum.Enum):
            found[name] = tuple(str(member.value) for member in hint)
    found.pop("return", None)
    return found


async def complete(
    entry: Prompt | Resource, argument: str, value: str, context: Mapping[str, str]
) -> tuple[list[str], int]:
    """Suggestions for ``argument`` of a prompt or template (at most ``MAX_COMPLETIONS``), and how many there were.

    The entry's own ``complete`` function decides when it has one; otherwise an argument with
    fixed choices completes by itself (those starting with ``value``); any other gets none.
    """
    if entry.complete is not None:
        found = entry.complete(argument, value, context)
        if inspect.isawaitable(found):
            found = await found
        values = [str(item) for item in (found or ())] if not isinstance(found, str) else [found]
    else:
        values = [choice for choice in entry.choices.get(argument, ()) if choice.startswith(value)]
    return values[:MAX_COMPLETIONS], len(values)


def template_pattern(uri: str) -> re.Pattern[str] | None:
    """A regex for ``uri``'s ``{placeholders}`` (each one path segment), or ``None`` for a plain URI."""
    parts = re.split(r"\{(\w+)\}", uri)
    if len(parts) == 1:
        return None
    regex = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts))
    return re.compile(regex)


def placeholders(text: str) -> tuple[str, ...]:
    """The ``{names}`` a ``str.format`` template uses, in order, once each."""
    names: list[str] = []
    for _literal, name, _spec, _conversion in string.Formatter().parse(text):
        if name is not None and name not in names:
            names.append(name)
    return tuple(names)


def prompt_arguments(render: Callable[..., Any]) -> tuple[tuple[str, bool], ...]:
    """A function's parameters as prompt arguments (required unless they have a default)."""
    return tuple(
        (name, parameter.default is inspect.Parameter.empty)
        for name, parameter in inspect.signature(render).parameters.items()
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    )


class Catalog:
    """An app's resources and prompts, with listeners for their changes."""

    def __init__(self) -> None:
        self._resources: dict[str, Resource] = {}
        self._prompts: dict[str, Prompt] = {}
        self._listeners: list[Callable[[CatalogChange], None]] = []

    # -- resources --------------------------------------------------------------------
    @property
    def resources(self) -> list[Resource]:
        """Plain resources (``resources/list``), in registration order."""
        return [r for r in self._resources.values() if not r.is_template]

    @property
    def templates(self) -> list[Resource]:
        """Resource templates (``resources/templates/list``), in registration order."""
        return [r for r in self._resources.values() if r.is_template]

    def add_resource(self, resource: Resource) -> None:
        """Register (or replace) the resource at ``resource.uri``."""
        self._resources[resource.uri] = resource
        self._tell(("resources", None))

    def remove_resource(self, uri: str) -> bool:
        """Forget the resource registered at ``uri``; whether there was one."""
        if self._resources.pop(uri, None) is None:
            return False
        self._tell(("resources", None))
        return True

    def find(self, uri: str) -> tuple[Resource, dict[str, str]] | None:
        """The resource ``uri`` names and its template's values: a plain URI first, then templates."""
        plain = self._resources.get(uri)
        if plain is not None and not plain.is_template:
            return plain, {}
        for resource in self.templates:
            values = resource.match(uri)
            if values is not None:
                return resource, values
        return None

    def updated(self, uri: str) -> None:
        """Say that the value at ``uri`` changed (subscribed clients are told)."""
        self._tell(("resource", uri))

    # -- prompts ----------------------------------------------------------------------
    @property
    def prompts(self) -> list[Prompt]:
        """The prompts (``prompts/list``), in registration order."""
        return list(self._prompts.values())

    def add_prompt(self, prompt: Prompt) -> None:
        """Register (or replace) the prompt named ``prompt.name``."""
        self._prompts[prompt.name] = prompt
        self._tell(("prompts", None))

    def remove_prompt(self, name: str) -> bool:
        """Forget the prompt ``name``; whether there was one."""
        if self._prompts.pop(name, None) is None:
            return False
        self._tell(("prompts", None))
        return True

    def prompt(self, name: str) -> Prompt | None:
        """The prompt ``name``, or ``None``."""
        return self._prompts.get(name)

    def describe(self) -> list[str]:
        """The resources, templates and prompts, one line each (``%fusion list``, ``fusion-nb check``)."""
        lines = [f"resource {r.uri}" + (f": {r.description}" if r.description else "") for r in self.resources]
        lines += [f"template {r.uri}" + (f": {r.description}" if r.description else "") for r in self.templates]
        for prompt in self.prompts:
            arguments = ", ".join(name if required else f"{name}?" for name, required in prompt.arguments)
            described = f": {prompt.description}" if prompt.description else ""
            lines.append(f"prompt   {prompt.name}({arguments}){described}")
        return lines

    # -- listeners --------------------------------------------------------------------
    def on_change(self, listener: Callable[[CatalogChange], None]) -> Callable[[], None]:
        """Call ``listener(change)`` on every change; the returned function stops it."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def _tell(self, change: CatalogChange) -> None:
        for listener in list(self._listeners):
            listener(change)
