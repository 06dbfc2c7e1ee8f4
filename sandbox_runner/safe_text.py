"""Text someone else wrote (a model, a repository, a report file) made inert for a terminal,
for Markdown or for HTML: the one sanitiser for everything planrun echoes or writes."""

from __future__ import annotations

import html
import re
import unicodedata
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = [
    "MAX_NAME_CHARS",
    "html_text",
    "markdown_cell",
    "markdown_html",
    "markdown_text",
    "name_problem",
    "one_line",
    "terminal_text",
]

# Cc: C0/C1 controls (ESC starts every terminal escape, OSC-8 links, title changes; BEL);
# Cf: format characters (bidi overrides that reorder what is shown); Cs: surrogates;
# Zl/Zp: line and paragraph separators, which some terminals treat as line breaks.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_REPLACEMENT = "?"
MAX_NAME_CHARS = 64
"""The longest perspective or preset name planrun accepts."""

_IMAGE_OPENER = re.compile(r"!\[")
_LINK_DESTINATION = re.compile(r"\]\(\s*(\S*)")
_REFERENCE_DEFINITION = re.compile(r"^( {0,3})\[([^\]]{0,999})\]:\s*(\S*)", re.MULTILINE)
_WEB_LINK = re.compile(r"https?://", re.IGNORECASE)
# In a table cell a backslash, a backtick, a bracket or a pipe can start a code span or a
# link, end the cell, or unescape a neutralising backslash.
_CELL_SYNTAX = re.compile(r"([\\`|\[\]])")


def terminal_text(text: object, *, multiline: bool = True) -> str:
    """Text that prints as itself: every control or format character becomes '?'.

    Escape sequences (colours, cursor moves, window titles, OSC-8 hyperlinks), BEL, a
    lone carriage return that would overwrite the line, and bidi overrides are all
    shown as '?'. Tabs and line breaks are kept when multiline, else also '?'; other
    spaces (no-break, em space) become plain spaces.
    """
    text = str(text)
    if text.isprintable():
        return text
    if multiline:
        text = text.replace("\r\n", "\n")
    kept = "\n\t" if multiline else ""
    out = []
    for char in text:
        if char.isprintable() or char in kept:
            out.append(char)
            continue
        category = unicodedata.category(char)
        if category == "Zs":
            out.append(" ")
        elif category in _UNSAFE_CATEGORIES or char == "\r":
            out.append(_REPLACEMENT)
        else:
            # Unassigned or private-use code points: harmless, and new emoji are unassigned
            # in older Unicode databases.
            out.append(char)
    return "".join(out)


def one_line(text: object) -> str:
    """terminal_text on one line: line breaks and tabs become '?' too (names, table cells)."""
    return terminal_text(text, multiline=False)


def markdown_text(text: object) -> str:
    """Text written by a model or a repository as inert Markdown for report.md.

    No control characters, no raw HTML (escaped, so no <img> beacon or script), no
    images (a remote image is fetched when the page is viewed, which can leak what the
    URL carries), and no links except to http(s) addresses (no javascript:, data:, file:).
    Neutralised constructs stay readable as the literal text the model wrote.
    """
    # Each neutralising backslash goes right after a '!' or ']' or at a line's start, so
    # no backslash the model wrote can escape it in turn.
    escaped = html.escape(terminal_text(text), quote=False)
    escaped = _IMAGE_OPENER.sub(r"!\\[", escaped)
    escaped = _LINK_DESTINATION.sub(_link_destination, escaped)
    return _REFERENCE_DEFINITION.sub(_reference_definition, escaped)


def markdown_cell(text: object, *, limit: int = 0) -> str:
    """Text from outside (an error, a name, a path) as one inert cell of a Markdown table.

    markdown_text on one line (line breaks and whitespace runs become one space), with
    every backslash, backtick, bracket and pipe escaped: no code span, link or image
    starts in it and no pipe ends the cell; it shows as the text written. A limit clips
    the text to that many characters first.
    """
    flat = " ".join(str(text).split())
    if limit and len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return markdown_text(_CELL_SYNTAX.sub(r"\\\1", flat))


def _link_destination(match: re.Match[str]) -> str:
    if _WEB_LINK.match(match.group(1)):
        return match.group(0)
    # "]\(" is no longer an inline link: the text shows as written.
    return "]\\(" + match.group(0)[2:]


def _reference_definition(match: re.Match[str]) -> str:
    if _WEB_LINK.match(match.group(3)):
        return match.group(0)
    return f"{match.group(1)}\\" + match.group(0)[len(match.group(1)) :]


def html_text(text: object) -> str:
    """Text as inert HTML: no control characters, and every <, >, & and quote escaped."""
    return html.escape(terminal_text(text), quote=True)


def markdown_html(text: object, *, heading_offset: int = 0, inline: bool = False) -> str:
    """Markdown written by a model as inert HTML (headings, lists, tables, code, emphasis).

    Raw HTML shows as the text it is; links work only to http(s) addresses (others stay
    the text written) and send no referrer; no image is loaded (`![x](url)` is a link).
    Headings go `heading_offset` levels deeper (at most h6), so that a plan's `# Title`
    can sit below the page's own headings. With inline, the text is one paragraph's
    content (emphasis, code, links), without the paragraph.
    """
    render = _markdown().renderInline if inline else _markdown().render
    return str(render(terminal_text(text), {"heading_offset": heading_offset}))


@cache
def _markdown() -> MarkdownIt:
    # Imported when a page is rendered: everything else that echoes text starts faster.
    from markdown_it import MarkdownIt

    markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    markdown.enable(["table", "strikethrough"]).disable("image")
    markdown.validateLink = _is_web_link  # type: ignore[method-assign]
    markdown.add_render_rule("link_open", _link_open)
    markdown.add_render_rule("heading_open", _heading)
    markdown.add_render_rule("heading_close", _heading)
    return markdown


def _is_web_link(url: str) -> bool:
    return _WEB_LINK.match(url) is not None


def _link_open(renderer: Any, tokens: Any, index: int, options: Any, env: Any) -> str:
    tokens[index].attrSet("rel", "nofollow noopener noreferrer")
    return str(renderer.renderToken(tokens, index, options, env))


def _heading(renderer: Any, tokens: Any, index: int, options: Any, env: Any) -> str:
    token = tokens[index]
    level = min(6, int(token.tag[1:]) + int(env.get("heading_offset", 0)))
    token.tag = f"h{level}"
    return str(renderer.renderToken(tokens, index, options, env))


def name_problem(name: str) -> str:
    """Why a perspective or preset name cannot be used ("" when it can)."""
    if not name.strip():
        return "is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name)} characters long; the limit is {MAX_NAME_CHARS}"
    if "\n" in name or "\r" in name:
        return "contains a line break"
    if one_line(name) != name or any(unicodedata.category(c) == "Zs" for c in name if c != " "):
        return "contains control or invisible characters"
    return ""
