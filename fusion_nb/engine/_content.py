"""Content blocks a tool returns as they are: an image, audio, a resource link, an embedded resource.

Other values are presented by rule (a string is text, a model is JSON, a figure is an
image); these say exactly what the client gets. A list holding one of them is a list of
blocks: each item presented on its own (a string as text) and sent in order, so
``[chart, "caption", Audio(path="note.wav")]`` is an image, a text and an audio block.
Blocks from the MCP SDK's types (``mcp_types.ImageContent`` ...) are sent as they are too.
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the ``type`` of an MCP content block
BLOCK_TYPES = frozenset({"text", "image", "audio", "resource_link", "resource"})

_AUDIO_MAGIC = ((b"ID3", "audio/mpeg"), (b"\xff\xfb", "audio/mpeg"), (b"OggS", "audio/ogg"), (b"fLaC", "audio/flac"))


def _bytes_and_mime(kind: str, data: bytes | None, path: str | Path | None, mime_type: str | None) -> tuple[bytes, str]:
    if (data is None) == (path is None):
        raise ValueError(f"{kind} needs exactly one of data= (bytes) or path= (a file).")
    blob = bytes(data) if data is not None else Path(path).read_bytes()  # type: ignore[arg-type]
    mime = mime_type or _sniff(kind, blob) or (mimetypes.guess_type(str(path))[0] if path is not None else None)
    if mime is None or not mime.startswith(kind.lower() + "/"):
        raise ValueError(f"{kind} needs mime_type= ('{kind.lower()}/...'): its type could not be told from its bytes.")
    return blob, mime


def _sniff(kind: str, blob: bytes) -> str | None:
    from ._present import image_type

    if kind == "Image":
        return image_type(blob)
    if blob[:4] == b"RIFF" and blob[8:12] == b"WAVE":
        return "audio/wav"
    return next((mime for magic, mime in _AUDIO_MAGIC if blob.startswith(magic)), None)


class Block:
    """A content block: ``wire()`` is the dict MCP sends."""

    __slots__ = ()

    def wire(self) -> dict[str, Any]:
        """The block as MCP sends it."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True, init=False)
class _Media(Block):
    data: bytes = field(repr=False)
    mime_type: str

    def __init__(self, data: bytes | None = None, *, path: str | Path | None = None, mime_type: str | None = None):
        blob, mime = _bytes_and_mime(type(self).__name__, data, path, mime_type)
        object.__setattr__(self, "data", blob)
        object.__setattr__(self, "mime_type", mime)

    def wire(self) -> dict[str, Any]:
        """The block as MCP sends it."""
        data = base64.b64encode(self.data).decode("ascii")
        return {"type": type(self).__name__.lower(), "data": data, "mimeType": self.mime_type}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mime_type}, {len(self.data)} bytes)"


class Image(_Media):
    """An image block from ``data`` (bytes) or ``path``; PNG, JPEG, GIF and WebP are told from their bytes."""

    __slots__ = ()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {self.mime_type: self.data, "text/plain": repr(self)}


class Audio(_Media):
    """An audio block from ``data`` (bytes) or ``path``; WAV, MP3, Ogg and FLAC are told from their bytes."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        return (
            f'<audio controls src="data:{self.mime_type};base64,{base64.b64encode(self.data).decode("ascii")}"></audio>'
        )


@dataclass(frozen=True, slots=True)
class ResourceLink(Block):
    """A link to a resource the client may read (``resources/read``) or fetch: not its contents."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None

    def wire(self) -> dict[str, Any]:
        """The block as MCP sends it (only the fields given)."""
        wire: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("mimeType", self.mime_type),
            ("size", self.size),
        ):
            if value is not None:
                wire[key] = value
        return wire


@dataclass(frozen=True, slots=True)
class EmbeddedResource(Block):
    """A resource's contents sent inline: ``text`` (a str) or ``data`` (bytes, sent as a blob)."""

    uri: str
    text: str | None = None
    data: bytes | None = field(default=None, repr=False)
    mime_type: str | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.data is None):
            raise ValueError("EmbeddedResource needs exactly one of text= (a str) or data= (bytes).")

    def wire(self) -> dict[str, Any]:
        """The block as MCP sends it (a text or a blob resource)."""
        resource: dict[str, Any] = {"uri": self.uri}
        if self.text is not None:
            resource["text"] = self.text
        else:
            resource["blob"] = base64.b64encode(self.data or b"").decode("ascii")
        resource["mimeType"] = self.mime_type or ("text/plain" if self.text is not None else "application/octet-stream")
        return {"type": "resource", "resource": resource}


def sdk_block(value: Any) -> dict[str, Any] | None:
    """The wire dict of a content block built with the MCP SDK's types, else ``None`` (duck-typed: no SDK import)."""
    if getattr(value, "type", None) in BLOCK_TYPES and type(value).__module__.split(".")[0] in ("mcp", "mcp_types"):
        dumped: dict[str, Any] = value.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped
    return None
