"""The tool server's pure parts (arguments, globs, output formatting), on the host's Python.

Everything that touches files, processes, git, ripgrep or ctags is tested where the
server really runs: inside the sandbox image (tests/docker/toolserver/).
"""

from __future__ import annotations

import re

import pytest

from sandbox_runner.sandbox.toolserver.arguments import (
    bool_arg,
    cap_output,
    clamp_timeout,
    int_arg,
    opt_str_arg,
    printable,
    str_arg,
)
from sandbox_runner.sandbox.toolserver.ops.glob import split_glob
from sandbox_runner.sandbox.toolserver.ops.glob_pattern import (
    GlobMatcher,
    expand_braces,
    glob_tokens,
    linear_match,
    tokens_to_regex,
)
from sandbox_runner.sandbox.toolserver.ops.read import format_line
from sandbox_runner.sandbox.toolserver.protocol import (
    DEFAULT_TIMEOUT,
    MAX_OUTPUT_BYTES,
    MAX_TIMEOUT,
    MIN_TIMEOUT,
    ToolError,
)


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.py", ["a.py", ".py"], ["a/b.py", "a.pyc"]),
        ("**/*.py", ["a.py", "a/b/c.py"], ["a/b.txt"]),
        ("src/**", ["src/a", "src/a/b"], ["lib/a"]),
        ("?.md", ["a.md"], ["ab.md", "/.md"]),
        ("[ab].txt", ["a.txt", "b.txt"], ["c.txt"]),
        ("[!ab].txt", ["c.txt"], ["a.txt", "/.txt"]),
        ("*.{js,ts}", ["x.js", "x.ts"], ["x.py"]),
        ("{a,b/{c,d}}.txt", ["a.txt", "b/c.txt", "b/d.txt"], ["b/e.txt"]),
        (r"\*.txt", ["*.txt"], ["a.txt"]),
        ("[unclosed", ["[unclosed"], ["u"]),
    ],
)
def test_glob_translation(pattern: str, matches: list[str], misses: list[str]) -> None:
    matcher = GlobMatcher(pattern)
    assert [name for name in matches if matcher.matches(name)] == matches
    assert [name for name in misses if not matcher.matches(name)] == misses


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("src/app/*.py", ("/ws/src/app", "*.py")),
        ("*.py", ("/ws", "*.py")),
        ("src/main.py", ("/ws/src/main.py", "")),
        ("/etc/*.conf", ("/etc", "*.conf")),
    ],
)
def test_literal_directories_move_into_the_walk_root(
    pattern: str, expected: tuple[str, str]
) -> None:
    assert split_glob("/ws", pattern) == expected


def test_integer_arguments() -> None:
    assert int_arg({}, "limit", 7) == 7
    assert int_arg({"limit": 3}, "limit", 7) == 3
    assert int_arg({"limit": 3.0}, "limit", 7) == 3
    assert int_arg({"limit": " 12"}, "limit", 7) == 12
    for bad in (True, "x", 2.5, -1, [1]):
        with pytest.raises(ToolError, match="expected an integer >= 0"):
            int_arg({"limit": bad}, "limit", 7)


def test_boolean_and_string_arguments() -> None:
    assert bool_arg({"-i": "TRUE"}, "-i", False) is True
    assert bool_arg({"-i": 0}, "-i", True) is False
    with pytest.raises(ToolError, match="expected true or false"):
        bool_arg({"-i": "yes"}, "-i", False)
    assert opt_str_arg({"path": ""}, "path") is None
    with pytest.raises(ToolError, match="must not be empty"):
        str_arg({"pattern": ""}, "pattern")
    with pytest.raises(ToolError, match="expected a string"):
        str_arg({"pattern": 5}, "pattern")


def test_timeouts_are_clamped() -> None:
    assert clamp_timeout(None) == DEFAULT_TIMEOUT
    assert clamp_timeout(True) == DEFAULT_TIMEOUT
    assert clamp_timeout(0) == MIN_TIMEOUT
    assert clamp_timeout(10**9) == MAX_TIMEOUT


def test_names_are_shown_on_one_printable_line() -> None:
    assert printable("plain name.txt") == "plain name.txt"
    assert printable("a\nb\x1b]0;x\x07") == "a\\nb\\x1b]0;x\\x07"
    assert printable("bad\udcffbyte") == "bad\\xffbyte"


def test_output_is_capped_at_a_line_boundary_and_says_how_much_was_cut() -> None:
    line = "x" * 99 + "\n"
    text = line * (MAX_OUTPUT_BYTES // 100 + 10)
    capped, truncated = cap_output(text)
    assert truncated and len(capped.encode()) <= MAX_OUTPUT_BYTES + 100
    cut = len(text.encode()) - capped.rindex("\n... [")
    assert capped.endswith(f"... [output truncated: {cut} more bytes]")
    assert cap_output("short") == ("short", False)
    assert cap_output("short", extra_bytes=5)[0].endswith("[output truncated: 5 more bytes]")


def test_read_lines_are_numbered_and_long_ones_cut() -> None:
    assert format_line(3, b"hello\r\n", 0) == "     3\thello"
    long_line = format_line(1, b"y" * 2500, 0)
    assert long_line == "     1\t" + "y" * 2000 + "... [line truncated: 500 more bytes]"


GLOB_PATTERNS = [
    "*.py", "**/*.py", "src/**", "?.md", "[ab].txt", "[!ab].txt", "*.{js,ts}",
    "{a,b/{c,d}}.txt", r"\*.txt", "[unclosed", "**/a*b*c.py", "a/**/b", "**", "*/*/*.md",
]  # fmt: skip
GLOB_PATHS = [
    "a.py", "x/a.py", "x/y/abc.py", "a/b", "a/x/y/b", "b.txt", "c.txt", "x.js", "*.txt",
    "[unclosed", "one/two/three.md", "abbbc.py", "x/aXbYc.py", "b/c.txt", "a.pyc", ".py",
]  # fmt: skip


@pytest.mark.parametrize("pattern", GLOB_PATTERNS)
def test_the_linear_matcher_agrees_with_the_regular_expression(pattern: str) -> None:
    for alternative in expand_braces(pattern):
        tokens = glob_tokens(alternative)
        regex = re.compile(tokens_to_regex(tokens), re.DOTALL)
        for path in GLOB_PATHS:
            assert linear_match(tokens, path) == bool(regex.fullmatch(path)), path


def test_a_pattern_full_of_stars_against_a_long_name_is_quick() -> None:
    """Backtracking would take longer than the universe; the set simulation is linear."""
    matcher = GlobMatcher("*a" * 20 + "*b")
    name = "a" * 250
    assert matcher.regexes == []
    assert not matcher.matches(name)
    assert matcher.matches(name + "b")


def test_brace_alternatives_are_bounded() -> None:
    assert expand_braces("x{1,2}{a,b}") == ["x1a", "x1b", "x2a", "x2b"]
    with pytest.raises(ToolError, match="more than 256 brace alternatives"):
        expand_braces("{0,1}" * 9)


def test_runs_of_double_stars_do_not_backtrack() -> None:
    """`****…x` is one wildcard, not a dozen `.*` for the regular expression to try."""
    import time

    matcher = GlobMatcher("**" * 12 + "x")
    started = time.monotonic()
    assert not matcher.matches("a" * 40)
    assert matcher.matches("a/b/" + "a" * 40 + "x")
    assert time.monotonic() - started < 0.5
