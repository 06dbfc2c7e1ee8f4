"""A session's plan file: `~/.planrun/plans/<random-english-name>.md`, chosen once, and
its staging copy, the only file the plan container's /plan holds.

The plan container never sees `~/.planrun/plans`: its /plan is seeded from the session's
staging directory, which holds just this one file, and what the plan agent writes there
comes back to the plan file through the staging copy, bounded and without links.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from sandbox_runner import Sandbox
from sandbox_runner.errors import PlanrunError
from sandbox_runner.limits import MAX_PLAN_BYTES
from sandbox_runner.paths import PLAN_MOUNT, planrun_home
from sandbox_runner.plans.files import UnsafeFileError, read_sandbox_file, replace_file
from sandbox_runner.plans.names import random_name
from sandbox_runner.plans.revisions import record_revision
from sandbox_runner.session.state import SessionState
from sandbox_runner.types import ToolRequest


class PlanFile:
    """The plan file of one session, as the host and the plan container see it."""

    def __init__(self, staging: Path, state: SessionState) -> None:
        self.staging = staging
        self.state = state
        self._synced: str | None = None
        """The staging copy's text when it last matched the plan file (None: unknown)."""
        self.problem = ""
        """Why the last copy back was not taken ("" when it was)."""

    @property
    def host_path(self) -> Path:
        assert self.state.plan_file is not None, "choose() first"
        return Path(self.state.plan_file)

    @property
    def container_path(self) -> str:
        return f"{PLAN_MOUNT}/{self.host_path.name}"

    @property
    def staged(self) -> Path:
        return self.staging / self.host_path.name

    def choose(self) -> Path:
        """The plan file, chosen the first time: a name no file or run already uses."""
        if self.state.plan_file is None:
            directory = planrun_home() / "plans"
            directory.mkdir(parents=True, exist_ok=True)
            for attempt in range(100):
                name = random_name()
                if attempt >= 50:
                    name = f"{name}-{secrets.randbelow(10_000)}"
                if (directory / name).exists():
                    continue  # a run's directory
                try:
                    # Reserved at once (an empty file counts as no plan yet): two sessions
                    # can never share a plan file.
                    os.close(os.open(directory / f"{name}.md", os.O_CREAT | os.O_EXCL, 0o644))
                except FileExistsError:
                    continue
                self.state.plan_file = str(directory / f"{name}.md")
                break
            else:
                raise FileExistsError(f"no free plan name under {directory}")
        return self.host_path

    def read(self) -> str | None:
        """The plan file's text, None when it does not exist (or is empty: a name is
        reserved with an empty file)."""
        if self.state.plan_file is None:
            return None
        text = read_sandbox_file(self.host_path, MAX_PLAN_BYTES)
        return text if text else None

    def exists(self) -> bool:
        """Whether the plan file holds a plan, as read() would say, from a stat alone: the
        plan session's system prompt asks before every model call."""
        if self.state.plan_file is None:
            return False
        try:
            info = self.host_path.lstat()
        except OSError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_size > 0

    def stage(self) -> None:
        """Put the plan file (or its absence) into the staging directory."""
        self.staging.mkdir(parents=True, exist_ok=True)
        text = self.read()
        if text is None:
            self.staged.unlink(missing_ok=True)
        else:
            replace_file(self.staged, text)
        self._synced = text

    def sync_out(self, source: str = "agent") -> None:
        """Bring what the plan agent wrote (the staging copy) to the plan file, keeping a
        revision made by SOURCE ("agent-write", "agent-edit", or "agent")."""
        if self.state.plan_file is None:
            return
        try:
            text = read_sandbox_file(self.staged, MAX_PLAN_BYTES)
        except UnsafeFileError as error:
            # Too large, or not a plain file: the plan file keeps its last good text.
            self.problem = f"the plan agent's copy was not taken ({error})"
            return
        if text is None or text == self._synced:
            return  # the plan agent changed nothing since it was staged
        if self._synced is None and not self._staged_is_newer():
            return  # a new process: only a copy written after the plan file counts
        self.host_path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(self.host_path, text)
        self._synced = text
        self.keep_revision(source)

    def keep_revision(self, source: str) -> None:
        """Keep the plan file's text as a revision made by SOURCE (the same text as the
        last revision is not kept twice). A store planrun will not write to is a problem
        to show, not a reason to lose the plan."""
        if self.state.plan_file is None:
            return
        try:
            text = self.read()
            if text is not None:
                record_revision(self.host_path, text, source)
        except (OSError, PlanrunError) as error:
            self.problem = f"no revision of the plan was kept ({error})"

    def edited_by_user(self) -> None:
        """The user edited the plan file in $EDITOR: stage it, and keep the revision."""
        self.stage()
        self.keep_revision("editor")

    def _staged_is_newer(self) -> bool:
        try:
            host = self.host_path.stat().st_mtime_ns
        except FileNotFoundError:
            return True
        return self.staged.stat().st_mtime_ns > host

    def restore(self, snapshot: str | None) -> None:
        """Put the plan file back as it was (a /reject); a plan that did not exist goes."""
        replace_file(self.host_path, snapshot or "")
        self.stage()
        self.keep_revision("restore")

    def push(self, sandbox: Sandbox) -> None:
        """Make the running plan container's copy match the plan file."""
        text = self.read()
        if text is None:
            # An empty file is the closest a write can come to "no plan yet".
            text = ""
        sandbox.call(ToolRequest("write", {"file_path": self.container_path, "content": text}))
        if not text:
            self.staged.unlink(missing_ok=True)
