"""What a plan run reads besides the repository: the requirements, a template, context files."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.errors import ConfigError
from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes

TEMPLATE_LOCATIONS = (Path(".planrun/plan.md"), Path(".codex/plan.md"))
MAX_TEMPLATE_BYTES = 256 * 1024
MAX_CONTEXT_BYTES = 256 * 1024
MAX_REQUIREMENTS_BYTES = 1024 * 1024
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Template:
    """A project's plan template: the sections it asks for, and where it came from."""

    path: Path
    sections: tuple[str, ...]


def read_requirements(text: str | None, file: Path | None) -> str:
    """The requirements from the argument, a file (-f) or standard input ("-").

    Raises:
        ConfigError: none given, both given, unreadable, or empty.
    """
    if text is not None and file is not None:
        raise ConfigError("give the requirements either as an argument or with -f, not both")
    if file is not None:
        try:
            data = read_untrusted_bytes(file, MAX_REQUIREMENTS_BYTES, truncate=True)
        except UnsafeFileError as error:
            raise ConfigError(f"cannot use requirements file: {error}") from None
        if data is None:
            raise ConfigError(f"requirements file {file} does not exist")
        text = data[:MAX_REQUIREMENTS_BYTES].decode("utf-8", errors="replace")
    elif text == "-":
        text = sys.stdin.read(MAX_REQUIREMENTS_BYTES)
    if text is None or not text.strip():
        raise ConfigError(
            "no requirements given: pass them as an argument, with -f FILE, or - for stdin"
        )
    return text.strip()


def find_template(workspace: Path, explicit: Path | None) -> Path | None:
    """The template to use: --template, else .planrun/plan.md, else .codex/plan.md."""
    if explicit is not None:
        return explicit
    for relative in TEMPLATE_LOCATIONS:
        candidate = workspace / relative
        if candidate.is_file():
            return candidate
    return None


def load_template(path: Path) -> Template | str:
    """The template's sections, or a warning saying why the defaults are used instead.

    The template is only ever read; its level-2+ headings (outside code fences) become
    the plan's required sections.
    """
    try:
        data = read_untrusted_bytes(path, MAX_TEMPLATE_BYTES, truncate=True)
    except UnsafeFileError as error:
        return f"cannot use plan template ({error}); using the default sections"
    if data is None:
        return f"plan template {path} does not exist; using the default sections"
    sections: list[str] = []
    in_fence = False
    for line in data[:MAX_TEMPLATE_BYTES].decode("utf-8", errors="replace").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        match = HEADING.match(line)
        if in_fence or match is None or len(match.group(1)) == 1:
            continue
        title = match.group(2).strip().strip("*_:").strip()
        if title and title not in sections:
            sections.append(title)
    if not sections:
        return f"plan template {path} has no section headings (## ...); using the default sections"
    return Template(path, tuple(sections))


def read_context_files(files: Sequence[Path], workspace: Path, extra_dirs: Sequence[Path]) -> str:
    """The attached files as prompt text; each must lie in the workspace or an extra directory.

    Raises:
        ConfigError: a file is missing, unreadable, or outside the permitted directories.
    """
    parts = []
    roots = [workspace.resolve(), *(directory.resolve() for directory in extra_dirs)]
    for file in files:
        resolved = file.expanduser().resolve()
        root = next((r for r in roots if resolved == r or resolved.is_relative_to(r)), None)
        if root is None:
            raise ConfigError(
                f"context file {file} is outside the repository and the extra read-only "
                "directories; only files there can be attached"
            )
        try:
            data = read_untrusted_bytes(resolved, MAX_CONTEXT_BYTES, truncate=True)
        except UnsafeFileError as error:
            raise ConfigError(f"cannot attach context file: {error}") from None
        if data is None:
            raise ConfigError(f"context file {file} does not exist")
        text = data[:MAX_CONTEXT_BYTES].decode("utf-8", errors="replace")
        note = "\n[cut at 256 KiB]" if len(data) > MAX_CONTEXT_BYTES else ""
        shown = resolved.relative_to(workspace.resolve()) if root == roots[0] else resolved
        parts.append(f"### Attached file: {shown}\n\n````\n{text}{note}\n````")
    return "\n\n".join(parts)
