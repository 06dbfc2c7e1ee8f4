"""A private git object store that snapshots the repository's working tree: a tree per
checkpoint, the files' contents kept once whatever the number of snapshots.

Its git directory is the session's own (`checkpoints/git`); the repository's `.git` is
never written, only borrowed from (its objects are an alternate, so committed files are
not stored twice). Nothing of the repository configures it (git_private.make_private_git,
which verify's copy of a repository uses too): no user or system git config is read,
and the snapshot's own attributes switch off every filter, line-end and
encoding conversion a `.gitattributes` in the repository could ask for, so a file is
kept byte for byte. What `.gitignore` ignores is not snapshotted; a nested repository is
kept as a link to its commit, not its files; a FIFO or socket is skipped.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.errors import PlanrunError
from sandbox_runner.git_private import GitError, PrivateGit, make_private_git

MAX_SNAPSHOT_FILE_BYTES = 16 * 1024 * 1024
"""A file larger than this is not kept in a checkpoint (a turn that changes one cannot
be undone)."""
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024
"""New content one snapshot may add to the store; past it, checkpoints stop (said)."""
ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding -diff -merge\n"
CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tautocrlf = false\n"
    "\tsafecrlf = false\n\tsymlinks = true\n\tfileMode = true\n[index]\n\tskipHash = false\n"
)
"""Files kept byte for byte, links as links, the executable bit kept."""


class CheckpointError(PlanrunError):
    """A snapshot or a read of the checkpoint store failed."""


@dataclass(frozen=True)
class Entry:
    """A file of a snapshot: its git mode (100644, 100755, 120000 for a link) and blob."""

    mode: str
    blob: str


@dataclass(frozen=True)
class Snapshot:
    """A tree of the working tree, and the files too large to be kept in it (with the
    size and modification time they had, to tell whether they changed)."""

    tree: str
    large: dict[str, tuple[int, int]]


class ShadowGit:
    """The snapshot store of one repository (WORKSPACE), kept in GIT_DIR."""

    def __init__(self, git_dir: Path, workspace: Path) -> None:
        self.git_dir, self.workspace = git_dir, workspace
        self.private = PrivateGit(git_dir, workspace)

    def init(self) -> None:
        """Create the store (again: its settings are rewritten every time)."""
        objects = self.workspace / ".git" / "objects"
        borrowed = objects if objects.is_dir() and not objects.is_symlink() else None
        self.private = make_private_git(
            self.git_dir, self.workspace, config=CONFIG, attributes=ATTRIBUTES, alternate=borrowed
        )
        # A snapshot cut short by a crash or kill -9 leaves its lock; only this session
        # writes the store, and it starts here.
        (self.git_dir / "index.lock").unlink(missing_ok=True)

    def snapshot(self) -> Snapshot:
        """The working tree as it is now, as a tree."""
        changed = self._git("ls-files", "-z", "-o", "-m", "--exclude-standard", work=True)
        large: dict[str, tuple[int, int]] = {}
        sizes: dict[str, int] = {}
        for path in filter(None, changed.split("\0")):
            try:
                info = os.lstat(self.workspace / path)
            except OSError:
                continue
            if info.st_size > MAX_SNAPSHOT_FILE_BYTES:
                large[path] = (info.st_size, info.st_mtime_ns)
            elif stat.S_ISREG(info.st_mode):
                sizes[path] = info.st_size
                _readable(self.workspace / path, info.st_mode)
        if sum(sizes.values()) > MAX_SNAPSHOT_BYTES:
            self._check_new_bytes(sizes)
        # A nested repository still in the index would make `git add` run `git status`
        # inside it, under its own config (core.fsmonitor, filters: programs of the
        # agent's choosing); dropped first, it is read again as new, from its HEAD only.
        dropped = [*large, *self._nested_repositories()]
        if dropped:
            listed = "".join(f"{path}\0" for path in dropped)
            self._git("update-index", "-z", "--force-remove", "--stdin", work=True, stdin=listed)
        specs = ".\0" + "".join(f":(exclude,literal){path}\0" for path in large)
        self._git(
            "add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul",
            work=True, stdin=specs, allowed=(0, 1),
        )  # fmt: skip
        return Snapshot(self._git("write-tree", work=True).strip(), large)

    def _nested_repositories(self) -> list[str]:
        """The paths the index keeps as links to a nested repository's commit."""
        staged = self._git("ls-files", "-z", "-s")
        records = (record.split("\t", 1) for record in filter(None, staged.split("\0")))
        return [path for meta, path in records if meta.startswith("160000 ")]

    def _check_new_bytes(self, sizes: dict[str, int]) -> None:
        """Refuse a snapshot that would add more than MAX_SNAPSHOT_BYTES to the store
        (what is stored already, or committed in the repository, costs nothing)."""
        paths = [path for path in sizes if "\n" not in path]
        ids = self._git(
            "hash-object", "--no-filters", "--stdin-paths", work=True, stdin="\n".join(paths)
        ).split()
        answers = self._git("cat-file", "--batch-check", stdin="\n".join(ids) + "\n").splitlines()
        stored = {line.split()[0] for line in answers if not line.endswith(" missing")}
        new = sum(sizes.values()) - sum(
            sizes[path] for path, blob in zip(paths, ids, strict=False) if blob in stored
        )
        if new > MAX_SNAPSHOT_BYTES:
            raise CheckpointError(
                f"{new // (1024 * 1024)} MiB of new files since the last checkpoint, over the "
                f"{MAX_SNAPSHOT_BYTES // (1024 * 1024)} MiB one checkpoint keeps (files "
                "that .gitignore ignores are not kept)"
            )

    def entries(self, tree: str, paths: list[str] | None = None) -> dict[str, Entry]:
        """The files of TREE (only PATHS, when given), by path."""
        if paths is not None and not paths:
            return {}
        args = ["ls-tree", "-r", "-z", "--full-tree", tree]
        if paths is not None:
            args += ["--", *(f":(literal){path}" for path in paths)]
        found: dict[str, Entry] = {}
        for record in filter(None, self._git(*args).split("\0")):
            meta, path = record.split("\t", 1)
            mode, kind, blob = meta.split(" ")
            if kind == "blob":
                found[path] = Entry(mode, blob)
        return found

    def changed(self, before: str, after: str) -> list[str]:
        """The paths whose file differs between two trees (added, removed or changed)."""
        if before == after:
            return []
        out = self._git("diff-tree", "-r", "-z", "--no-renames", "--name-only", before, after)
        return sorted(filter(None, out.split("\0")))

    def blob(self, blob: str) -> bytes:
        """A file's content."""
        return self._git_bytes("cat-file", "blob", blob)

    def _git(
        self,
        *args: str,
        work: bool = False,
        stdin: str | None = None,
        allowed: tuple[int, ...] = (0,),
    ) -> str:
        out = self._git_bytes(*args, work=work, stdin=stdin, allowed=allowed)
        return out.decode("utf-8", "surrogateescape")

    def _git_bytes(
        self,
        *args: str,
        work: bool = False,
        stdin: str | None = None,
        allowed: tuple[int, ...] = (0,),
    ) -> bytes:
        data = stdin.encode("utf-8", "surrogateescape") if stdin is not None else None
        try:
            return self.private.run(*args, work=work, stdin=data, allowed=allowed)[1]
        except GitError as error:
            raise CheckpointError(str(error)) from None


def _readable(path: Path, mode: int) -> None:
    """Give a file its owner's read bit back: a command could take it away, and git,
    unable to read the file, would keep its old content (the change hidden from /diff
    and /undo)."""
    if not mode & stat.S_IRUSR:
        # Never through a link (where the platform cannot chmod one, not at all).
        with contextlib.suppress(OSError, NotImplementedError):
            os.chmod(path, stat.S_IMODE(mode) | stat.S_IRUSR, follow_symlinks=False)
