"""SIGINT and SIGTERM: the first stops the run, the second waits for its report, a third quits."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130


class StopOnSignal:
    """The process's SIGINT and SIGTERM handler.

    The first signal raises KeyboardInterrupt in the main thread, which stops every
    subagent, removes the containers and writes the report (within about a second).
    A second signal does not interrupt that: it only says what is happening, so the
    report is still written. A third quits at once, without the report; `planrun sandbox
    gc` removes what it leaves behind.
    """

    def __init__(self) -> None:
        self.received = 0

    def install(self) -> None:
        """Handle SIGINT and SIGTERM from now on."""
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)

    def finishing(self) -> None:
        """Ignore both signals from now on: the work is done and the process is exiting
        (the interpreter would otherwise die of a signal that comes while it shuts down)."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        self.received += 1
        if self.received == 1:
            raise KeyboardInterrupt
        if self.received == 2:
            _say("planrun: still stopping; writing the report (a third signal quits without it)")
            return
        _say("planrun: quitting without the report")
        os._exit(EXIT_INTERRUPTED)


def _say(message: str) -> None:
    # stderr may be closed, or in the middle of a write the signal interrupted.
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        print(message, file=sys.stderr, flush=True)
