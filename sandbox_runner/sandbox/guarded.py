"""A work sandbox with the host's watch around it: protected files written only by planrun
after an approval, what a call planted moved out, and the disk a session may fill capped.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from sandbox_runner import Sandbox, SandboxBase
from sandbox_runner.errors import PlanrunError
from sandbox_runner.protected import workspace_protection
from sandbox_runner.sandbox.host_edit import host_edit
from sandbox_runner.sandbox.workspace_guard import Finding, WorkspaceGuard
from sandbox_runner.types import ExecResult, ToolRequest

DISK_POLL_SECONDS = 0.2
NOISE_BYTES = 1024 * 1024
NOISE_FILES = 1024
"""Growth during one command below these never stops it (other programs write too)."""


class DiskCap:
    """How much a session's commands have added to the workspace's file system: bytes,
    and files (one per KiB of the cap: empty files cost inodes, not blocks).

    The kernel's counts of free blocks and inodes (statvfs) are read before, during and
    after each command; a command that takes the session's total past the cap is stopped
    within DISK_POLL_SECONDS. Other programs writing the same file system during a
    command count too: the cap errs on the side of stopping.
    """

    def __init__(self, workspace: Path, cap_bytes: int) -> None:
        self.workspace = workspace
        self.cap_bytes = cap_bytes
        self.cap_files = max(1, cap_bytes // 1024)
        self.grown = (0, 0)
        self._lock = threading.Lock()

    def free(self) -> tuple[int, int]:
        """Free bytes and inodes of the workspace's file system (0 inodes where it has
        no count of them)."""
        info = os.statvfs(self.workspace)
        return info.f_bavail * info.f_frsize, info.f_favail if info.f_files else 0

    def over(self, before: tuple[int, int]) -> bool:
        now = self.free()
        bytes_during, files_during = before[0] - now[0], before[1] - now[1]
        too_big = bytes_during > NOISE_BYTES and self.grown[0] + bytes_during > self.cap_bytes
        too_many = files_during > NOISE_FILES and self.grown[1] + files_during > self.cap_files
        return too_big or too_many

    def settle(self, before: tuple[int, int]) -> None:
        now = self.free()
        with self._lock:
            self.grown = (
                self.grown[0] + before[0] - now[0],
                self.grown[1] + before[1] - now[1],
            )

    def message(self) -> str:
        cap = self.cap_bytes // (1024 * 1024)
        return (
            f"Stopped: this session's commands grew the repository past its cap of {cap} MiB "
            f"or {self.cap_files:,} files (work_disk_mb). Remove what is not needed (build "
            "output, downloads) before going on; only the user can raise the cap, in "
            "~/.planrun/config.yaml."
        )


class GuardedWorkSandbox(SandboxBase):
    """Wraps the work sandboxes of one session (made by `make`, again after a stop)."""

    def __init__(
        self,
        make: Callable[[], Sandbox],
        guarded: Callable[[], tuple[WorkspaceGuard, DiskCap]],
        notify: Callable[[str], None] = lambda _text: None,
    ) -> None:
        """
        Args:
            make: a new inner sandbox (the workspace's protected entries mounted read-only).
            guarded: the session's guard and disk cap (made at the first need: the look at
                the tree then happens in the sandbox's background start).
            notify: tells the user what the guard did.
        """
        self.make, self._guarded, self.notify = make, guarded, notify
        self._inner: Sandbox | None = None
        self._lock = threading.Lock()

    @property
    def guard(self) -> WorkspaceGuard:
        return self._guarded()[0]

    @property
    def disk(self) -> DiskCap:
        return self._guarded()[1]

    def start(self) -> None:
        self._running()

    def stop(self) -> None:
        with self._lock:
            inner, self._inner = self._inner, None
        if inner is not None:
            inner.stop()
            self._report(self.guard.check())

    def call(self, request: ToolRequest) -> ExecResult:
        adopted = self.guard.adopt()
        if adopted:
            listed = ", ".join(finding.path for finding in adopted)
            self.notify(f"planrun watches {listed} (protected; added outside the session)")
        relative = _protected_target(request)
        if relative is not None:
            # The policy asked the user about this very write, in every mode.
            result = host_edit(self.guard.workspace, relative, request)
            if result.ok:
                self.guard.written(relative)
            return self._with_findings(result, self.guard.check())
        try:
            with self.guard.watching():
                if request.op == "bash":
                    result = self._watched(request)
                else:
                    result = self._running().call(request)
        except BaseException:
            # The call failed (its container died, say): what it planted still goes.
            self._report(self.guard.check())
            raise
        return self._with_findings(result, self.guard.check())

    def _running(self) -> Sandbox:
        with self._lock:
            if self._inner is None:
                inner = self.make()
                inner.start()
                self._inner = inner
            return self._inner

    def _watched(self, request: ToolRequest) -> ExecResult:
        inner = self._running()
        before = self.disk.free()
        done = threading.Event()
        tripped = threading.Event()

        def watch() -> None:
            while not done.wait(DISK_POLL_SECONDS):
                if self.disk.over(before):
                    tripped.set()
                    self._kill(inner)
                    return

        watcher = threading.Thread(target=watch, name="disk-cap", daemon=True)
        watcher.start()
        try:
            result = inner.call(request)
        except PlanrunError:
            if not tripped.is_set():
                raise
            result = ExecResult(False, "", exit_code=137)
        finally:
            done.set()
            watcher.join()
            self.disk.settle(before)
        if tripped.is_set():
            self.notify("stopped a command: the session's disk cap (work_disk_mb) was reached")
            return ExecResult(False, "", exit_code=137, error=self.disk.message())
        return result

    def _kill(self, inner: Sandbox) -> None:
        """Remove the container the command runs in; the next call starts a new one."""
        with self._lock:
            if self._inner is inner:
                self._inner = None
        with contextlib.suppress(PlanrunError):
            inner.stop()

    def _with_findings(self, result: ExecResult, findings: list[Finding]) -> ExecResult:
        if not findings:
            return result
        self._report(findings)
        note = (
            "\n\n[planrun moved these out of the repository, because they are protected: "
            + "; ".join(finding.describe() for finding in findings)
            + ". A protected file is written only with the user's approval: use Write or Edit "
            "on it, and the user is asked.]"
        )
        if result.ok:
            return replace(result, output=result.output + note)
        return replace(result, error=(result.error or "") + note)

    def _report(self, findings: list[Finding]) -> None:
        for finding in findings:
            self.notify(f"protected: {finding.describe()}")


def _protected_target(request: ToolRequest) -> str | None:
    if request.op not in ("write", "edit"):
        return None
    protected = workspace_protection(str(request.args.get("file_path", "")))
    return protected[0] if protected else None
