"""Small text helpers shared by plan validation and reports."""

from __future__ import annotations

import re

CODE_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
"""A line that opens (or closes) a fenced code block, CommonMark's way; group 1 is the fence."""


def shorten(text: str, limit: int) -> str:
    """Text on one line, cut at a word boundary to at most `limit` characters and an ellipsis."""
    text = " ".join(text[: limit * 4].split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(" ,;:") + "…"
