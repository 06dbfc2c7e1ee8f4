"""Value types shared across layers, so that no layer leaks docker or anthropic objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolRequest:
    """One operation for the in-container tool server (read, grep, bash, ...)."""

    op: str
    args: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None


@dataclass(frozen=True)
class ExecResult:
    """What the tool server answered: text for the model, or an error, plus details."""

    ok: bool
    output: str
    exit_code: int | None = None
    timed_out: bool = False
    truncated: bool = False
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text a model should see: the output, or the error message."""
        return self.output if self.ok else (self.error or "tool error")
