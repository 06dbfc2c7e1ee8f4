"""Stopping agents: the user's interrupt, and the end of a turn for the subagents it started."""

from __future__ import annotations

import threading
from typing import Protocol


class Cancel(Protocol):
    """What a loop watches to stop early (a `threading.Event` is one)."""

    def is_set(self) -> bool:
        """Whether to stop now."""


class TurnStop:
    """Stops what one turn started (its Task subagents): set once the turn is over, and
    whenever the run it belongs to is cancelled (the user's interrupt)."""

    def __init__(self, run: Cancel) -> None:
        self._run = run
        self._ended = threading.Event()

    def end(self) -> None:
        """The turn is over; it never starts again (the next turn has a stop of its own)."""
        self._ended.set()

    def is_set(self) -> bool:
        return self._ended.is_set() or self._run.is_set()
