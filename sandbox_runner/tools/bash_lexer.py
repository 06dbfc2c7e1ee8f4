"""Read a Bash command line into simple commands, refusing any shell syntax beyond a safe subset.

The lexer understands only words, quotes, `|`, `;`, `&&`, `||`, newlines and a few
redirections; expansions, substitutions, subshells, globs, here-documents and the like are
refused rather than guessed at, since the command line is attacker-controlled.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

__all__ = ["Refusal", "SimpleCommand", "parse"]

_WORD_END = frozenset(" \t\n;&|<>()")
_SHELL_SYNTAX = frozenset(" \t\n;&|<>()$`\\\"'{}*?[]!#~=/")
_REFUSED_OPERATORS = {
    ";;": "`;;` belongs to a `case` statement, which plan mode does not judge",
    ";&": "`;&` belongs to a `case` statement, which plan mode does not judge",
    "|&": "`|&` is not supported in plan mode",
    "&>": "`&>` redirects output and is read differently by different shells",
    "<<": "here-documents and here-strings are not supported in plan mode",
    "<>": "`<>` opens a file for writing",
    "<&": "`<&` descriptor duplication is not supported in plan mode",
    "<(": "process substitution can run other commands",
    ">(": "process substitution can run other commands",
    ">|": "`>|` overwrites files",
    "&": "`&` runs a command in the background",
    "(": "subshells and grouping with `( ... )` are not supported in plan mode",
    ")": "subshells and grouping with `( ... )` are not supported in plan mode",
}


class Refusal(Exception):
    """Raised while reading a command line that contains something plan mode cannot judge."""

    def __init__(self, reason: str, offending: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offending = offending


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "separator" or "redirect"
    value: str
    start: int
    end: int


@dataclass
class SimpleCommand:
    """One simple command: its words after quote removal and its redirections."""

    words: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    start: int = -1
    end: int = -1

    def cover(self, token: _Token) -> None:
        self.start = token.start if self.start < 0 else self.start
        self.end = token.end


def _check_characters(command: str) -> None:
    """Refuse control, invisible and look-alike characters before lexing."""
    for line in command.split("\n"):
        for char in line:
            if char == "\t" or (char.isascii() and char.isprintable()):
                continue
            visible = line.encode("ascii", "backslashreplace").decode()
            if char.isascii() or unicodedata.category(char)[0] in "CZ":
                raise Refusal(f"it contains the control or invisible character {char!a}", visible)
            if set(unicodedata.normalize("NFKC", char)) & _SHELL_SYNTAX:
                raise Refusal(f"it contains {char!a}, which looks like shell syntax", visible)


class _Lexer:
    """Splits a command line into words, separators and redirections; refuses the rest."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.segment_start = 0
        self.tokens: list[_Token] = []

    def run(self) -> list[_Token]:
        while self.pos < len(self.text):
            if self.text[self.pos] in " \t":
                self.pos += 1
            elif self.text[self.pos] in _WORD_END:
                self._operator("")
            else:
                self._word()
        return self.tokens

    def _refuse(self, reason: str) -> Refusal:
        line_end = self.text.find("\n", self.pos)
        segment = self.text[self.segment_start : line_end if line_end >= 0 else None]
        return Refusal(reason, segment.strip())

    def _emit(self, kind: str, value: str, start: int, length: int) -> None:
        self.pos += length
        self.tokens.append(_Token(kind, value, start, self.pos))
        if kind == "separator":
            self.segment_start = self.pos

    def _operator(self, fd: str) -> None:
        pair = self.text[self.pos : self.pos + 2]
        start = self.pos - len(fd)
        if pair in ("&&", "||"):
            self._emit("separator", pair, start, 2)
        elif pair in _REFUSED_OPERATORS or pair[0] in _REFUSED_OPERATORS:
            raise self._refuse(_REFUSED_OPERATORS.get(pair) or _REFUSED_OPERATORS[pair[0]])
        elif pair[0] in ";|\n":
            self._emit("separator", pair[0], start, 1)
        elif pair in (">>", ">&"):
            self._emit("redirect", fd + pair, start, 2)
        else:
            self._emit("redirect", fd + pair[0], start, 1)

    def _word(self) -> None:
        start, parts, quoted = self.pos, [], False
        while self.pos < len(self.text) and self.text[self.pos] not in _WORD_END:
            char = self.text[self.pos]
            quoted = quoted or char in "'\"\\"
            if char == "'":
                parts.append(self._single_quoted())
            elif char == '"':
                parts.append(self._double_quoted())
            elif char == "\\":
                parts.append(self._escaped())
            else:
                parts.append(self._plain(at_word_start=self.pos == start))
        word = "".join(parts)
        is_fd = not quoted and word.isascii() and word.isdigit()
        if is_fd and self.text[self.pos : self.pos + 1] in ("<", ">"):
            if len(word) > 1:
                raise self._refuse("descriptors above 9 are read differently by different shells")
            self._operator(word)
        else:
            self.tokens.append(_Token("word", word, start, self.pos))

    def _single_quoted(self) -> str:
        end = self.text.find("'", self.pos + 1)
        if end < 0:
            raise self._refuse("it has an unterminated quote")
        value, self.pos = self.text[self.pos + 1 : end], end + 1
        return value

    def _double_quoted(self) -> str:
        parts: list[str] = []
        self.pos += 1
        while self.pos < len(self.text) and self.text[self.pos] != '"':
            char, after = self.text[self.pos], self.text[self.pos + 1 : self.pos + 2]
            if char == "\\" and after == "\n":
                raise self._refuse("line continuations with `\\` are not supported in plan mode")
            if char == "\\" and after in ("$", "`", '"', "\\"):
                parts.append(after)
                self.pos += 2
                continue
            if char == "`" or (char == "$" and after not in ('"', " ", "\t")):
                raise self._refuse("`$` and backquote substitutions cannot be judged safely")
            if char == "!":
                raise self._refuse("`!` can trigger history expansion; quote it with '...'")
            parts.append(char)
            self.pos += 1
        if self.pos >= len(self.text):
            raise self._refuse("it has an unterminated quote")
        self.pos += 1
        return "".join(parts)

    def _escaped(self) -> str:
        after = self.text[self.pos + 1 : self.pos + 2]
        if after in ("", "\n"):
            raise self._refuse("line continuations with `\\` are not supported in plan mode")
        self.pos += 2
        return after

    def _plain(self, at_word_start: bool) -> str:
        char, rest = self.text[self.pos], self.text[self.pos + 1 : self.pos + 3]
        if char == "$" and rest[:1] not in ("", " ", "\t", "\n"):
            raise self._refuse("`$` expansions and substitutions cannot be judged safely")
        if char == "`":
            raise self._refuse("backquote command substitution can run other commands")
        if char == "{" and at_word_start and rest[:1] == "}" and rest[1:2] in _WORD_END | {""}:
            self.pos += 2
            return "{}"
        if char in "{}":
            raise self._refuse("brace expansion and `{ ...; }` groups are not supported")
        if char in "*?[":
            raise self._refuse("unquoted glob patterns can expand to unexpected arguments")
        if char == "!":
            raise self._refuse("`!` can trigger history expansion; quote it with '...'")
        if char == "~" and (at_word_start or self.text[self.pos - 1] in "=:"):
            raise self._refuse("`~` expands to a home directory; quote it or spell out the path")
        if char == "#" and at_word_start:
            raise self._refuse("comments are not supported in plan mode")
        self.pos += 1
        return char


