"""planrun: read-only Plan subagents, each in its own hardened Docker container.

The two seams of the system are small Protocols defined here: a `Sandbox` runs tool
operations inside a container; a `Model` answers Messages API requests (the Anthropic
API, or a recorded conversation played back).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Protocol, Self

from sandbox_runner.types import ExecResult, ModelCall, ModelRequest, ModelResponse, ToolRequest

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


class SandboxBase(ABC):
    """Shared lifecycle of sandbox implementations: a context manager that always stops."""

    @abstractmethod
    def start(self) -> None:
        """Create the sandbox and wait until it answers."""

    @abstractmethod
    def call(self, request: ToolRequest) -> ExecResult:
        """Run one tool operation inside the sandbox."""

    @abstractmethod
    def stop(self) -> None:
        """Remove the sandbox; safe to call more than once."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class Model(Protocol):
    """A Messages API model with tool use."""

    def complete(self, request: ModelRequest, call: ModelCall | None = None) -> ModelResponse:
        """Send one request and return the whole response (retries are the model's job).

        `call`, when given, bounds the call (its deadline, an abort) and hears of retries.
        """

    def count_tokens(self, request: ModelRequest) -> int:
        """Input tokens the request would use (system prompt, tools and messages)."""


__all__ = [
    "ExecResult",
    "Model",
    "ModelCall",
    "ModelRequest",
    "ModelResponse",
    "Sandbox",
    "ToolRequest",
    "__version__",
]
