"""The CHANGELOG's unreleased part reads as Keep a Changelog: Added / Changed / Fixed, one line per change."""

from __future__ import annotations

import re
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def unreleased() -> str:
    text = CHANGELOG.read_text(encoding="utf-8")
    start = text.index("## Unreleased")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_unreleased_is_grouped_by_kind_in_keep_a_changelog_order() -> None:
    kinds = re.findall(r"^### (.+)$", unreleased(), re.M)
    assert kinds, "## Unreleased has no ### Added / Changed / Fixed sections"
    assert all(kind in KINDS for kind in kinds), kinds
    assert kinds == sorted(kinds, key=KINDS.index), f"sections out of order: {kinds}"


def test_every_unreleased_item_is_one_line_naming_its_issue() -> None:
    lines = [line for line in unreleased().splitlines()[1:] if line.strip() and not line.startswith("### ")]
    wrapped = [line for line in lines if not line.startswith("* ")]
    assert wrapped == [], "an item continues on a second line"
    unnamed = [line for line in lines if not re.search(r"\(#\d+(, #\d+)*\)\.?$", line)]
    assert unnamed == [], "an item does not end with its issue number"
