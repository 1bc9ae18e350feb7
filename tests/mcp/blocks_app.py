"""An app whose tools and prompt return content blocks as they are, with the checks of what a client gets.

Shared by the Python SDK tests (tests/mcp/test_content_blocks.py) and the TypeScript ones
(tests/interop/test_rich_interop.py): each check takes the wire dict a client received.
"""

from __future__ import annotations

import base64
import io
import wave
from pathlib import Path
from typing import Any

import mcp_types
from PIL import Image as PILImage

from fusion_nb import AnswerLimits, Audio, EmbeddedResource, Fusion, Image, ResourceLink


def png(side: int = 8) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (side, side), (200, 30, 30)).save(buffer, "PNG")
    return buffer.getvalue()


def wav_file(folder: Path) -> Path:
    path = folder / "beep.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x10" * 800)
    return path


def blocks_app(folder: Path) -> Fusion:
    app = Fusion("blocks", answer_limits=AnswerLimits(max_bytes=64 * 1024))
    sound = wav_file(folder)

    @app.f.query("picture").describe("A red square.").handle
    async def picture(input: Any, ctx: Any) -> Any:
        return Image(png())

    @app.f.query("voice").describe("A short beep.").handle
    async def voice(input: Any, ctx: Any) -> Any:
        return Audio(path=sound)

    @app.f.query("mixed").describe("An image, its caption, a link to the data and the notes inline.").handle
    async def mixed(input: Any, ctx: Any) -> Any:
        return [
            Image(png()),
            "a red square",
            ResourceLink("nb://vars/df", "df", mime_type="text/csv", description="the data"),
            EmbeddedResource("notes://1", text="drawn by PIL"),
        ]

    @app.f.query("sdk_made").describe("Blocks built with the SDK's own types.").handle
    async def sdk_made(input: Any, ctx: Any) -> Any:
        return [
            mcp_types.TextContent(type="text", text="from the SDK"),
            mcp_types.ResourceLink(type="resource_link", uri="nb://x", name="x"),
        ]

    @app.f.query("too_big").describe("An image over the 64 KiB bound, then text that fits.").handle
    async def too_big(input: Any, ctx: Any) -> Any:
        return [Image(png(400) + b"\x00" * 70_000, mime_type="image/png"), "still here"]

    @app.prompt("show", description="Show a picture.")
    def show(subject: str) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": f"Describe {subject}:"},
            {"role": "user", "content": Image(png())},
            {"role": "assistant", "content": EmbeddedResource("notes://1", text="a red square")},
        ]

    app.prompt("broken")(lambda: [{"content": "no role"}])
    return app


def check_picture(answer: dict[str, Any]) -> None:
    (block,) = answer["content"]
    assert block == {"type": "image", "data": base64.b64encode(png()).decode(), "mimeType": "image/png"}


def check_voice(answer: dict[str, Any]) -> None:
    (block,) = answer["content"]
    assert block["type"] == "audio" and block["mimeType"] == "audio/wav"
    assert base64.b64decode(block["data"]).startswith(b"RIFF")


def check_mixed(answer: dict[str, Any]) -> None:
    assert [block["type"] for block in answer["content"]] == ["image", "text", "resource_link", "resource"]
    assert answer["content"][1] == {"type": "text", "text": "a red square"}
    link = {
        "type": "resource_link",
        "uri": "nb://vars/df",
        "name": "df",
        "description": "the data",
        "mimeType": "text/csv",
    }
    assert answer["content"][2] == link
    notes = {"uri": "notes://1", "mimeType": "text/plain", "text": "drawn by PIL"}
    assert answer["content"][3] == {"type": "resource", "resource": notes}
    assert "structuredContent" not in answer


def check_sdk_made(answer: dict[str, Any]) -> None:
    assert answer["content"] == [
        {"type": "text", "text": "from the SDK"},
        {"type": "resource_link", "uri": "nb://x", "name": "x"},
    ]


def check_too_big(answer: dict[str, Any]) -> None:
    cut, kept = answer["content"]
    assert cut["type"] == "text" and cut["text"].startswith("(an image block of ")
    assert "over the 65536 bytes left of the 65536-byte answer bound, not sent.)" in cut["text"]
    assert kept == {"type": "text", "text": "still here"}


CHECKS = {
    "picture": check_picture,
    "voice": check_voice,
    "mixed": check_mixed,
    "sdk_made": check_sdk_made,
    "too_big": check_too_big,
}


def check_show(got: dict[str, Any]) -> None:
    messages = [(m["role"], m["content"]["type"]) for m in got["messages"]]
    assert messages == [("user", "text"), ("user", "image"), ("assistant", "resource")]
    assert got["messages"][0]["content"]["text"] == "Describe the square:"
    assert got["messages"][1]["content"]["data"] == base64.b64encode(png()).decode()
    assert got["messages"][2]["content"]["resource"]["text"] == "a red square"


BROKEN = "Prompt 'broken' rendered a message without a 'user' or 'assistant' role and a content."
