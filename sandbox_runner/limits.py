"""Every limit planrun enforces, defined once with its default: a sandbox's resources and
a subagent run's budget. Configuration reads its defaults from here."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox_runner.spend import Spend


class LimitError(ValueError):
    """A limit out of range; `field` names the limit, so callers need not parse the text."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox container."""

    memory_mb: int = 1024
    """Memory limit; swap is set to the same value, so the container cannot swap."""
    cpus: float = 1.0
    """CPU share, in cores."""
    pids: int = 256
    """Maximum number of processes and threads inside the container."""
    tmp_mb: int = 64
    """Size of the tmpfs mounted at /tmp."""
    plan_dir_mb: int = 64
    """Size of the plan directory (a tmpfs: the kernel enforces it), in MiB."""
    plan_dir_entries: int = 10_000
    """Files and directories the plan directory can hold (the tmpfs's inodes)."""
    open_files: int = 1024
    """Maximum number of open file descriptors per process."""
    scratch_mb: int = 512
    """Size of a scratch run's copy-on-write layer (a tmpfs: the kernel enforces it), in
    MiB; its pages count against memory_mb, so at most half of it is used."""

    def __post_init__(self) -> None:
        for name in (
            "memory_mb",
            "pids",
            "tmp_mb",
            "plan_dir_mb",
            "plan_dir_entries",
            "open_files",
            "scratch_mb",
        ):
            if getattr(self, name) < 1:
                raise LimitError(name, f"limit {name} must be at least 1")
        if self.memory_mb < 32:
            raise LimitError(
                "memory_mb", "limit memory_mb must be at least 32 (the tool server needs it)"
            )
        max_cpus = os.cpu_count() or 1
        if not 0.01 <= self.cpus <= max_cpus:
            raise LimitError("cpus", f"limit cpus must be between 0.01 and {max_cpus}")


@dataclass(frozen=True)
class RunLimits:
    """Limits of one subagent run; reaching one stops it and keeps its partial plan."""

    max_turns: int = 40
    """Model calls."""
    max_output_tokens: int = 16_000
    """max_tokens of each model call."""
    max_total_tokens: int = 3_000_000
    """Input, output and cache tokens over the whole run."""
    timeout_seconds: float = 1800.0
    """Wall-clock time of the whole run."""
    context_budget: int = 200_000
    """The model's context window; a system prompt and tools above it are refused."""
    max_cost_usd: float | None = None
    """Estimated USD (list prices) this one run's model calls may cost; None: no cap."""
    spend: Spend | None = field(default=None, compare=False, repr=False)
    """The budget this run shares with the others of its plan run, batch or session: every
    call is charged to it, and none starts once it is spent."""


TOOL_TIMEOUT_SECONDS = 120.0
"""A tool call's time limit when the model gives none (Bash's default timeout)."""
MAX_TOOL_TIMEOUT_SECONDS = 600.0
"""The longest a tool call may run, whatever timeout the model asks for."""
API_TIMEOUT_SECONDS = 600.0
"""The longest one Messages API attempt may take."""
API_RETRIES = 6
"""Retries of a model call after an overload, a 5xx, a 429 or a network error."""
MAX_PLAN_BYTES = 2 * 1024 * 1024
"""The most of a plan the host reads and validates; anything beyond is left out."""
MAX_INPUT_DEPTH = 64
"""How deeply a tool input may nest objects and arrays (planrun's own tools need 3); a
deeper one is refused before anything walks it recursively."""


@dataclass(frozen=True)
class WebLimits:
    """What one WebFetch may take: bytes, redirects and time."""

    max_bytes: int = 5 * 1024 * 1024
    """The most of a response read; the rest is left unread, and the result says so."""
    max_html_bytes: int = 256 * 1024
    """The most HTML turned into Markdown: converting takes seconds per MiB, and a result
    keeps 30,000 characters at most anyway."""
    max_redirects: int = 5
    connect_seconds: float = 10.0
    """To open one connection (each hop of a redirect opens its own)."""
    read_seconds: float = 20.0
    """Silence tolerated while reading a response."""
    total_seconds: float = 60.0
    """The whole fetch, redirects included."""


WORKSPACE_WALK_SECONDS = 600.0
"""The longest the workspace check's walk of the repository may take (about 1 s per
100,000 files); past it, the files are not compared, and the report says so."""
WORKSPACE_GIT_STATUS_SECONDS = 180.0
"""The longest the workspace check waits for `git status` (run in a sandbox of its own)."""
WORKSPACE_CHECK_LISTED_PATHS = 20
"""How many changed paths a workspace check names; the rest are counted."""
