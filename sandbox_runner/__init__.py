"""planrun: read-only Plan subagents, each in its own hardened Docker container.

The two seams of the system are small Protocols defined here: a `Sandbox` runs tool
operations inside a container; the model seam comes with the agent loop.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self

from sandbox_runner.types import ExecResult, ToolRequest

__version__ = "0.1.0"


class Sandbox(Protocol):
    """Where a subagent's tools run: start it, call operations, stop it."""

    def start(self) -> None:
        """Create the container and wait until its tool server answers."""

    def call(self, request: ToolRequest) -> ExecResult:
        """Run one tool operation inside the sandbox and return its result."""

    def stop(self) -> None:
        """Stop and remove the container; safe to call more than once."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


__all__ = ["ExecResult", "Sandbox", "ToolRequest", "__version__"]
