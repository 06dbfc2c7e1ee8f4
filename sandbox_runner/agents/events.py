"""What an agent run reports as it goes: typed progress events a UI can show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class AgentEvent:
    """A step a UI can show.

    Kinds: turn_started, waiting (for the model; detail says how long and which
    attempt), model_retry (detail says why and when), tool_call, tool_result,
    plan_written, notice (detail is one line for the user), finished, failed; and, from
    a loop that streams its text (LoopConfig.stream_text): text (detail is the text that
    just arrived), text_end (the block is complete, or was cut short by an interrupt or
    an error; detail is all of it) and text_restart (a retry: the block so far is void).
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
