"""Progress of running subagents: a live table on a terminal, plain log lines elsewhere."""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Self, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.safe_text import one_line


@dataclass
class _Line:
    label: str
    state: str = "starting"
    turn: int = 0
    tool: str = ""
    tool_calls: int = 0
    tokens: int = 0
    elapsed: float = 0.0
    started: float = 0.0
    waiting_logged: float = 0.0
    """When a plain log line last said what this subagent waits for."""


def wants_live_display(stream: TextIO, *, json_output: bool) -> bool:
    """A live display only for a person at a terminal: not with --json, in CI or in a pipe."""
    ci = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
    return stream.isatty() and not json_output and not ci


WAITING_LOG_SECONDS = 30.0
"""In plain log lines, how often a subagent that waits for the model says so."""
TERMINAL_STATES = frozenset({"finished", "failed"})


class LiveDisplay:
    """A display that is live (redrawn in place) on a terminal, from enter to exit."""

    _live: Live | None = None

    def __enter__(self) -> Self:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.stop()


class Progress(LiveDisplay):
    """Receives AgentEvents from any thread and shows one line per subagent."""

    def __init__(self, labels: list[str], *, live: bool, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        now = time.monotonic()
        self._lines = {label: _Line(label, started=now) for label in labels}
        self._lock = threading.Lock()
        self._live: Live | None = None
        if live:
            console = Console(file=self._stream)
            self._live = Live(
                console=console, refresh_per_second=4, get_renderable=self._table, transient=False
            )

    def __call__(self, event: AgentEvent) -> None:
        if not event.label:  # the run's own notice, of no subagent
            self._say(f"planrun: {event.detail}")
            return
        with self._lock:
            line = self._lines.setdefault(event.label, _Line(event.label, started=time.monotonic()))
            line.turn, line.tool_calls, line.tokens = event.turn, event.tool_calls, event.tokens
            line.elapsed = event.elapsed
            if event.kind == "tool_call":
                line.state, line.tool = "running", one_line(f"{event.tool} {event.detail}".strip())
            elif event.kind == "turn_started":
                line.state, line.tool = "thinking", ""
                line.waiting_logged = time.monotonic()
            elif event.kind in {"waiting", "model_retry"} and line.state != "stopping…":
                line.state = "waiting" if event.kind == "waiting" else "retrying"
                line.tool = one_line(event.detail)
            elif event.kind in TERMINAL_STATES:
                line.state, line.tool = event.kind, one_line(event.detail)
            log = event.kind in {"tool_call", "model_retry", "notice", *TERMINAL_STATES}
            if (
                event.kind == "waiting"
                and time.monotonic() - line.waiting_logged >= WAITING_LOG_SECONDS
            ):
                line.waiting_logged, log = time.monotonic(), True
        if self._live is None and log:
            self._log(event)
        elif self._live is not None and event.kind == "notice":
            self._live.console.print(f"[{event.label}] {one_line(event.detail)}", markup=False)

    def _say(self, message: str) -> None:
        if self._live is not None:
            self._live.console.print(one_line(message), markup=False)
        else:
            print(one_line(message), file=self._stream, flush=True)

    def stopping(self) -> None:
        """Show that a signal arrived and everything is being stopped."""
        with self._lock:
            for line in self._lines.values():
                if line.state not in TERMINAL_STATES:
                    line.state, line.tool = "stopping…", ""
        if self._live is None:
            print("planrun: stopping… (finished plans and the report are kept)", file=self._stream)
            self._stream.flush()

    def _log(self, event: AgentEvent) -> None:
        prefix = f"[{event.label}] turn {event.turn}"
        if event.kind == "tool_call":
            message = f"{prefix} {event.tool} {event.detail}".rstrip()
        elif event.kind in {"waiting", "model_retry", "notice"}:
            message = f"{prefix} {event.detail}"
        else:
            outcome = "finished" if event.kind == "finished" else "FAILED"
            detail = f": {event.detail}" if event.detail else ""
            message = (
                f"[{event.label}] {outcome}{detail} ({event.tool_calls} tool calls, "
                f"{event.tokens} tokens, {event.elapsed:.1f} s)"
            )
        print(one_line(message), file=self._stream, flush=True)

    def _table(self) -> Table:
        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in (
            "perspective",
            "state",
            "turn",
            "tool calls",
            "tokens",
            "elapsed",
            "current",
        ):
            table.add_column(column, no_wrap=column != "current", overflow="ellipsis")
        now = time.monotonic()
        with self._lock:
            for line in self._lines.values():
                running = line.state not in TERMINAL_STATES
                elapsed = now - line.started if running else line.elapsed
                style = {"failed": "red", "finished": "green"}.get(line.state, "")
                # Text, not markup: tool details come from the model and may hold "[/]".
                table.add_row(
                    Text(line.label),
                    Text(line.state, style=style),
                    str(line.turn),
                    str(line.tool_calls),
                    f"{line.tokens:,}",
                    f"{elapsed:.1f} s",
                    Text(line.tool[:80]),
                )
        return table
