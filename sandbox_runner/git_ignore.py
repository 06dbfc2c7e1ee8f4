"""gitignore patterns as git applies them, without running git: `.gitignore` files, the
repository's `info/exclude` and the user's excludes file; the last pattern that matches
a path decides, and a deeper `.gitignore` comes after the ones above it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.git_config import parse_git_config

__all__ = ["IgnoreRules", "excludes_file"]


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negated: bool
    directory_only: bool
    anywhere: bool
    """No `/` but at its end: matched against a path's last name, at any depth."""
    base: str
    """The directory of the file that holds it, relative to the working tree ("" or "a/b/")."""

    def matches(self, relative: str, is_dir: bool) -> bool:
        if (self.directory_only and not is_dir) or not relative.startswith(self.base):
            return False
        subject = relative.rpartition("/")[2] if self.anywhere else relative[len(self.base) :]
        return self.regex.fullmatch(subject) is not None


@dataclass(frozen=True)
class IgnoreRules:
    """The patterns in force in one directory of a working tree, lowest precedence first."""

    patterns: tuple[_Pattern, ...] = ()

    def with_text(self, text: str, base: str = "", *, ignore_case: bool = False) -> IgnoreRules:
        """These rules and those of a file's text (its patterns win), read in base."""
        added = (_compile(line, base, ignore_case) for line in text.split("\n"))
        return IgnoreRules(self.patterns + tuple(p for p in added if p is not None))

    def with_file(self, path: Path, base: str = "", *, ignore_case: bool = False) -> IgnoreRules:
        """with_text of a regular file (a link or anything else is not read, as git does)."""
        try:
            if not path.is_file() or path.is_symlink():
                return self
            text = path.read_text("utf-8", "surrogateescape")
        except OSError:
            return self
        return self.with_text(text, base, ignore_case=ignore_case)

    def ignored(self, relative: str, is_dir: bool) -> bool:
        """Whether git ignores relative (a path below the working tree, `/`-separated)."""
        for pattern in reversed(self.patterns):
            if pattern.matches(relative, is_dir):
                return not pattern.negated
        return False


def excludes_file(repository_config: Path, home: Path | None = None) -> Path:
    """The excludes file git reads besides `.gitignore` and `info/exclude`: `core.excludesFile`
    of the repository's config or the user's (the repository's wins), else
    `$XDG_CONFIG_HOME/git/ignore` (`~/.config/git/ignore`)."""
    try:
        home = home or Path.home()
    except RuntimeError:  # no home directory to read a user's config from
        return Path(os.environ.get("XDG_CONFIG_HOME") or "/nonexistent") / "git" / "ignore"
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "git"
    chosen = xdg / "ignore"
    for config in (xdg / "config", home / ".gitconfig", repository_config):
        try:
            text = config.read_text("utf-8", "replace") if config.is_file() else ""
        except OSError:
            continue
        for entry in parse_git_config(text):
            if (entry.section, entry.subsection, entry.key) == ("core", None, "excludesfile"):
                value = entry.value
                if value:
                    chosen = home / value[2:] if value.startswith("~/") else Path(value)
    return chosen


def _compile(line: str, base: str, ignore_case: bool) -> _Pattern | None:
    line = line.removesuffix("\r")
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    line = line[1:] if negated else line
    directory_only = line.endswith("/")
    line = line.removesuffix("/")
    if not line:
        return None
    anywhere = "/" not in line
    flags = re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL
    regex = re.compile(_translate(line.removeprefix("/")), flags)
    return _Pattern(regex, negated, directory_only, anywhere, base)


def _translate(pattern: str) -> str:
    """A pattern as a regular expression: `*` and `?` stop at `/`, `**/` is any number of
    directories, a trailing `/**` everything inside, `[...]` a class, `\\` an escape."""
    out: list[str] = []
    index, length = 0, len(pattern)
    while index < length:
        char = pattern[index]
        at_start = index == 0 or pattern[index - 1] == "/"
        if pattern.startswith("**", index) and at_start and index + 2 == length:
            out.append(".*")
            index += 2
        elif pattern.startswith("**/", index) and at_start:
            out.append("(?:.*/)?")
            index += 3
        elif char == "*":
            out.append("[^/]*")
            while index < length and pattern[index] == "*":
                index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[":
            text, index = _char_class(pattern, index)
            out.append(text)
        elif char == "\\" and index + 1 < length:
            out.append(re.escape(pattern[index + 1]))
            index += 2
        else:
            out.append(re.escape(char))
            index += 1
    return "".join(out)


def _char_class(pattern: str, start: int) -> tuple[str, int]:
    """`[...]` at start as a regular expression class (never matching `/`), and where the
    pattern goes on; a `[` that opens no class is itself."""
    index = start + 1
    negated = index < len(pattern) and pattern[index] in "!^"
    index += 1 if negated else 0
    first = index
    if index < len(pattern) and pattern[index] == "]":
        index += 1
    while index < len(pattern) and pattern[index] != "]":
        index += 1
    if index >= len(pattern):
        return re.escape("["), start + 1
    body = "".join("\\" + c if c in "\\[]^" else c for c in pattern[first:index])
    return ("[^/" + body + "]" if negated else "(?!/)[" + body + "]"), index + 1
