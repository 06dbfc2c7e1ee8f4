"""Glob patterns: braces expanded, tokens, and matching by a regular expression built from
the tokens (few wildcards) or by a linear-time set simulation (many)."""

from __future__ import annotations

import re

from ..protocol import ToolError


def _translate_class(pattern: str, start: int) -> tuple[str, int]:
    end = start
    if end < len(pattern) and pattern[end] in "!^":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1
    end = pattern.find("]", end)
    if end < 0:
        return re.escape("["), start
    body = pattern[start:end]
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    escaped = "".join("\\" + char if char in "\\[]^&~|" else char for char in body)
    return ("[^/" + escaped + "]" if negate else "[" + escaped + "]"), end + 1


GLOB_MAX_ALTERNATIVES = 256
# Up to this many unbounded wildcards a compiled regular expression is safe (its
# backtracking is at most quadratic in a path); beyond, the linear matcher below is used.
GLOB_REGEX_MAX_STARS = 2
# Glob tokens of the linear matcher.
LITERAL, ANY_CHAR, CHAR_CLASS, STAR, GLOBSTAR, GLOBSTAR_DIRS = range(6)
GlobToken = tuple[int, object]


def expand_braces(pattern: str, limit: int = GLOB_MAX_ALTERNATIVES) -> list[str]:
    """`a{b,c}d` -> [abd, acd], nested too; at most LIMIT patterns."""
    start = _brace_start(pattern)
    if start < 0:
        return [pattern]
    depth, index, pieces, piece_start = 0, start, [], start + 1
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                pieces.append(pattern[piece_start:index])
                break
        elif char == "," and depth == 1:
            pieces.append(pattern[piece_start:index])
            piece_start = index + 1
        index += 1
    else:
        return [pattern]  # unbalanced: the brace is a literal character
    head, tail = pattern[:start], pattern[index + 1 :]
    expanded: list[str] = []
    for piece in pieces:
        for rest in expand_braces(head + piece + tail, limit):
            expanded.append(rest)
            if len(expanded) > limit:
                raise ToolError(f"Glob pattern has more than {limit} brace alternatives")
    return expanded


def _brace_start(pattern: str) -> int:
    index = 0
    while index < len(pattern):
        if pattern[index] == "\\":
            index += 2
            continue
        if pattern[index] == "{":
            return index
        index += 1
    return -1


def glob_tokens(pattern: str) -> list[GlobToken]:
    """A brace-free glob as tokens for the linear matcher; runs of stars collapse."""
    tokens: list[GlobToken] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "*":
            double = pattern.startswith("*", index)
            while pattern.startswith("*", index):
                index += 1
            if double and pattern.startswith("/", index):
                index += 1
                kind = GLOBSTAR_DIRS
            else:
                kind = GLOBSTAR if double else STAR
            if tokens and tokens[-1][0] in (STAR, GLOBSTAR) and kind != GLOBSTAR_DIRS:
                tokens[-1] = (max(kind, tokens[-1][0]), None)
                continue
            tokens.append((kind, None))
        elif char == "?":
            tokens.append((ANY_CHAR, None))
        elif char == "\\" and index < len(pattern):
            tokens.append((LITERAL, pattern[index]))
            index += 1
        elif char == "[":
            translated, end = _translate_class(pattern, index)
            if end == index:
                tokens.append((LITERAL, "["))
            else:
                tokens.append((CHAR_CLASS, re.compile(translated, re.DOTALL)))
                index = end
        else:
            tokens.append((LITERAL, char))
    return tokens


def tokens_to_regex(tokens: list[GlobToken]) -> str:
    """The regular expression of a token list (at most GLOB_REGEX_MAX_STARS stars)."""
    parts = []
    for kind, value in tokens:
        if kind == LITERAL:
            parts.append(re.escape(str(value)))
        elif kind == ANY_CHAR:
            parts.append("[^/]")
        elif kind == CHAR_CLASS:
            assert isinstance(value, re.Pattern)
            parts.append(f"(?!/){value.pattern}")
        else:
            parts.append({STAR: "[^/]*", GLOBSTAR: ".*", GLOBSTAR_DIRS: "(?:.*/)?"}[kind])
    return "".join(parts)


def _token_step(token: GlobToken, char: str) -> bool:
    kind, value = token
    if kind == LITERAL:
        return char == value
    if kind == ANY_CHAR:
        return char != "/"
    assert isinstance(value, re.Pattern)
    return char != "/" and value.fullmatch(char) is not None


def _closure(states: set[int], tokens: list[GlobToken]) -> set[int]:
    """Add the states reachable without reading a character (a star matching nothing)."""
    stack = list(states)
    while stack:
        state = stack.pop()
        skippable = state < len(tokens) and tokens[state][0] in (STAR, GLOBSTAR, GLOBSTAR_DIRS)
        if skippable and state + 1 not in states:
            states.add(state + 1)
            stack.append(state + 1)
    return states


def linear_match(tokens: list[GlobToken], text: str) -> bool:
    """Whether TEXT matches: a set-of-states simulation, O(len(text) * len(tokens))."""
    states = _closure({0}, tokens)
    for char in text:
        following: set[int] = set()
        for state in states:
            if state == len(tokens):
                continue
            kind = tokens[state][0]
            if kind == STAR:
                if char != "/":
                    following.add(state)
            elif kind == GLOBSTAR:
                following.add(state)
            elif kind == GLOBSTAR_DIRS:
                following.add(state)
                if char == "/":
                    following.add(state + 1)
            elif _token_step(tokens[state], char):
                following.add(state + 1)
        if not following:
            return False
        states = _closure(following, tokens)
    return len(tokens) in states


class GlobMatcher:
    """Matches relative paths against a glob in bounded time, whatever the pattern."""

    def __init__(self, pattern: str) -> None:
        self.regexes: list[re.Pattern[str]] = []
        self.token_lists: list[list[GlobToken]] = []
        for alternative in expand_braces(pattern):
            tokens = glob_tokens(alternative)
            stars = sum(1 for kind, _ in tokens if kind in (STAR, GLOBSTAR, GLOBSTAR_DIRS))
            if stars <= GLOB_REGEX_MAX_STARS:
                # Built from the tokens, where runs of stars are already one: `****x`
                # must not become `.*.*x`, which backtracks without end.
                self.regexes.append(re.compile(tokens_to_regex(tokens), re.DOTALL))
            else:
                self.token_lists.append(tokens)

    def matches(self, path: str) -> bool:
        if any(regex.fullmatch(path) for regex in self.regexes):
            return True
        return any(linear_match(tokens, path) for tokens in self.token_lists)
