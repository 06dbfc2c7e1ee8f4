"""A model call from the agent loop: bounded by the run's time limit, stopped by a cancel."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sandbox_runner import Model
from sandbox_runner.agents.cancel import Cancel
from sandbox_runner.types import ModelCall, ModelRequest, ModelResponse

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

    Raises:
        CallStopped: cancelled, or the deadline passed.
        ModelError: whatever the model raised.
    """
    call = ModelCall(deadline=deadline, on_retry=lambda: on_retry(call))
    outcome: list[ModelResponse | BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            outcome.append(model.complete(request, call))
        except BaseException as error:  # handed to the loop's thread, which raises it
            outcome.append(error)
        finally:
            done.set()

    started = time.monotonic()
    threading.Thread(target=work, name="model-call", daemon=True).start()
    next_report = started + WAITING_EVENT_SECONDS
    while not done.wait(POLL_SECONDS):
        now = time.monotonic()
        if cancel.is_set():
            call.abort()
            raise CallStopped("interrupted")
        if now >= deadline:
            call.abort()
            raise CallStopped("while waiting for the model")
        if now >= next_report:
            next_report += WAITING_EVENT_SECONDS
            on_wait(waiting_text(now - started, call))
    [result] = outcome
    if isinstance(result, BaseException):
        # An attempt ends with a timeout at the deadline, just before the loop would see it.
        if cancel.is_set():
            raise CallStopped("interrupted")
        if time.monotonic() >= deadline - POLL_SECONDS:
            raise CallStopped("while waiting for the model")
        raise result
    return result


def waiting_text(seconds: float, call: ModelCall) -> str:
    """What the loop waits for: "waiting for the model, 42 s, attempt 2 of 7"."""
    text = f"waiting for the model, {seconds:.0f} s"
    if call.attempt > 1:
        text += f", attempt {call.attempt} of {call.attempts}"
    return text
