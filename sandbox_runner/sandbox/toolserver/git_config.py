"""git's config files as git reads them: a port of its parser, include and path rules."""

from __future__ import annotations

import os

from .processes import COMMAND_HOME

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


# (section, has no subsection) of the variables whose `path` git includes: include.path and
# includeIf.<condition>.path (whatever the condition: reading too much is harmless).
INCLUDE_SECTIONS = frozenset({(b"include", True), (b"includeif", False)})


def include_target(value: bytes | None, including: str) -> str | None:
    """The file an include names: relative to the including file's directory."""
    if not value:
        return None
    return expand_git_path(value, os.path.dirname(including))


def expand_git_path(value: bytes, base: str) -> str:
    """A path from a config value, expanded as git does (HOME is the commands' HOME)."""
    path = os.fsdecode(value)
    if path == "~" or path.startswith("~/"):
        path = COMMAND_HOME + path[1:]
    elif path.startswith("~"):
        path = os.path.expanduser(path)
    elif path.startswith("%(prefix)/"):
        path = "/usr/" + path[len("%(prefix)/") :]
    # Without normalising: `..` after a symlink must go where the kernel (and git) goes.
    return os.path.join(base, path)


def leads_through_proc(path: str) -> bool:
    """Whether PATH, resolved link by link as the kernel does, passes through /proc, where
    links such as /proc/self/cwd lead each process to a different place."""
    pending = [part for part in reversed(path.split("/")) if part]
    current, links = "/", 0
    while pending:
        part = pending.pop()
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part) if part != "." else current
        if candidate == "/proc" or candidate.startswith("/proc/"):
            return True
        try:
            target = os.readlink(candidate)
        except (OSError, ValueError):
            current = candidate
            continue
        links += 1
        if links > 40:  # the kernel's limit: git cannot follow it either
            return False
        current = "/" if target.startswith("/") else current
        pending += [part for part in reversed(target.split("/")) if part]
    return False


def split_variable(name: bytes) -> tuple[bytes, bytes | None, bytes]:
    """section, subsection (None if there is none) and key, split as git does."""
    section, _, rest = name.partition(b".")
    subsection, dot, key = rest.rpartition(b".")
    return section, (subsection if dot else None), key


# A port of git's config file parser (config.c, git 2.39): git_parse_source, get_base_var,
# get_extended_base_var, get_value and parse_value, over bytes.
CONFIG_SPACE = frozenset(b" \t\n\r")  # git's isspace
NEWLINE = ord("\n")


class BadConfigLine(Exception):
    """Where git would stop reading a config file with "bad config line"."""


class ConfigSource:
    """git's get_next_char: CR LF reads as LF, and the end of the data as a final LF."""

    __slots__ = ("data", "eof", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.eof = False

    def next(self) -> int:
        if self.pos >= len(self.data):
            self.eof = True
            return NEWLINE
        char = self.data[self.pos]
        self.pos += 1
        if char == 13 and self.data[self.pos : self.pos + 1] == b"\n":
            self.pos += 1
            return NEWLINE
        return char

    def skip_line(self) -> None:
        """Go on after the line holding the last character read."""
        end = self.data.find(b"\n", max(self.pos - 1, 0))
        self.pos = len(self.data) if end < 0 else end + 1


def git_config_variables(data: bytes) -> Iterator[tuple[bytes, bytes | None]]:
    """(name, value) of each variable in a config file, named as git names them.

    Where git would stop with "bad config line" (and refuse to run), this goes on at the
    next line instead, so it finds at least every variable git sees.
    """
    source = ConfigSource(data[3:] if data.startswith(b"\xef\xbb\xbf") else data)
    section, comment = b"", False
    while True:
        char = source.next()
        try:
            if char == NEWLINE:
                if source.eof:
                    return
                comment = False
            elif comment or char in CONFIG_SPACE:
                continue
            elif char in b"#;":
                comment = True
            elif char == ord("["):
                section = config_section(source) + b"."
            elif char < 128 and chr(char).isalpha():
                yield config_entry(source, section + bytes([char]).lower())
            else:
                raise BadConfigLine
        except BadConfigLine:
            source.skip_line()
            comment = False


def is_keychar(char: int) -> bool:
    return char < 128 and (chr(char).isalnum() or char == ord("-"))


def config_section(source: ConfigSource) -> bytes:
    """A section header after its `[`: `[name]`, `[name.sub]` or `[name "sub"]`."""
    name = bytearray()
    while True:
        char = source.next()
        if source.eof:
            raise BadConfigLine
        if char == ord("]"):
            break
        if char in CONFIG_SPACE:
            config_subsection(source, name, char)
            break
        if not (is_keychar(char) or char == ord(".")):
            raise BadConfigLine
        name += bytes([char]).lower()
    if not name:
        raise BadConfigLine
    return bytes(name)


def config_subsection(source: ConfigSource, name: bytearray, char: int) -> None:
    while char in CONFIG_SPACE:
        if char == NEWLINE:
            raise BadConfigLine
        char = source.next()
    if char != ord('"'):
        raise BadConfigLine
    name += b"."
    while (char := source.next()) != ord('"'):
        if char == ord("\\"):
            char = source.next()
        if char == NEWLINE:
            raise BadConfigLine
        name.append(char)
    if source.next() != ord("]"):
        raise BadConfigLine


def config_entry(source: ConfigSource, name: bytes) -> tuple[bytes, bytes | None]:
    key = bytearray(name)
    while True:
        char = source.next()
        if source.eof or not is_keychar(char):
            break
        key += bytes([char]).lower()
    while char in b" \t":
        char = source.next()
    if char == NEWLINE:
        return bytes(key), None
    if char != ord("="):
        raise BadConfigLine
    return bytes(key), config_value(source)


# What each escape in a value stands for; a backslash before a newline joins the lines.
CONFIG_ESCAPES = {
    ord(escape): meaning
    for escape, meaning in (
        ("\n", b""),
        ("t", b"\t"),
        ("b", b"\b"),
        ("n", b"\n"),
        ("\\", b"\\"),
        ('"', b'"'),
    )
}


def config_value(source: ConfigSource) -> bytes:
    value = bytearray()
    quoted, comment, spaces = False, False, 0
    while True:
        char = source.next()
        if char == NEWLINE:
            if quoted:
                raise BadConfigLine
            return bytes(value)
        if comment:
            continue
        if char in CONFIG_SPACE and not quoted:
            spaces += 1 if value else 0
            continue
        if not quoted and char in b";#":
            comment = True
            continue
        value += b" " * spaces
        spaces = 0
        if char == ord("\\"):
            escaped = source.next()
            if escaped not in CONFIG_ESCAPES:
                raise BadConfigLine
            value += CONFIG_ESCAPES[escaped]
        elif char == ord('"'):
            quoted = not quoted
        else:
            value.append(char)
