"""The git guard's first look, made once on the host for every sandbox of a run or batch.

Each sandbox's git guard begins by walking the whole workspace (seconds at a million
files). The host walks it once, with the guard's own code, and writes the tree as a seed
(toolserver/git_seed.py) that every later sandbox gets read-only: its guard checks each
directory's stamp and lists again only those that moved. A seed saves time, never
protection: what it says of a directory is taken only while that directory's stamp is the
one the host saw.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

from sandbox_runner.paths import planrun_home
from sandbox_runner.sandbox.toolserver.arguments import is_within
from sandbox_runner.sandbox.toolserver.git_seed import dump_seed
from sandbox_runner.sandbox.toolserver.git_tree import WorkspaceTree

log = logging.getLogger(__name__)

SEED_WAIT_SECONDS = 120.0
"""How long a sandbox waits for the host's walk (a million files take seconds); past it,
the sandbox walks for itself."""


class HostTree(WorkspaceTree):
    """The workspace's tree as the guard walks it, without the worktrees elsewhere that
    its links lead to: the host follows no link the repository holds."""

    def link(self, path: str) -> tuple[bool, str | None]:
        return False, None


def write_seed(workspace: Path, directory: Path) -> Path | None:
    """Walk WORKSPACE as a sandbox's guard does and write its seed into DIRECTORY (one
    file per workspace, replaced whole); None when the tree is too large to seed, or
    DIRECTORY is in the workspace (PLANRUN_HOME there, or a link into it): a sandbox that
    writes the workspace could replace the seed that the others trust."""
    root = os.path.realpath(workspace)
    if is_within(os.path.realpath(directory), root):
        return None
    tree = HostTree([root])
    tree.refresh()
    if tree.overflowed:
        return None
    data = dump_seed(tree)
    directory.mkdir(parents=True, exist_ok=True)
    if is_within(os.path.realpath(directory), root):  # a link made meanwhile
        return None
    path = directory / f"{hashlib.sha256(os.fsencode(root)).hexdigest()[:32]}.json"
    # Replaced, never removed: a sandbox being made may be about to mount the old one.
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".partial-")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.chmod(temporary, 0o644)  # the sandbox user reads it
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


class GuardSeed:
    """The seed of one workspace for the sandboxes of one run or batch: made in the
    background once `start` is called, waited for by `path`."""

    def __init__(self, workspace: Path, directory: Path | None = None) -> None:
        self.workspace = workspace
        self.directory = directory or planrun_home() / "cache" / "git-seed"
        self.seconds: float | None = None
        """How long the host's walk took, once done."""
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._path: Path | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Begin the walk (once)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._make, name="planrun-seed", daemon=True)
            self._thread.start()

    def path(self) -> Path | None:
        """The seed file, waiting for the walk under way; None if none was started, it
        failed or it takes too long (the sandbox then walks the workspace itself)."""
        with self._lock:
            started = self._thread is not None
        if not started or not self._done.wait(SEED_WAIT_SECONDS):
            return None
        return self._path

    def _make(self) -> None:
        begun = time.perf_counter()
        try:
            self._path = write_seed(self.workspace, self.directory)
        except (OSError, ValueError, RecursionError) as error:
            log.debug("no git guard seed for %s: %s", self.workspace, error)
        finally:
            self.seconds = time.perf_counter() - begun
            self._done.set()
