"""Which files of a workspace travel to the Ray nodes, read without running git.

In a git working tree: the files git tracks, and the untracked files git does not ignore
(what `git status` shows as the project), never an ignored one (`.gitignore`,
`info/exclude`, the user's excludes file) nor an untracked one whose name looks like a
secret. Outside git: everything but names that look like secrets. Either way, planrun's
own agent files (`.claude/agents/*.md`, `.planrun/agents/*.md`) travel, ignored or not:
the node reads them to run the agent the driver reports. Of a `.git` directory only an
allow-list travels (objects, refs, HEAD, index...; its config files rebuilt from safe
keys); of a submodule's or a linked worktree's git directory, the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.git_config import safe_git_config
from sandbox_runner.git_ignore import IgnoreRules, excludes_file
from sandbox_runner.git_index import Checkout, checkout_of
from sandbox_runner.secret_names import SECRET_DIRECTORIES, SECRET_NAMES, looks_secret
from sandbox_runner.tree_walk import walk

__all__ = ["SECRET_DIRECTORIES", "SECRET_NAMES", "Shipped", "looks_secret", "shipped_files"]

AGENT_DIRECTORIES = (".claude/agents", ".planrun/agents")
GIT_FILES = frozenset({"HEAD", "packed-refs", "index", "shallow", "commondir"})
GIT_TREES = frozenset({"objects", "refs", "reftable"})
GIT_CONFIGS = frozenset({"config", "config.worktree"})
GIT_NESTED = frozenset({"modules", "worktrees"})
"""Beneath these, each directory holding HEAD is a git directory (a submodule's, a linked
worktree's) that gets the same allow-list."""
LEFT_IN_TREES = frozenset({"alternates", "http-alternates"})
"""In objects/info/: paths and URLs of other object stores (a URL can hold a credential)."""
MAX_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Shipped:
    """A path that travels: relative to the workspace (`/`-separated, "" for the workspace
    itself), where it is, and for a git config file the text that travels instead."""

    name: str
    path: Path
    text: str | None = None


@dataclass(frozen=True)
class _Repository:
    """The git working tree a directory belongs to."""

    checkout: Checkout
    offset: str
    """What goes before a workspace-relative name beneath `strip` to make it relative to
    the working tree: the workspace's own place in it ("" or "sub/dir/")."""
    strip: str
    """The working tree's place in the workspace ("" or "vendor/lib/")."""

    def relative(self, name: str) -> str:
        return self.offset + name[len(self.strip) :]


@dataclass(frozen=True)
class _Frame:
    """A directory to list, and what decides about its entries."""

    path: Path
    name: str
    repository: _Repository | None
    rules: IgnoreRules
    ignored: bool = False
    """Beneath an ignored directory (or a secret-looking one): only tracked paths go on."""


def shipped_files(workspace: Path, exclude: Path | None = None) -> Iterator[Shipped]:
    """Every path of the workspace that travels (see the module's docstring), each directory
    before what it holds, in an order that depends on the tree alone. The tree is walked
    with a stack of its own: no depth of directories exhausts Python's recursion limit.
    FIFOs, sockets and devices stay behind; links travel as links.

    Raises:
        ConfigError: a git index cannot be read.
        OSError: a directory cannot be listed.
    """
    frames = {str(workspace): _top_frame(workspace)}
    for directory in walk(workspace):
        frame = frames.pop(directory.path)
        yield Shipped(frame.name, frame.path)
        rules = _with_gitignore(frame)
        below = []
        for entry in directory.entries:
            path = frame.path / entry.name
            name = f"{frame.name}/{entry.name}" if frame.name else entry.name
            if exclude is not None and path.is_relative_to(exclude):
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name == ".git":
                    yield from _git_dir_files(path, name)
                elif (child := _child_frame(frame, rules, path, name)) is not None:
                    frames[entry.path] = child
                    below.append(entry)
            elif not (entry.is_file(follow_symlinks=False) or entry.is_symlink()):
                continue
            elif entry.name == ".git" or _ships(frame, rules, name, is_dir=False):
                yield Shipped(name, path)  # a `.git` file points to a git directory elsewhere
        directory.below = below


def _top_frame(workspace: Path) -> _Frame:
    """The workspace, in the git working tree it is part of (if any, and if that tree
    tracks something in it), with the ignore rules of the directories above it there."""
    root = next((p for p in (workspace, *workspace.parents) if os.path.lexists(p / ".git")), None)
    checkout = None if root is None else checkout_of(root)
    offset = "" if root is None else workspace.relative_to(root).as_posix()
    offset = "" if offset == "." else offset
    # A directory its working tree tracks nothing in is a project of its own (a project
    # under a home directory kept in git, say), as it is to git inside the sandbox.
    if root is None or checkout is None or (offset and not checkout.tracked.holds(offset)):
        return _Frame(workspace, "", None, IgnoreRules())
    offset = offset and offset + "/"
    rules, ignored = _base_rules(checkout), False
    directory, relative = root, ""
    for part in workspace.relative_to(root).parts:
        rules = rules.with_file(
            directory / ".gitignore", relative, ignore_case=checkout.ignore_case
        )
        directory, relative = directory / part, f"{relative}{part}/"
        ignored = ignored or rules.ignored(relative.rstrip("/"), is_dir=True)
    return _Frame(workspace, "", _Repository(checkout, offset, ""), rules, ignored)


def _base_rules(checkout: Checkout) -> IgnoreRules:
    case = checkout.ignore_case
    rules = IgnoreRules().with_file(excludes_file(checkout.common_dir / "config"), ignore_case=case)
    return rules.with_file(checkout.common_dir / "info" / "exclude", ignore_case=case)


def _with_gitignore(frame: _Frame) -> IgnoreRules:
    """The frame's rules and those of the `.gitignore` in its directory."""
    if frame.repository is None:
        return frame.rules
    base = frame.repository.relative(frame.name)
    base = base if base.endswith("/") or not base else base + "/"
    case = frame.repository.checkout.ignore_case
    return frame.rules.with_file(frame.path / ".gitignore", base, ignore_case=case)


def _ships(frame: _Frame, rules: IgnoreRules, name: str, *, is_dir: bool) -> bool:
    """Whether a path travels: tracked, or neither ignored nor secret-looking (or on the
    way to one of planrun's agent files)."""
    repository = frame.repository
    secret = looks_secret(name.rpartition("/")[2], is_dir)
    if repository is None:
        return not secret
    relative = repository.relative(name)
    if repository.checkout.tracked.holds(relative):
        return True
    if frame.ignored or secret or rules.ignored(relative, is_dir):
        return _agent_path(name, is_dir) and not secret
    return True


def _child_frame(frame: _Frame, rules: IgnoreRules, path: Path, name: str) -> _Frame | None:
    """The frame of a subdirectory that goes on, or None when nothing beneath it travels."""
    if not _ships(frame, rules, name, is_dir=True):
        return None
    checkout = checkout_of(path) if os.path.lexists(path / ".git") else None
    if checkout is not None:  # a submodule, or a repository of its own
        return _Frame(path, name, _Repository(checkout, "", name + "/"), _base_rules(checkout))
    if frame.repository is None:
        return _Frame(path, name, None, rules)
    relative = frame.repository.relative(name)
    hidden = frame.ignored or looks_secret(path.name, True) or rules.ignored(relative, True)
    return _Frame(path, name, frame.repository, rules, hidden)


def _agent_path(name: str, is_dir: bool) -> bool:
    """An agent file planrun reads on the node, or a directory on the way to one."""
    if is_dir:
        return any(d == name or d.startswith(name + "/") for d in AGENT_DIRECTORIES)
    parent, _, base_name = name.rpartition("/")
    return parent in AGENT_DIRECTORIES and base_name.endswith(".md")


def _git_dir_files(git_dir: Path, name: str) -> Iterator[Shipped]:
    """The allow-list of a git directory, and of the git directories beneath its modules/
    and worktrees/; config files rebuilt from their safe keys."""
    roles = {str(git_dir): "git"}
    for directory in walk(git_dir):
        role = roles.pop(directory.path)
        directory_name = f"{name}/{directory.relative}" if directory.relative else name
        yield Shipped(directory_name, Path(directory.path))
        below = []
        for entry in directory.entries:
            path, entry_name = Path(entry.path), f"{directory_name}/{entry.name}"
            is_file = entry.is_file(follow_symlinks=False)
            if entry.is_dir(follow_symlinks=False):
                inner = _inner_role(role, entry.name, path)
                if inner is not None:
                    roles[entry.path] = inner
                    below.append(entry)
            elif is_file and role == "tree":
                if not (path.parent.name == "info" and entry.name in LEFT_IN_TREES):
                    yield Shipped(entry_name, path)
            elif is_file and role == "git" and entry.name in GIT_CONFIGS:
                yield Shipped(entry_name, path, safe_git_config(_config_text(path)))
            elif is_file and role == "git" and _git_file(entry.name):
                yield Shipped(entry_name, path)
        directory.below = below


def _inner_role(role: str, name: str, path: Path) -> str | None:
    """What a subdirectory of a git directory is: "git" (a git directory), "tree" (shipped
    whole), "search" (holds git directories), or None (left behind)."""
    if role == "tree":
        return "tree"
    if role == "search":
        return "git" if (path / "HEAD").is_file() else "search"
    if name in GIT_TREES:
        return "tree"
    return "search" if name in GIT_NESTED else None


def _git_file(name: str) -> bool:
    return name in GIT_FILES or name.startswith("sharedindex.")


def _config_text(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(MAX_CONFIG_BYTES).decode("utf-8", "surrogateescape")
