"""A session's Docker sandboxes: the work container (guarded, its disk growth capped), the
plan container, and one per Task subagent."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox_runner import Sandbox

if TYPE_CHECKING:
    from sandbox_runner.sandbox.factory import DockerSandboxes
    from sandbox_runner.sandbox.guarded import DiskCap
    from sandbox_runner.sandbox.workspace_guard import WorkspaceGuard
    from sandbox_runner.session.edit_watch import OnDiff


class DockerSessionSandboxes:
    """A session's containers: the work one (workspace writable but for its protected
    entries, watched by one guard), the plan one, and one per Task subagent. Docker is
    first asked for the first of them: the terminal's prompt is up before that, which
    happens in the background."""

    def __init__(
        self, sandboxes: DockerSandboxes, session: str, scratch: Path, disk_cap_mb: int
    ) -> None:
        self.sandboxes = sandboxes
        self.session = session
        self.scratch = scratch
        """Where Task subagents' plan directories go (the session's own directory)."""
        self.disk_cap_mb = disk_cap_mb
        self.notify: Callable[[str], None] = lambda _text: None
        """Tells the user what the guard did (the session's UI sets it)."""
        self.on_diff: OnDiff = lambda _diff, _request: None
        """Shows the user the diff of each Write and Edit made (the session's UI sets it)."""
        self._guarded: tuple[WorkspaceGuard, DiskCap] | None = None
        self._lock = threading.Lock()

    def plan(self, plan_dir: Path) -> Sandbox:
        return self.sandboxes.plan(plan_dir, session=self.session, agent="plan-session")

    def read_only(self) -> Sandbox:
        self.scratch.mkdir(parents=True, exist_ok=True)
        plan_dir = Path(tempfile.mkdtemp(dir=self.scratch))
        return self.sandboxes.plan(plan_dir, session=self.session, agent="task")

    def work(self) -> Sandbox:
        from sandbox_runner.sandbox.guarded import GuardedWorkSandbox
        from sandbox_runner.session.edit_watch import EditWatch

        def make() -> Sandbox:
            protected = tuple(self._guard()[0].read_only_paths())
            return self.sandboxes.work(
                session=self.session, agent="work-session", protected=protected
            )

        guarded = GuardedWorkSandbox(make, self._guard, lambda text: self.notify(text))
        workspace = self.sandboxes.workspace
        return EditWatch(guarded, workspace, lambda diff, request: self.on_diff(diff, request))

    def _guard(self) -> tuple[WorkspaceGuard, DiskCap]:
        """One guard and one disk cap for every writing sandbox of the session: made
        with the first (the look at the tree happens in the background start)."""
        from sandbox_runner.sandbox.guarded import DiskCap
        from sandbox_runner.sandbox.workspace_guard import WorkspaceGuard

        with self._lock:
            if self._guarded is None:
                workspace = self.sandboxes.workspace
                guard = WorkspaceGuard(workspace, self.scratch.parent / "quarantine")
                self._guarded = guard, DiskCap(workspace, self.disk_cap_mb * 1024 * 1024)
            return self._guarded
