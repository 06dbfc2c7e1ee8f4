"""An answer's text on its way to the UI as it streams: each text block as it arrives and
when it is complete, the same events for a model that cannot stream, and the end of a block
an interrupt or an error cut short."""

from __future__ import annotations

from collections.abc import Callable

from sandbox_runner.types import ModelResponse, StreamEvent

Emit = Callable[..., None]
"""The loop's emit(kind, detail=...)."""


class TextStream:
    """Turns one model call's StreamEvents into the loop's `text`, `text_end` and
    `text_restart` events (see AgentEvent)."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._open = ""
        """The text of the block arriving now, not yet complete."""
        self._heard = False
        """Whether the model streamed anything."""

    def piece(self, event: StreamEvent) -> None:
        """One piece of the answer, as the model streamed it."""
        self._heard = True
        if event.kind == "text":
            self._open += event.text
            self._emit("text", detail=event.text)
        elif event.kind == "text_end":
            self._open = ""
            self._emit("text_end", detail=event.text)
        else:
            self._open = ""
            self._emit("text_restart")

    def close(self) -> None:
        """The call is over, answered or not: a block it left open ends as it stands (an
        interrupt keeps what the user already read)."""
        if self._open:
            text, self._open = self._open, ""
            self._emit("text_end", detail=text)

    def finished(self, response: ModelResponse) -> None:
        """The answer is complete: a model that did not stream it has its text blocks
        shown now, each whole."""
        if self._heard:
            return
        for block in response.content:
            if block.get("type") == "text" and block.get("text"):
                self._emit("text", detail=block["text"])
                self._emit("text_end", detail=block["text"])
