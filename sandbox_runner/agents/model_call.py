"""A model call from the agent loop: bounded by the run's time limit, stopped by a cancel,
its answer streamed to the loop's thread."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from sandbox_runner import Model
from sandbox_runner.agents.cancel import Cancel
from sandbox_runner.types import ModelCall, ModelRequest, ModelResponse, StreamEvent

POLL_SECONDS = 0.1
"""How often the loop checks for a cancel or the deadline while the model answers."""
WAITING_EVENT_SECONDS = 1.0
"""How often the loop reports what it waits for."""


class CallStopped(Exception):
    """Control flow: the call was given up because of a cancel or the deadline."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def complete_within(
    model: Model,
    request: ModelRequest,
    *,
    deadline: float,
    cancel: Cancel,
    on_wait: Callable[[str], None],
    on_retry: Callable[[ModelCall], None],
    on_stream: Callable[[StreamEvent], None] | None = None,
) -> ModelResponse:
    """The model's answer, or CallStopped as soon as the run is cancelled or out of time.

    The call runs in a daemon thread, so a request that hangs never holds the loop: at a
    cancel or the deadline the call is aborted (no further attempt or retry wait) and
    left behind; its attempt cannot outlast the deadline (the model caps its timeout).

    Args:
        deadline: time.monotonic() at which the run's time limit ends.
        cancel: set when the whole run is interrupted.
        on_wait: told every second what the loop waits for, e.g. "waiting for the
            model, 42 s, attempt 2 of 7".
        on_retry: told when the model retries, with the call's attempt and problem.
        on_stream: when given, the answer is streamed and this hears its text as it
            arrives, in the caller's thread (never after CallStopped).

    Raises:
        CallStopped: cancelled, or the deadline passed.
        ModelError: whatever the model raised.
    """
    arrived: queue.SimpleQueue[StreamEvent | _Outcome] = queue.SimpleQueue()
    call = ModelCall(
        deadline=deadline,
        on_retry=lambda: on_retry(call),
        on_stream=arrived.put if on_stream is not None else None,
    )

    def work() -> None:
        try:
            arrived.put(_Outcome(model.complete(request, call)))
        except BaseException as error:  # handed to the loop's thread, which raises it
            arrived.put(_Outcome(error))

    started = time.monotonic()
    threading.Thread(target=work, name="model-call", daemon=True).start()
    next_report = started + WAITING_EVENT_SECONDS
    while True:
        try:
            item: StreamEvent | _Outcome | None = arrived.get(timeout=POLL_SECONDS)
        except queue.Empty:
            item = None
        if isinstance(item, _Outcome):
            return _result(item.value, cancel, deadline)
        now = time.monotonic()
        if cancel.is_set():
            call.abort()
            raise CallStopped("interrupted")
        if now >= deadline:
            call.abort()
            raise CallStopped("while waiting for the model")
        if item is not None and on_stream is not None:
            on_stream(item)
        if now >= next_report:
            next_report += WAITING_EVENT_SECONDS
            on_wait(waiting_text(now - started, call))


class _Outcome:
    """How the model call ended: its answer, or what it raised."""

    def __init__(self, value: ModelResponse | BaseException) -> None:
        self.value = value


def _result(value: ModelResponse | BaseException, cancel: Cancel, deadline: float) -> ModelResponse:
    if isinstance(value, BaseException):
        # An attempt ends with a timeout at the deadline, just before the loop would see it.
        if cancel.is_set():
            raise CallStopped("interrupted")
        if time.monotonic() >= deadline - POLL_SECONDS:
            raise CallStopped("while waiting for the model")
        raise value
    return value


def waiting_text(seconds: float, call: ModelCall) -> str:
    """What the loop waits for: "waiting for the model, 42 s, attempt 2 of 7"."""
    text = f"waiting for the model, {seconds:.0f} s"
    if call.attempt > 1:
        text += f", attempt {call.attempt} of {call.attempts}"
    return text
