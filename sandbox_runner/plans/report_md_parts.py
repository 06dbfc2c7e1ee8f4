"""report.md's Markdown building blocks: tables whose cells stay one row, inline code that
survives backticks, links to files beside the report, and text from a model made inert."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from sandbox_runner.safe_text import markdown_text, one_line


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = [md_row(header), md_row(["---"] * len(header))]
    return "\n".join(lines + [md_row(row) for row in rows])


def md_row(cells: list[str]) -> str:
    return "|" + "|".join(f" {text} " if text else " " for text in map(md_cell, cells)) + "|"


def md_cell(text: str) -> str:
    """A table cell: pipes escaped and line breaks as <br>, so the row stays one row.

    The text is Markdown already: whatever came from a plan went through md_safe.
    """
    lines = text.replace("|", "\\|").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "<br>".join(line.strip() for line in lines if line.strip())


def md_safe(text: str) -> str:
    """Model-written text as inert Markdown: no control characters, raw HTML, images, or
    links other than http(s)."""
    return markdown_text(text)


def md_name(plan: dict[str, Any]) -> str:
    return markdown_text(one_line(plan["perspective"] or plan["label"]))


def md_mark(plan: dict[str, Any]) -> str:
    if plan["valid"]:
        return "✅"
    return "❌" if plan["status"] == "failed" else "⚠️"


def md_code(text: str) -> str:
    """Inline code that survives backticks in the text (on one line, no control characters)."""
    text = one_line(text)
    runs = {len(run) for run in re.findall(r"`+", text)}
    length = 1
    while length in runs:
        length += 1
    fence = "`" * length
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


def md_link(path: str | None) -> str:
    """A link to a file beside the report, named by its file name."""
    return f"[{path.rsplit('/', 1)[-1]}]({quote(path)})" if path else "—"


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + "…"
