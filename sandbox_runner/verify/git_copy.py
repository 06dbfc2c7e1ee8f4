"""A private git directory that reads a repository without its config: git runs on the
host here, so nothing the repository configures may run (core.fsmonitor, hooks, aliases,
filter and diff drivers, an editor, a pager).

The repository's `.git` is never handed to git. A temporary git directory gets copies of
what naming commits needs (HEAD, refs, packed-refs, the index, info/exclude, shallow),
the repository's objects as an alternate (read, never written), and a config rebuilt
from the keys that can carry no command (git_config.safe_git_config), with fsmonitor and
hooks switched off on top (git_private.make_private_git, which the /undo checkpoint
store uses too). No user or system git config is read, and the attributes switch off
every filter and diff driver a `.gitattributes` could name. No transport is allowed: a
missing object is an error, never fetched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sandbox_runner.git_config import safe_git_config
from sandbox_runner.git_private import GitError, PrivateGit, check_alternates, make_private_git
from sandbox_runner.runs.workspace import git_dir, git_metadata_problem
from sandbox_runner.safe_io import UnsafeFileError, read_beneath
from sandbox_runner.tree_walk import TreeTooLargeError, remove_tree, walk

__all__ = ["GitError", "RepositoryGit", "private_git"]

MAX_METADATA_FILES = 200_000
"""Entries of refs/ (files and directories) copied at most; a repository with more is
refused rather than half read."""
MAX_SMALL_FILE_BYTES = 64 * 1024 * 1024
ATTRIBUTES = "* -filter !diff -merge -ident -working-tree-encoding\n"
"""info/attributes outranks every .gitattributes. `!diff` leaves no diff driver (and
`-diff` would call every file binary, which the judge's diff must show as text); the
diffs also pass --no-ext-diff and --no-textconv, and the config names no driver.
Line-end conversion stays: it decides whether a checked-out file differs from its commit."""


class RepositoryGit:
    """git commands against one repository, through a private git directory."""

    def __init__(self, private: PrivateGit) -> None:
        self.private = private

    def run(self, *args: str, allowed: tuple[int, ...] = (0,)) -> tuple[int, str]:
        """git ARGS in the working tree: (exit status, standard output).

        Raises:
            GitError: git could not run, or exited with a status not in `allowed`.
        """
        status, out = self.private.run(*args, allowed=allowed)
        return status, out.decode("utf-8", "surrogateescape")

    def paths(self, *args: str) -> list[str]:
        """The NUL-separated paths git ARGS prints."""
        return [path for path in self.run(*args)[1].split("\0") if path]


@contextmanager
def private_git(workspace: Path) -> Iterator[RepositoryGit]:
    """A RepositoryGit for the repository at workspace, its private directory removed after.

    Raises:
        GitError: not a git repository, or its metadata leads outside it.
    """
    workspace = workspace.resolve()
    directory = git_dir(workspace)
    if directory is None:
        problem = git_metadata_problem(workspace)
        raise GitError(problem or f"{workspace} is not a git repository (no .git)")
    common = _common_dir(workspace, directory)
    # Removed without recursion (unlike TemporaryDirectory): the refs copied may be
    # nested deeper than Python's recursion limit.
    temporary = Path(tempfile.mkdtemp(prefix="planrun-verify-git-"))
    try:
        private = temporary / "git"
        yield RepositoryGit(_build(workspace, directory, common, private))
    finally:
        remove_tree(temporary)


def _common_dir(workspace: Path, directory: Path) -> Path:
    pointer = _small(workspace, directory / "commondir")
    if pointer is None:
        return directory
    common = (directory / pointer.decode(errors="replace").strip()).resolve()
    if not common.is_relative_to(workspace):
        raise GitError(f"{directory}/commondir leads outside the repository; it is not read")
    return common


def _build(workspace: Path, directory: Path, common: Path, private: Path) -> PrivateGit:
    head = _small(workspace, directory / "HEAD")
    if head is None:
        raise GitError(f"{directory} has no HEAD: not a git repository")
    objects = (common / "objects").resolve()
    if not objects.is_relative_to(workspace) or not objects.is_dir():
        raise GitError(f"{common}/objects leads outside the repository; it is not read")
    check_alternates(workspace, objects)
    config = _small(workspace, common / "config") or b""
    made = make_private_git(
        private,
        workspace,
        config=safe_git_config(config.decode("utf-8", "replace")),
        attributes=ATTRIBUTES,
        alternate=objects,
    )
    (private / "HEAD").write_bytes(head)
    for name, source in (
        ("packed-refs", common),
        ("shallow", common),
        ("index", directory),
        ("info/exclude", common),
    ):
        _copy_file(workspace, source / name, private / name)
    for name in os.listdir(directory):
        if name.startswith("sharedindex."):
            _copy_file(workspace, directory / name, private / name)
    _copy_tree(workspace, common / "refs", private / "refs")
    if (common / "reftable").is_dir():
        _copy_tree(workspace, common / "reftable", private / "reftable")
    return made


def _small(workspace: Path, path: Path) -> bytes | None:
    try:
        return read_beneath(workspace, path, MAX_SMALL_FILE_BYTES)
    except UnsafeFileError as error:
        raise GitError(f"git metadata not read: {error}") from None


def _copy_file(workspace: Path, source: Path, target: Path) -> None:
    data = _small(workspace, source)
    if data is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _copy_tree(workspace: Path, source: Path, target: Path) -> None:
    """Regular files of source, links and everything else skipped (a ref is a file)."""
    if not source.is_dir() or source.is_symlink():
        return
    try:
        for directory in walk(source, skip_unlistable=True, max_entries=MAX_METADATA_FILES):
            (target / directory.relative).mkdir(parents=True, exist_ok=True)
            for entry in directory.entries:
                if entry.is_file(follow_symlinks=False):
                    _copy_file(workspace, Path(entry.path), target / directory.relative_of(entry))
    except TreeTooLargeError as error:
        raise GitError(f"more than {MAX_METADATA_FILES} files under {source}") from error
