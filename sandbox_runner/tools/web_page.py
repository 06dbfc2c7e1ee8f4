"""A fetched page as text for the model: HTML as Markdown, text and JSON as they are,
anything else (images, archives, PDFs) refused."""

from __future__ import annotations

from html.parser import HTMLParser

from sandbox_runner.tools.web_fetch import FetchRefused, Page

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-sh",
    }
)
DROPPED_ELEMENTS = ("script", "style", "noscript", "template", "svg", "iframe", "object")
"""Elements whose content is code or markup, not text a reader sees."""


def is_html(page: Page) -> bool:
    """Whether the page is HTML (as its server says, or as it looks when it says nothing)."""
    return (page.content_type or _sniffed(page.body)) in HTML_TYPES


def page_text(page: Page, max_html_bytes: int) -> str:
    """The page as text: Markdown for HTML (its first MAX_HTML_BYTES), the text itself for
    text, JSON and the like.

    Raises:
        FetchRefused: the page is binary (an image, an archive, a PDF...).
    """
    kind = page.content_type or _sniffed(page.body)
    if kind in HTML_TYPES:
        return html_to_markdown(page.body[:max_html_bytes], page.headers.get_content_charset())
    if kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith(("+json", "+xml")):
        return _decoded(page.body, page.headers.get_content_charset())
    raise FetchRefused(
        f"{page.url} is {kind} ({len(page.body):,} bytes{' or more' if page.cut else ''}), "
        "not text or HTML; WebFetch reads only web pages and text"
    )


def html_to_markdown(body: bytes, charset: str | None) -> str:
    """HTML as Markdown (markdownify over BeautifulSoup), scripts and styles left out; a
    page nested too deeply for that (thousands of levels, which the converter walks
    recursively) comes back as its plain text instead."""
    # Imported on the first fetch: most runs never fetch a page.
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    try:
        soup = BeautifulSoup(body, "html.parser", from_encoding=charset)
        for element in soup(list(DROPPED_ELEMENTS)):
            element.decompose()
        markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    except RecursionError:
        markdown = _plain_text(_decoded(body, charset))
    lines = [line.rstrip() for line in markdown.splitlines()]
    return "\n".join(_without_blank_runs(lines)).strip()


class _TextOnly(HTMLParser):
    """The text of an HTML page, read flat (no tree, so no depth limit)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in DROPPED_ELEMENTS:
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in DROPPED_ELEMENTS and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden and data.strip():
            self.parts.append(data.strip())


def _plain_text(html: str) -> str:
    parser = _TextOnly()
    parser.feed(html)
    parser.close()
    return "\n".join(parser.parts)


def _without_blank_runs(lines: list[str]) -> list[str]:
    kept: list[str] = []
    for line in lines:
        if line or (kept and kept[-1]):
            kept.append(line)
    return kept


def _decoded(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", errors="replace")


def _sniffed(body: bytes) -> str:
    """A media type for a response that named none: HTML, text, or binary."""
    head = body[:4096]
    if b"\0" in head:
        return "application/octet-stream"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 4:  # not just a character cut at the end
            return "application/octet-stream"
        text = head[: error.start].decode("utf-8")
    start = text.lstrip().lower()
    return "text/html" if start.startswith(("<!doctype html", "<html")) else "text/plain"