def parse(command: str) -> list[SimpleCommand]:
    """Split a command line into simple commands, refusing empty or dangling parts.

    Raises:
        Refusal: the line has a character or syntax that plan mode cannot judge.
    """
    _check_characters(command)
    commands: list[SimpleCommand] = []
    current, redirect, connector = SimpleCommand(), None, ""
    for token in _Lexer(command).run():
        if redirect is not None:
            if token.kind != "word":
                raise Refusal(f"`{redirect.value}` has no target", command[current.start :])
            current.redirects.append((redirect.value, token.value))
            current.cover(token)
            redirect = None
        elif token.kind == "separator":
            if current.start >= 0:
                commands.append(current)
                current = SimpleCommand()
            elif token.value != "\n":
                raise Refusal(f"there is an empty command before `{token.value}`", "")
            if token.value != "\n":
                connector = "" if token.value == ";" else token.value
        else:
            current.cover(token)
            connector = ""
            if token.kind == "redirect":
                redirect = token
            else:
                current.words.append(token.value)
    if redirect is not None or connector:
        raise Refusal("the command line ends in the middle of a command", "")
    commands += [current] if current.start >= 0 else []
    if not commands:
        raise Refusal("the command is empty", "")
    for simple in commands:
        if not simple.words:
            raise Refusal("a redirection needs a command", command[simple.start : simple.end])
    return commands
