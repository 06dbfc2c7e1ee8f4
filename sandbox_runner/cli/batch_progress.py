"""Progress of a batch: a rich bar, counts and the running jobs on a terminal; plain lines
elsewhere. Skipped jobs are not in the bar's total, so the ETA covers only work left to do;
a task's synthesis joins the total when its plans are done, and until then the bar says how
many may still join."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichProgress
from rich.table import Table
from rich.text import Text

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.cli.progress import LiveDisplay
from sandbox_runner.safe_text import one_line


@dataclass
class _Running:
    key: str
    started: float
    turn: int = 0
    tool: str = ""
    tokens: int = 0


class JobsRemaining(ProgressColumn):
    """Time left: the average time per finished job so far, times the jobs left. (rich's
    own estimate, a rate over recent samples, swings wildly when jobs end together.)"""

    def render(self, task: Task) -> Text:
        if not task.completed or task.total is None or task.elapsed is None:
            return Text("-:--:--", style="progress.remaining")
        left = task.elapsed / task.completed * max(task.total - task.completed, 0)
        return Text(str(timedelta(seconds=round(left))), style="progress.remaining")


def syntheses_text(count: int) -> str:
    """ "1 synthesis", "2 syntheses"."""
    return f"{count} synthesis" if count == 1 else f"{count} syntheses"


class BatchProgress(LiveDisplay):
    """Receives job events (driver thread) and agent events (worker threads)."""

    def __init__(
        self,
        to_run: int,
        skipped: int,
        *,
        live: bool,
        stream: TextIO | None = None,
        syntheses: int = 0,
    ) -> None:
        self._stream = stream or sys.stderr
        self._lock = threading.Lock()
        self.to_run, self.skipped = to_run, skipped
        self.syntheses_to_come = syntheses
        """Syntheses that may still join `to_run` (at most; too few valid plans, none)."""
        self.done = self.failed = self.budget = 0
        self.cost = 0.0
        self._running: dict[str, _Running] = {}
        self._live: Live | None = None
        self._bar: RichProgress | None = None
        if live:
            console = Console(file=self._stream)
            self._bar = RichProgress(
                SpinnerColumn(),
                TextColumn("Plans"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[to_come]}"),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                JobsRemaining(),
                TextColumn("{task.fields[cost]}"),
                console=console,
                speed_estimate_period=300,
            )
            self._task = self._bar.add_task(
                "plans", total=to_run, cost="$0.00", to_come=self._to_come()
            )
            self._live = Live(console=console, refresh_per_second=4, get_renderable=self.view)

    def job_queued(self, key: str) -> None:
        """A job decided while the batch runs (a task's synthesis) joins the queue."""
        with self._lock:
            self.to_run += 1
            self.syntheses_to_come = max(self.syntheses_to_come - 1, 0)
            if self._bar is not None:
                self._bar.update(self._task, total=self.to_run, to_come=self._to_come())

    def _to_come(self) -> str:
        """What may still join the bar's total, next to it."""
        count = self.syntheses_to_come
        return f"(+ up to {syntheses_text(count)})" if count else ""

    def job_started(self, key: str, note: str = "") -> None:
        with self._lock:
            self._running[key] = _Running(key, time.monotonic())
            self._running[key].tool = note
        if self._live is None:
            self._say(f"[{key}] started" + (f" ({note})" if note else ""))

    def job_finished(self, key: str, status: str, cost_usd: float | None) -> None:
        with self._lock:
            self._running.pop(key, None)
            if status == "complete":
                self.done += 1
            elif status == "budget":
                self.budget += 1  # stopped or never started by the cost budget
            else:
                self.failed += 1
            self.cost += cost_usd or 0.0
            if self._bar is not None:
                self._bar.update(self._task, advance=1, cost=f"${self.cost:.2f}")
        if self._live is None:
            self._say(f"[{key}] {status} ({self.counts()})")

    def agent_event(self, key: str, event: AgentEvent) -> None:
        """A turn or tool call of a running job (local engine)."""
        with self._lock:
            running = self._running.get(key)
            if running is None:
                return
            running.turn, running.tokens = event.turn, event.tokens
            if event.kind == "tool_call":
                running.tool = one_line(f"{event.tool} {event.detail}".strip())

    def stopping(self) -> None:
        if self._live is None:
            self._say("stopping… (finished plans are kept; run the same command to resume)")

    def counts(self) -> str:
        queued = self.to_run - self.done - self.failed - self.budget - len(self._running)
        budget = f" · budget {self.budget}" if self.budget else ""
        # The live bar says it beside its total; a plain line says it here.
        to_come = f" {self._to_come()}" if self.syntheses_to_come and self._bar is None else ""
        return (
            f"done {self.done} · failed {self.failed}{budget} · running {len(self._running)} · "
            f"queued {max(queued, 0)} · skipped (earlier) {self.skipped}{to_come}"
        )

    def _say(self, message: str) -> None:
        print(one_line(f"planrun: {message}"), file=self._stream, flush=True)

    def view(self) -> Group:
        """What the live display draws: the bar, the counts, the running jobs."""
        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in ("job", "turn", "tokens", "elapsed", "current"):
            table.add_column(column, no_wrap=column != "current", overflow="ellipsis")
        now = time.monotonic()
        with self._lock:
            for running in list(self._running.values())[:12]:
                table.add_row(
                    Text(running.key),
                    str(running.turn),
                    f"{running.tokens:,}",
                    f"{now - running.started:.0f} s",
                    Text(running.tool[:80]),
                )
            counts = self.counts()
        assert self._bar is not None
        if not table.rows:
            return Group(self._bar, Text(counts))
        return Group(self._bar, Text(counts), table)
