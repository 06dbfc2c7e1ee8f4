"""What an agent run reports as it goes: typed progress events a UI can show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class AgentEvent:
    """A step a UI can show.

    Kinds: turn_started, waiting (for the model; detail says how long and which
    attempt), model_retry (detail says why and when), tool_call, tool_result,
    plan_written, notice (detail is one line for the user), finished, failed.
    """

    kind: str
    label: str
    turn: int
    tool: str | None
    detail: str
    tool_calls: int
    tokens: int
    elapsed: float


EventSink = Callable[[AgentEvent], None]
"""Receives every event of a run, in order."""
