"""The diff of every Write and Edit a session's work sandbox makes: the file is read on the
host just before the call and just after it, so what the user is shown is what changed,
approved or not (acceptEdits shows nothing else)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner import Sandbox, SandboxBase
from sandbox_runner.safe_io import UnsafeFileError
from sandbox_runner.session.diffs import FileDiff, build_diff, read_text, relative_path
from sandbox_runner.types import ExecResult, ToolRequest

OnDiff = Callable[[FileDiff, ToolRequest], None]


class EditWatch(SandboxBase):
    """Wraps a writing sandbox; ON_DIFF is told the diff of each Write or Edit it made."""

    def __init__(self, inner: Sandbox, workspace: Path, on_diff: OnDiff) -> None:
        self.inner, self.workspace, self.on_diff = inner, workspace, on_diff

    def start(self) -> None:
        self.inner.start()

    def stop(self) -> None:
        self.inner.stop()

    def call(self, request: ToolRequest) -> ExecResult:
        relative = relative_path(str(request.args.get("file_path", "")))
        if request.op not in ("write", "edit") or relative is None:
            return self.inner.call(request)
        before = self._read(relative)
        result = self.inner.call(request)
        after = self._read(relative) if result.ok else None
        if before is not None and after is not None:
            diff = build_diff(relative, before.text, after.text)
            if diff.lines:
                self.on_diff(diff, request)
        return result

    def _read(self, relative: str) -> _Read | None:
        """The file's text (None: it does not exist); None when it cannot be read."""
        try:
            return _Read(read_text(self.workspace, relative))
        except UnsafeFileError:
            return None


@dataclass(frozen=True)
class _Read:
    text: str | None
