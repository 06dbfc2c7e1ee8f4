"""A git config file rebuilt from the keys that can carry neither a credential nor a command:
what a copy of a repository needs for git to read it, and nothing else."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sandbox_runner.redact import redact

__all__ = ["ConfigEntry", "parse_git_config", "safe_git_config", "safe_url"]

_CORE_KEYS = frozenset(
    {
        "repositoryformatversion",
        "bare",
        "filemode",
        "symlinks",
        "ignorecase",
        "precomposeunicode",
        "logallrefupdates",
        "autocrlf",
        "eol",
    }
)
"""How to read the repository and its files; `core.worktree` is left out (it can aim git
at another directory), as are hooksPath, fsmonitor, sshCommand, editor, pager..."""
_NAMED_KEYS = {
    "remote": frozenset({"url", "fetch"}),
    "branch": frozenset({"remote", "merge"}),
    "submodule": frozenset({"url", "active"}),
}
"""Keys kept in `[section "name"]`; a URL loses its credentials (see safe_url)."""
_SCHEME_URL = re.compile(r"(?is)^([a-z][a-z0-9+.-]*://)([^/?#]*)([^?#]*)")
_REMOTE_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
_NAME_CHAR = re.compile(r"[A-Za-z0-9-]")
_SECTION_CHAR = re.compile(r"[A-Za-z0-9.-]")
_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "\\": "\\", '"': '"'}
_NEEDS_QUOTES = re.compile(r'["\\\n\t\b#;]|^\s|\s$|^$')


@dataclass(frozen=True)
class ConfigEntry:
    """One `section.subsection.key = value` as git reads it (None: a key with no `=`)."""

    section: str
    subsection: str | None
    key: str
    value: str | None


def safe_git_config(text: str) -> str:
    """A git config file holding only its safe keys, as git reads the original (a key on its
    section's line, quoted and continued values, comments): `core` keys that say how to
    read the repository, `extensions.*`, `remote.*.url` and `.fetch`, `branch.*.remote`
    and `.merge`, `submodule.*.url` and `.active`. URLs lose their user information, query
    and fragment; everything else (credentials, http headers, include and includeIf,
    aliases, filters, hooks, fsmonitor, sshCommand, url rewrites) is left out."""
    lines: list[str] = []
    current: tuple[str, str | None] | None = None
    for entry in parse_git_config(text):
        if not _kept(entry):
            continue
        subsection = None if entry.subsection is None else redact(safe_url(entry.subsection))
        if current != (entry.section, subsection):
            current = (entry.section, subsection)
            lines.append(_header(entry.section, subsection))
        if entry.value is None:
            lines.append(f"\t{entry.key}")
        else:
            # branch.<name>.remote may be a URL too, as may any value a later git reads.
            value = (
                safe_url(entry.value) if entry.key == "url" or "://" in entry.value else entry.value
            )
            lines.append(f"\t{entry.key} = {_quoted(redact(value))}")
    return "".join(line + "\n" for line in lines)


def _kept(entry: ConfigEntry) -> bool:
    section, key = entry.section, entry.key
    if section == "core":
        return entry.subsection is None and key in _CORE_KEYS
    if section == "extensions":
        return entry.subsection is None
    if entry.subsection is None or key not in _NAMED_KEYS.get(section, ()):
        return False
    # `ext::<command>` and other remote helpers run programs.
    return not (key == "url" and entry.value is not None and _REMOTE_HELPER.match(entry.value))


def safe_url(url: str) -> str:
    """A URL without user information (`user:token@`), query or fragment; a path or an
    scp-like `git@host:path` is returned as it is."""
    match = _SCHEME_URL.match(url)
    if match is None:
        return url
    scheme, authority, path = match.groups()
    return scheme + authority.rpartition("@")[2] + path


def _header(section: str, subsection: str | None) -> str:
    if subsection is None:
        return f"[{section}]"
    escaped = subsection.replace("\\", "\\\\").replace('"', '\\"')
    return f'[{section} "{escaped}"]'


def _quoted(value: str) -> str:
    if not _NEEDS_QUOTES.search(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\n", "\\n").replace("\t", "\\t").replace("\b", "\\b")
    return f'"{escaped}"'


def parse_git_config(text: str) -> list[ConfigEntry]:
    """Every entry of a git config file, in order, as git's own parser reads it; what git
    would refuse is skipped to the end of its line (and a key under a header it refuses
    belongs to no section, so it is skipped too). Section and key names are lower case."""
    reader = _Reader(text.replace("\r\n", "\n"))
    entries: list[ConfigEntry] = []
    section: tuple[str, str | None] | None = None
    while not reader.done():
        char = reader.peek()
        if char.isspace():
            reader.pos += 1
        elif char in "#;":
            reader.skip_line()
        elif char == "[":
            section = reader.header()
        elif char.isalpha():
            key = reader.take(_NAME_CHAR).lower()
            try:
                value = reader.value()
            except _Refused:
                reader.skip_line()
                continue
            if section is not None:
                entries.append(ConfigEntry(section[0], section[1], key, value))
        else:
            reader.skip_line()
    return entries


class _Refused(Exception):
    """A value git would refuse to read (an unknown escape, an unclosed quote)."""


class _Reader:
    """A cursor over a config file's text, with git's rules for headers and values."""

    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def done(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def next(self) -> str:
        char = self.peek()
        self.pos += 1
        return char

    def skip_line(self) -> None:
        end = self.text.find("\n", self.pos)
        self.pos = len(self.text) if end < 0 else end + 1

    def take(self, allowed: re.Pattern[str]) -> str:
        start = self.pos
        while self.pos < len(self.text) and allowed.match(self.text[self.pos]):
            self.pos += 1
        return self.text[start : self.pos]

    def header(self) -> tuple[str, str | None] | None:
        """`[section]`, `[section "sub"]` or the old `[section.sub]`; None if invalid."""
        self.pos += 1
        name = self.take(_SECTION_CHAR).lower()
        if self.peek() == "]" and name:
            self.pos += 1
            section, dot, old_style = name.partition(".")
            return (section, old_style if dot else None) if section else None
        self.take(re.compile(r"[ \t]"))
        if self.peek() != '"' or not name or "." in name:
            self.skip_line()
            return None
        self.pos += 1
        sub: list[str] = []
        while (char := self.next()) != '"':
            if char in ("", "\n"):
                return None
            if char == "\\":
                char = self.next()
                if char in ("", "\n"):
                    return None
            sub.append(char)
        if self.next() != "]":
            self.skip_line()
            return None
        return name, "".join(sub)

    def value(self) -> str | None:
        """The value after a key name (None for a key alone).

        Raises:
            _Refused: git would refuse it.
        """
        self.take(re.compile(r"[ \t]"))
        char = self.peek()
        if char in ("", "\n", "#", ";"):
            return None
        if char != "=":
            raise _Refused
        self.pos += 1
        return self._value_text()

    def _value_text(self) -> str:
        out: list[str] = []
        quoted = comment = False
        spaces = 0
        while (char := self.next()) not in ("", "\n"):
            if comment:
                continue
            if char.isspace() and not quoted:
                spaces += 1 if out else 0
                continue
            if char in "#;" and not quoted:
                comment = True
                continue
            out.append(" " * spaces)
            spaces = 0
            if char == "\\":
                escaped = self.next()
                if escaped == "\n":
                    continue  # the value goes on over the next line
                if escaped not in _ESCAPES:
                    raise _Refused
                out.append(_ESCAPES[escaped])
            elif char == '"':
                quoted = not quoted
            else:
                out.append(char)
        if quoted:
            self.pos -= 1  # the line after an unclosed quote is read on its own
            raise _Refused
        return "".join(out)
