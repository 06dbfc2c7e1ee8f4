"""The one sanitiser: what reaches a terminal and report.md from text someone else wrote."""

from __future__ import annotations

import pytest

from sandbox_runner.safe_text import (
    markdown_cell,
    markdown_text,
    name_problem,
    one_line,
    terminal_text,
)


def test_terminal_text_shows_escapes_and_bidi_overrides_as_question_marks() -> None:
    text = "a\x1b]0;pwned\x07b\x1b[2Jc\u202ed\rline\r\nnext\tcol\u00a0x"
    assert terminal_text(text) == "a?]0;pwned?b?[2Jc?d?line\nnext\tcol x"
    assert one_line("one\ntwo\tthree") == "one?two?three"


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("![](http://evil/?d=1)", "!\\[](http://evil/?d=1)"),
        ("![x][ref]", "!\\[x][ref]"),
        ("[x](javascript:alert(1))", "[x]\\(javascript:alert(1))"),
        ("[x]( data:text/html,hi)", "[x]\\( data:text/html,hi)"),
        ("[a[b]c](file:///etc/passwd)", "[a[b]c]\\(file:///etc/passwd)"),
        ("\\\\[x](javascript:y)", "\\\\[x]\\(javascript:y)"),
        ("[ref]: javascript:x", "\\[ref]: javascript:x"),
        ("<a href=x>", "&lt;a href=x&gt;"),
        ("[ok](https://example.com) [ref]: https://example.com", None),
    ],
)
def test_markdown_text_neutralises_images_and_other_links(written: str, shown: str | None) -> None:
    assert markdown_text(written) == (written if shown is None else shown)


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("![b](http://beacon/x)", "!\\[b\\](http://beacon/x)"),
        ("[x](https://example.com)", "\\[x\\](https://example.com)"),
        ("a|b `c`", "a\\|b \\`c\\`"),
        ("\\|", "\\\\\\|"),
        ("one\r\ntwo\n\n  three", "one two three"),
        ("<img src=x>\x1b[2J\x07", "&lt;img src=x&gt;?\\[2J?"),
    ],
)
def test_markdown_cell_is_one_inert_table_cell(written: str, shown: str) -> None:
    assert markdown_cell(written) == shown


def test_markdown_cell_clips_before_escaping() -> None:
    assert markdown_cell("|" * 10, limit=4) == "\\|\\|\\|…"


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("security", ""),
        ("data model", ""),
        ("", "is empty"),
        ("a" * 65, "is 65 characters long; the limit is 64"),
        ("a\nb", "contains a line break"),
        ("x\x1b]0;t\x07", "contains control or invisible characters"),
        ("x\u200by", "contains control or invisible characters"),
    ],
)
def test_name_problem(name: str, problem: str) -> None:
    assert name_problem(name) == problem
