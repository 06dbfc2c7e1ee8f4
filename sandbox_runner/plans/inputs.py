"""What a plan run reads besides the repository: the requirements, a template, context files."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.template import (
    MAX_TEMPLATE_SECTIONS,
    looks_like_filled_plan,
    read_template_text,
)
from sandbox_runner.safe_io import UnsafeFileError, read_beneath, read_untrusted_bytes

CODEX_PLAN = Path(".codex/plan.md")
"""Where Codex keeps a plan; often its working plan for the repository, not a template."""
TEMPLATE_LOCATIONS = (Path(".planrun/plan.md"), CODEX_PLAN)
MAX_TEMPLATE_BYTES = 64 * 1024
MAX_CONTEXT_BYTES = 256 * 1024
MAX_REQUIREMENTS_BYTES = 1024 * 1024
_DEFAULTS = "; using the default sections"


@dataclass(frozen=True)
class Template:
    """A project's plan template: the sections it asks for, and where it came from."""

    path: Path
    sections: tuple[str, ...]
    notes: tuple[str, ...] = ()
    """What planrun made of it, one line each: unwrapped from a fence, what it requires."""


def read_requirements(text: str | None, file: Path | None) -> str:
    """The requirements from the argument, a file (-f, where `-` is standard input) or
    standard input ("-").

    Raises:
        ConfigError: none given, both given, unreadable, or empty.
    """
    if text is not None and file is not None:
        raise ConfigError("give the requirements either as an argument or with -f, not both")
    if file is not None and str(file) == "-":
        text = "-"
    elif file is not None:
        try:
            data = read_untrusted_bytes(file, MAX_REQUIREMENTS_BYTES, truncate=True)
        except UnsafeFileError as error:
            raise ConfigError(f"cannot use requirements file: {error}") from None
        if data is None:
            raise ConfigError(f"requirements file {file} does not exist")
        text = data[:MAX_REQUIREMENTS_BYTES].decode("utf-8", errors="replace")
    if text == "-":
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
        # lexists: a link that leads outside is found, so that it is reported, not skipped.
        if os.path.lexists(candidate) and not candidate.is_dir():
            return candidate
    return None


def read_template(workspace: Path, explicit: Path | None) -> Template | str | None:
    """The plan template, or a warning (str) saying why the default sections are used.

    --template is the user's own file: a problem with it is an error. The repository's
    .planrun/plan.md (or .codex/plan.md) is read beneath the workspace only, and a
    problem with it is a warning, except that a .planrun/plan.md too large or asking for
    too many sections is refused. A .codex/plan.md that reads as a filled-in plan (Codex's
    working plan) is skipped with a warning.

    Raises:
        ConfigError: --template is missing, unreadable, has no section headings, is too
            large or asks for too many sections; or so is .planrun/plan.md (the last two).
    """
    path = find_template(workspace, explicit)
    if path is None:
        return None
    codex = explicit is None and path == workspace / CODEX_PLAN
    try:
        template = load_template(path, None if explicit is not None else workspace, codex=codex)
    except ConfigError as error:
        if not codex:
            raise
        return f"{error}{_DEFAULTS}"
    if isinstance(template, str) and explicit is not None:
        raise ConfigError(f"--template: {template.removesuffix(_DEFAULTS)}")
    return template


def load_template(
    path: Path, workspace: Path | None = None, *, codex: bool = False
) -> Template | str:
    """The template's sections, or a warning saying why the defaults are used instead.

    The template is only ever read; its top-level section headings (outside code fences,
    see plans.template) become the plan's required sections. With workspace, the file must
    lie beneath it (a link out of the repository is not followed). With codex, a file
    that reads as a filled-in plan rather than a template is not used.

    Raises:
        ConfigError: the template is larger than MAX_TEMPLATE_BYTES or asks for more than
            MAX_TEMPLATE_SECTIONS sections: it is refused before any plan is paid for.
    """
    try:
        if workspace is None:
            data = read_untrusted_bytes(path, MAX_TEMPLATE_BYTES, truncate=True)
        else:
            data = read_beneath(workspace, path, MAX_TEMPLATE_BYTES, truncate=True)
    except UnsafeFileError as error:
        return f"cannot use plan template ({error}){_DEFAULTS}"
    if data is None:
        return f"plan template {path} does not exist{_DEFAULTS}"
    text = data[:MAX_TEMPLATE_BYTES].decode("utf-8", errors="replace")
    if codex and looks_like_filled_plan(text):
        return (
            f"{path} reads as Codex's working plan, not a template (no placeholders or empty "
            f"sections, or boxes checked): not used{_DEFAULTS}; a template for planrun goes "
            "in .planrun/plan.md"
        )
    if len(data) > MAX_TEMPLATE_BYTES:
        raise ConfigError(
            f"plan template {path} is larger than {MAX_TEMPLATE_BYTES // 1024} KiB: a template "
            "holds the section headings a plan must have, not a plan; shorten it"
        )
    read = read_template_text(text)
    if not read.sections:
        return f"plan template {path} has no section headings (## ...){_DEFAULTS}"
    if len(read.sections) > MAX_TEMPLATE_SECTIONS:
        raise ConfigError(
            f"plan template {path} asks for {len(read.sections)} sections (at most "
            f"{MAX_TEMPLATE_SECTIONS}): keep as ## headings only the sections every plan "
            "must have, and make the others ### subheadings"
        )
    notes = [f"plan template {path} {note}" for note in read.notes]
    if looks_like_filled_plan(text):
        notes.append(
            f"plan template {path} reads as a filled-in plan (no placeholders or empty "
            "sections): its headings are required as they are"
        )
    return Template(path, read.sections, tuple(notes))


def read_context_files(files: Sequence[Path], workspace: Path, extra_dirs: Sequence[Path]) -> str:
    """The attached files as prompt text; each must lie in the workspace or an extra directory.

    A relative path is read from the workspace (--repo), not the current directory.

    Raises:
        ConfigError: a file is missing, unreadable, or outside the permitted directories.
    """
    parts = []
    roots = [workspace.resolve(), *(directory.resolve() for directory in extra_dirs)]
    for file in files:
        given = file.expanduser()
        resolved = (workspace / given).resolve()
        root = next((r for r in roots if resolved == r or resolved.is_relative_to(r)), None)
        if root is None:
            raise ConfigError(
                f"context file {file} ({resolved}) is outside the repository {workspace} and "
                "the extra read-only directories; only files there can be attached"
            )
        try:
            data = read_beneath(root, resolved, MAX_CONTEXT_BYTES, truncate=True)
        except UnsafeFileError as error:
            raise ConfigError(f"cannot attach context file: {error}") from None
        if data is None:
            raise ConfigError(_missing_context(file, resolved, workspace))
        text = data[:MAX_CONTEXT_BYTES].decode("utf-8", errors="replace")
        note = "\n[cut at 256 KiB]" if len(data) > MAX_CONTEXT_BYTES else ""
        shown = resolved.relative_to(roots[0]) if root == roots[0] else resolved
        parts.append(f"### Attached file: {shown}\n\n````\n{text}{note}\n````")
    return "\n\n".join(parts)


def _missing_context(file: Path, resolved: Path, workspace: Path) -> str:
    message = f"context file {file} does not exist ({resolved})"
    if not file.is_absolute():
        message += f"; relative paths are read from the repository {workspace}"
        if file.exists():
            message += ", not the current directory: give it relative to the repository"
    return message
