"""A sandbox started in the background, so the container boots while the model thinks."""

from __future__ import annotations

import threading

from sandbox_runner import Sandbox, SandboxBase
from sandbox_runner.types import ExecResult, ToolRequest


class BackgroundStart(SandboxBase):
    """Starts a sandbox in a thread, so the container boots while the model thinks.

    The first tool call waits for the start to finish; a start failure surfaces there,
    as the error of that call.
    """

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="sandbox-start", daemon=True)

    def _start(self) -> None:
        try:
            self.inner.start()
        except BaseException as error:
            self._error = error

    def start(self) -> None:
        self._thread.start()

    def call(self, request: ToolRequest) -> ExecResult:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self.inner.call(request)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._thread.join()
        self.inner.stop()
