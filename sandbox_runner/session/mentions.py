"""`@path` in a message: each mention of a file in the repository attaches its content
(bounded), and of a directory its listing, as Claude Code does.

The repository is a stranger's: a file is read beneath it, one component at a time and
no link followed out of it (safe_io.read_beneath); nothing under `.git` is read (its
config can hold a token), nor a file whose name looks like a secret (`.env`, `*.pem`:
`/attach` sends one on purpose); binary files are refused, long ones cut.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sandbox_runner.safe_io import UnsafeFileError, read_beneath
from sandbox_runner.safe_text import one_line
from sandbox_runner.secret_names import looks_secret

MAX_FILE_BYTES = 256 * 1024
"""Bytes of one file attached, at most."""
MAX_FILE_LINES = 2000
"""Lines of one file attached, at most."""
MAX_TOTAL_BYTES = 1024 * 1024
"""Bytes all the mentions of one message attach together, at most."""
MAX_MENTIONS = 20
"""Mentions of one message looked at; later ones stay text."""
MAX_LISTED = 200
"""Entries of a directory's listing, at most."""
BINARY_PROBE = 8192
"""Bytes looked at for a NUL, which marks a binary file."""
# `@` at the start or after a space or bracket (not in user@host, not in `code`), then a
# quoted path or one without spaces.
MENTION = re.compile(r'(?<![\w@/\\`.])@(?:"([^"\n]{1,1000})"|([^\s"`]{1,1000}))')
_TRAILING = ".,;:!?)]}'"


@dataclass(frozen=True)
class Mention:
    """One `@path` of a message: as typed, and the repository path it names."""

    typed: str
    path: str
    """Relative to the repository, `/`-separated, without a trailing `/`."""


@dataclass(frozen=True)
class Expanded:
    """A message with its mentions attached, and one line per mention for the user."""

    text: str
    notes: list[str]


def find_mentions(text: str, root: Path) -> list[Mention]:
    """The mentions in TEXT that look like paths, each once, in order; an unquoted one
    loses trailing punctuation ("see @a.py.") unless the path has it."""
    found: dict[str, Mention] = {}
    for match in MENTION.finditer(text):
        if len(found) >= MAX_MENTIONS:
            break
        quoted, bare = match.group(1), match.group(2)
        typed = match.group(0)
        path = quoted if quoted is not None else bare
        if bare is not None and not os.path.lexists(root / bare.rstrip("/")):
            path = bare.rstrip(_TRAILING) or bare
            typed = "@" + path
        normal = _normal(path)
        if normal and normal not in found:
            found[normal] = Mention(typed, normal)
    return list(found.values())


def _normal(path: str) -> str:
    """PATH relative to the repository (`./a` is `a`), or "" when it cannot be one."""
    if "\0" in path:
        return ""
    parts = [part for part in PurePosixPath(path).parts if part not in ("", ".")]
    return "/".join(parts) if path and not path.startswith("/") else ("/" + "/".join(parts))


def expand_mentions(text: str, root: Path) -> Expanded:
    """TEXT with what its mentions name attached after it; the notes say, per mention,
    what was attached or why not (a word like `@here` that names nothing says nothing)."""
    blocks: list[str] = []
    notes: list[str] = []
    budget = MAX_TOTAL_BYTES
    for mention in find_mentions(text, root):
        block, note = _attach(mention, root, budget)
        if note:
            notes.append(f"`{one_line(mention.typed).replace('`', '')}`: {note}")
        if block:
            blocks.append(block)
            budget -= len(block.encode())
    return Expanded("\n\n".join([text, *blocks]), notes)


def _attach(mention: Mention, root: Path, budget: int) -> tuple[str, str]:
    """The block for the model and the note for the user, for one mention."""
    path = mention.path
    parts = path.split("/")
    if path.startswith("/") or ".." in parts:
        return "", "not attached: only paths inside the repository, relative to its root"
    if any(part.casefold() == ".git" for part in parts):
        return "", "not attached: git's own files are not sent"
    if not os.path.lexists(root / path):
        return "", "no such file in the repository (sent as written)" if _pathlike(path) else ""
    if looks_secret(parts[-1], is_dir=os.path.isdir(root / path)):
        return "", f"not attached: the name looks like a secret (/attach {path} sends it)"
    if budget <= 0:
        return "", f"not attached: the message already carries {MAX_TOTAL_BYTES // 1024} KiB"
    try:
        if os.path.isdir(root / path):
            return _directory(root, path)
        return _file(root, path, budget)
    except UnsafeFileError as error:
        return "", f"not attached: {str(error).replace(str(root) + '/', '')}"


def _pathlike(path: str) -> bool:
    return "/" in path or "." in path


def _file(root: Path, path: str, budget: int) -> tuple[str, str]:
    limit = min(MAX_FILE_BYTES, budget)
    data = read_beneath(root, path, limit, truncate=True)
    if data is None:
        return "", "no such file in the repository (sent as written)"
    if b"\0" in data[:BINARY_PROBE]:
        return "", "not attached: a binary file"
    text = data[:limit].decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    cut = ""
    if len(lines) > MAX_FILE_LINES:
        text, cut = "".join(lines[:MAX_FILE_LINES]), f"the first {MAX_FILE_LINES} lines"
    elif len(data) > limit:
        cut = f"the first {limit // 1024} KiB"
    shown = min(len(lines), MAX_FILE_LINES)
    fence = "`" * max(4, _longest_backtick_run(text) + 1)
    note_for_model = f"\n[cut: only {cut} of the file are attached]" if cut else ""
    block = f"### Attached file: {path}\n\n{fence}\n{text.rstrip(chr(10))}\n{fence}{note_for_model}"
    size = f"{shown:,} lines" + (f", cut to {cut}" if cut else "")
    return block, f"attached ({size})"


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _directory(root: Path, path: str) -> tuple[str, str]:
    names = list_beneath(root, path)
    shown = names[:MAX_LISTED]
    more = f"\n… and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
    listing = "\n".join(one_line(name) for name in shown) or "(empty)"
    block = f"### Attached directory: {path}/ ({len(names)} entries)\n\n{listing}{more}"
    return block, f"attached a listing ({len(names)} entries)"


def list_beneath(root: Path, path: str) -> list[str]:
    """The sorted names in the directory PATH of ROOT (a subdirectory's with `/`, `.git`
    left out), opened one component at a time from ROOT without following a link.

    Raises:
        UnsafeFileError: the path leads outside ROOT, or cannot be listed.
    """
    real_root = root.resolve()
    resolved = (root / path).resolve()
    if not resolved.is_relative_to(real_root):
        raise UnsafeFileError(f"{path} leads outside the repository; planrun does not follow it")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    directory = os.open(real_root, flags)
    try:
        for part in resolved.relative_to(real_root).parts:
            inner = os.open(part, flags, dir_fd=directory)
            os.close(directory)
            directory = inner
        with os.scandir(directory) as scan:
            return sorted(
                entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
                for entry in scan
                if entry.name != ".git"
            )
    except OSError as error:
        raise UnsafeFileError(f"cannot list {path}: {error.strerror}") from None
    finally:
        os.close(directory)
