"""Where plan jobs run: the Executor seam, and the thread executor of this machine.

An executor runs independent units of work, at most `parallel` at a time, and hands back
a Future per unit. The multi-perspective run and a batch's driver talk only to this seam,
so running the same jobs on a cluster means another executor (a batch's Ray engine brings
one), not another run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Announced(Generic[T]):
    """Work plus what the submitting process does as it starts.

    `on_start` belongs to the driver (it may hold locks, files, the display); an executor
    that ships work to another process runs `on_start` itself and ships only `work`.
    """

    work: Callable[[], T]
    on_start: Callable[[], None]

    def __call__(self) -> T:
        self.on_start()
        return self.work()


class Executor(Protocol):
    """Runs units of work and reports each through a Future."""

    def submit(self, name: str, work: Callable[[], T]) -> Future[T]:
        """Queue one unit of work; its Future carries its result or its error."""

    def cancel(self) -> None:
        """Start nothing more: work not yet started ends at once, as cancelled."""

    @property
    def cancelled(self) -> threading.Event:
        """Set once cancel() was called; running work watches it to stop early."""


class ThreadExecutor:
    """Daemon threads on this machine, at most `parallel` running at once.

    Daemon threads: after Ctrl-C, a model call still in flight must not keep the process
    alive once the report is written.
    """

    def __init__(self, parallel: int) -> None:
        self._slots = threading.Semaphore(max(1, parallel))
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> threading.Event:
        return self._cancelled

    def submit(self, name: str, work: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        thread = threading.Thread(target=self._run, args=(work, future), name=name, daemon=True)
        thread.start()
        return future

    def cancel(self) -> None:
        self._cancelled.set()

    def _run(self, work: Callable[[], T], future: Future[T]) -> None:
        with self._slots:
            if self._cancelled.is_set():
                future.cancel()
                future.set_running_or_notify_cancel()
                return
            future.set_running_or_notify_cancel()
            try:
                future.set_result(work())
            except BaseException as error:
                future.set_exception(error)
