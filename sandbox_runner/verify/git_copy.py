"""A private git directory that reads a repository without its config: git runs on the
host here, so nothing the repository configures may run (core.fsmonitor, hooks, aliases,
filter and diff drivers, an editor, a pager).

The repository's `.git` is never handed to git. A temporary git directory gets copies of
what naming commits needs (HEAD, refs, packed-refs, the index, info/exclude, shallow),
the repository's objects as an alternate (read, never written), and a config rebuilt
from the keys that can carry no command (git_config.safe_git_config), with fsmonitor and
hooks switched off on top. No user or system git config is read, and the attributes
switch off every filter and diff driver a `.gitattributes` could name. No transport
is allowed: a missing object is an error, never fetched.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sandbox_runner.errors import PlanrunError
from sandbox_runner.git_config import safe_git_config
from sandbox_runner.runs.workspace import git_dir, git_metadata_problem
from sandbox_runner.safe_io import UnsafeFileError, read_beneath
from sandbox_runner.tree_walk import TreeTooLargeError, remove_tree, walk

__all__ = ["GitError", "RepositoryGit", "private_git"]

GIT_TIMEOUT_SECONDS = 120
MAX_METADATA_FILES = 200_000
"""Entries of refs/ (files and directories) copied at most; a repository with more is
refused rather than half read."""
MAX_SMALL_FILE_BYTES = 64 * 1024 * 1024
FORCED_CONFIG = (
    "[core]\n\tfsmonitor = false\n\thooksPath = /dev/null\n\tuntrackedCache = false\n"
    "\tquotePath = false\n[gc]\n\tauto = 0\n[protocol]\n\tallow = never\n"
)
"""protocol.allow = never: a repository claiming to be a partial clone would have git fetch
the objects it lacks from a remote it names (ssh to any host); verify uses no transport."""
ATTRIBUTES = "* -filter -diff -merge -ident -working-tree-encoding\n"


class GitError(PlanrunError):
    """The repository cannot be read (not a git repository, a git command failed)."""


class RepositoryGit:
    """git commands against one repository, through a private git directory."""

    def __init__(self, private_dir: Path, workspace: Path) -> None:
        self.private_dir, self.workspace = private_dir, workspace

    def run(self, *args: str, allowed: tuple[int, ...] = (0,)) -> tuple[int, str]:
        """git ARGS in the working tree: (exit status, standard output).

        Raises:
            GitError: git could not run, or exited with a status not in `allowed`.
        """
        env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
        env |= {
            "GIT_DIR": str(self.private_dir),
            "GIT_WORK_TREE": str(self.workspace),
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
        }
        try:
            done = subprocess.run(
                ["git", "--no-pager", *args],
                capture_output=True,
                env=env,
                cwd=self.workspace,
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise GitError(f"git {args[0]} failed: {error}") from None
        if done.returncode not in allowed:
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            raise GitError(f"git {args[0]} failed: {lines[-1] if lines else done.returncode}")
        return done.returncode, done.stdout.decode("utf-8", "surrogateescape")

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
        _build(workspace, directory, common, private)
        yield RepositoryGit(private, workspace)
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


def _build(workspace: Path, directory: Path, common: Path, private: Path) -> None:
    (private / "objects" / "info").mkdir(parents=True)
    (private / "info").mkdir()
    (private / "refs").mkdir()
    head = _small(workspace, directory / "HEAD")
    if head is None:
        raise GitError(f"{directory} has no HEAD: not a git repository")
    (private / "HEAD").write_bytes(head)
    config = _small(workspace, common / "config") or b""
    text = safe_git_config(config.decode("utf-8", "replace")) + FORCED_CONFIG
    (private / "config").write_text(text)
    objects = (common / "objects").resolve()
    if not objects.is_relative_to(workspace) or not objects.is_dir():
        raise GitError(f"{common}/objects leads outside the repository; it is not read")
    _check_alternates(workspace, objects)
    (private / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    (private / "info" / "attributes").write_text(ATTRIBUTES)
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


def _check_alternates(workspace: Path, objects: Path, depth: int = 0) -> None:
    """Refuse alternates (git follows them from the repository's objects, up to 5 deep)
    that lead outside the repository: git would read another repository's objects."""
    data = _small(workspace, objects / "info" / "alternates")
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        target = (objects / entry).resolve()
        if entry.startswith('"') or not target.is_relative_to(workspace) or depth >= 5:
            raise GitError(
                f"{objects}/info/alternates leads outside the repository; it is not read"
            )
        _check_alternates(workspace, target, depth + 1)


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
