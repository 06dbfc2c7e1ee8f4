"""The thread executor: bounded parallelism, cancellation, errors carried by futures."""

from __future__ import annotations

import threading
import time
from functools import partial

import pytest

from sandbox_runner.runs.executor import ThreadExecutor


def test_no_more_than_parallel_units_run_at_once() -> None:
    executor = ThreadExecutor(parallel=2)
    running, peak, lock = 0, 0, threading.Lock()

    def unit(number: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return number * 10

    futures = [executor.submit(f"u{n}", partial(unit, n)) for n in range(6)]
    assert [future.result(5) for future in futures] == [0, 10, 20, 30, 40, 50]
    assert peak == 2


def test_cancel_starts_nothing_more_and_tells_running_work() -> None:
    executor = ThreadExecutor(parallel=1)
    started = threading.Event()

    def first() -> str:
        started.set()
        executor.cancelled.wait(5)
        return "stopped early"

    running = executor.submit("first", first)
    queued = executor.submit("second", lambda: "never")
    assert started.wait(5)
    executor.cancel()
    assert running.result(5) == "stopped early"
    for _ in range(100):
        if queued.done():
            break
        time.sleep(0.01)
    assert queued.cancelled()


def test_an_error_is_carried_by_its_future() -> None:
    def broken() -> None:
        raise ValueError("bad unit")

    future = ThreadExecutor(parallel=1).submit("broken", broken)
    with pytest.raises(ValueError, match="bad unit"):
        future.result(5)
