"""What a plan names: its base commit, its critical files, the files each Detailed Step
and the Test Plan mention, and every path-like word of its text."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.paths import WORKSPACE_MOUNT
from sandbox_runner.plans.document import split_document
from sandbox_runner.plans.text import section_points, shorten
from sandbox_runner.plans.validate import extract_section, validate_plan
from sandbox_runner.runs.workspace import HEX_SHA

__all__ = ["PlanRefs", "Step", "covers", "mentioned_paths", "plan_refs"]

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
_PATH = re.compile(
    r"(?<![\w./@-])"
    r"(?:\.{0,2}/)?[\w@+~-][\w.@+~-]*(?:/[\w.@+~-]+)*/?"
    r"(?::\d+(?:-\d+)?|#L\d+(?:-L?\d+)?)?"
)
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
_LINE_SUFFIX = re.compile(r"(?::\d+(?:-\d+)?|#L\d+(?:-L?\d+)?)$")
_TEST_PART = re.compile(r"(^|[/_.-])(tests?|specs?|__tests__|e2e)([/_.-]|$)", re.IGNORECASE)
_KNOWN_NAMES = frozenset(
    {"Makefile", "Dockerfile", "Justfile", "Rakefile", "Gemfile", "Procfile", "Containerfile"}
)


@dataclass(frozen=True)
class Step:
    """One Detailed Step: its text (shortened) and the paths it mentions."""

    text: str
    paths: tuple[str, ...]
    detail: str = ""
    """The step's whole text, as the plan words it (what the judge is asked about)."""


@dataclass(frozen=True)
class PlanRefs:
    """Everything of a plan that verify holds a change to."""

    base_commit: str | None
    base_source: str | None
    """The front-matter key the base commit came from (base_commit, or git_head of older plans)."""
    critical_files: tuple[str, ...]
    steps: tuple[Step, ...]
    test_files: tuple[str, ...]
    mentioned: frozenset[str]


def plan_refs(text: str, workspace: Path) -> PlanRefs:
    """Read a plan file's text (front matter and Markdown)."""
    metadata, body = split_document(text)
    base_commit, base_source = None, None
    for key in ("base_commit", "git_head"):
        value = metadata.get(key)
        if isinstance(value, str) and HEX_SHA.match(value):
            base_commit, base_source = value, key
            break
    check = validate_plan(body, sections=(), workspace=workspace)
    critical = tuple(dict.fromkeys(entry.path for entry in check.critical_files))
    steps_text = extract_section(body, "Detailed Steps") or ""
    steps = tuple(
        Step(shorten(point, 160), tuple(sorted(_files(mentioned_paths(point), workspace))), point)
        for point in section_points(steps_text)
    )
    tests_text = extract_section(body, "Test Plan") or ""
    tests = tuple(
        sorted(path for path in _files(mentioned_paths(tests_text), workspace) if _is_test(path))
    )
    return PlanRefs(
        base_commit=base_commit,
        base_source=base_source,
        critical_files=critical,
        steps=steps,
        test_files=tests,
        mentioned=frozenset({*mentioned_paths(body), *critical}),
    )


def mentioned_paths(text: str) -> set[str]:
    """The path-like words of text, repository-relative: a word with a `/` or a file
    extension (URLs, `:12` and `#L12` line suffixes and a `/workspace/` prefix dropped)."""
    found: set[str] = set()
    for match in _PATH.finditer(_URL.sub(" ", text)):
        word = _LINE_SUFFIX.sub("", match.group(0)).rstrip(".,;:")
        if word.startswith(WORKSPACE_MOUNT + "/"):
            word = word[len(WORKSPACE_MOUNT) + 1 :]
        word = word.removeprefix("./")
        if not word or word.startswith(("/", "../")) or ".." in word.split("/"):
            continue
        has_slash = "/" in word.rstrip("/")
        looks_like_file = bool(_EXTENSION.search(word)) or word in _KNOWN_NAMES
        if word[0].isdigit() and not has_slash:
            continue  # "3.5" or "1.2.3" is no file
        if has_slash or word.endswith("/") or looks_like_file:
            found.add(posixpath.normpath(word) + ("/" if word.endswith("/") else ""))
    return found


def covers(mention: str, path: str) -> bool:
    """Whether a plan's mention names a changed path: the same path, a trailing part of
    it (`plans/verify.py`), its file name when the mention is a bare name (`config.py`),
    or a directory above it (`docs/`, or a mention without an extension)."""
    directory = mention.rstrip("/")
    if mention == path or path.endswith("/" + mention):
        return True
    if "/" not in directory and not mention.endswith("/"):
        return posixpath.basename(path) == mention or path.startswith(mention + "/")
    if mention.endswith("/") or not _EXTENSION.search(directory):
        return path.startswith(directory + "/") or f"/{directory}/" in f"/{path}"
    return False


def _files(mentions: set[str], workspace: Path) -> set[str]:
    """The mentions that name a file or directory: with a file extension, a well-known
    file name, or a path that exists ("and/or" in a step is no file)."""
    return {
        mention
        for mention in mentions
        if _EXTENSION.search(mention.rstrip("/"))
        or posixpath.basename(mention) in _KNOWN_NAMES
        or os.path.lexists(workspace / mention)
    }


def _is_test(path: str) -> bool:
    return bool(_TEST_PART.search(path))
