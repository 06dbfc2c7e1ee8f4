"""The git guard's first look, made once on the host for every sandbox of a run or batch.

Each sandbox's git guard begins by walking the whole workspace (seconds at a million
files). The host walks it once (host_walk/: the same walk as the workspace check's) and
writes the tree as a seed (toolserver/git_seed.py) into a directory that every sandbox
mounts read-only from its start: its guard waits for the seed, checks each directory's
stamp and lists again only those that moved. A seed saves time, never protection: what
it says of a directory is taken only while that directory's stamp is the one the host saw.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sandbox_runner.sandbox.host_walk.shared import seed_directory, write_seed

__all__ = ["GuardSeed", "write_seed"]


class GuardSeed:
    """The seed directory of one workspace for the sandboxes of one run or batch: the walk
    that fills it begins (or a recent one is taken) when `start` is called."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._started = False
        self._directory: Path | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Begin the walk, or take a recent one of the same workspace (once)."""
        with self._lock:
            if not self._started:
                self._started = True
                self._directory = seed_directory(self.workspace)

    def path(self) -> Path | None:
        """The directory to mount (the seed may not be in it yet); None if none was
        started or none can be made (the sandbox's guard then walks for itself)."""
        with self._lock:
            return self._directory
