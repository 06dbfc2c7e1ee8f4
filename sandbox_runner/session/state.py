"""A session on disk: its state (written atomically on every change), its event log, and
where its conversations and plan files live. `~/.planrun/sessions/<id>/`."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sandbox_runner.errors import ConfigError
from sandbox_runner.paths import planrun_home
from sandbox_runner.plans.names import random_name
from sandbox_runner.session.todos import saved_todos
from sandbox_runner.tools.permissions import PermissionMode, Rules

STATE_FILE = "state.json"
EVENTS_FILE = "events.jsonl"
MAX_STATE_BYTES = 1024 * 1024


@dataclass
class SessionState:
    """Everything a session must come back with after a restart, a crash or `kill -9`."""

    id: str
    repo: str
    model: str
    mode: str = PermissionMode.DEFAULT.value
    previous_mode: str = PermissionMode.DEFAULT.value
    """The mode before plan mode: where /exit-plan and /accept go back to."""
    active: str = "work"
    """"work" (the session `<id>`) or "plan" (the session `<id>-plan`)."""
    plan_file: str | None = None
    """The plan file, chosen once when plan mode is first entered."""
    snapshot: str | None = None
    """The plan file's text when plan mode was entered (None: it did not exist)."""
    approve_edits: bool = False
    approved_prefixes: list[str] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0
    todos: list[dict[str, str]] = field(default_factory=list)
    """The work agent's checklist (TodoWrite), each item {content, status, activeForm}."""
    proposed_patches: list[dict[str, Any]] = field(default_factory=list)
    """Edits the plan session was refused, kept as the plan's proposed patches (with their
    tool input, for /apply-patches); emptied when they are applied or the plan rejected."""
    flags: dict[str, Any] = field(default_factory=dict)
    """The flags the session was opened with that choose its sandboxes and tools (image,
    network, scratch, allow_web, mcp_config, strict_mcp_config): a resume uses them again
    unless it is given its own."""
    created: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.time)

    @property
    def permission_mode(self) -> PermissionMode:
        return PermissionMode(self.mode)

    @property
    def active_id(self) -> str:
        """The id of the active conversation: `<id>` or `<id>-plan`."""
        return f"{self.id}-plan" if self.active == "plan" else self.id

    def rules(self) -> Rules:
        """The approvals the user gave ("always"), for the work session's decisions."""
        return Rules(
            approve_edits=self.approve_edits,
            approved_prefixes=frozenset(self.approved_prefixes),
        )


def sessions_dir() -> Path:
    """Where sessions are kept: ~/.planrun/sessions (PLANRUN_HOME relocates it)."""
    return planrun_home() / "sessions"


class SessionStore:
    """One session's directory: state, events and the two conversations."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def create(cls, repo: Path, model: str) -> tuple[SessionStore, SessionState]:
        """A new session with a name never used before."""
        parent = sessions_dir()
        parent.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            name = random_name()
            try:
                (parent / name).mkdir()
            except FileExistsError:
                continue
            store = cls(parent / name)
            state = SessionState(id=name, repo=str(repo), model=model)
            store.save(state)
            return store, state
        raise ConfigError(f"could not find a free session name under {parent}")

    @classmethod
    def open(cls, session_id: str) -> tuple[SessionStore, SessionState]:
        """An existing session.

        Raises:
            ConfigError: no such session, or its state cannot be read.
        """
        if not session_id or "/" in session_id or session_id.startswith("."):
            raise ConfigError(f"no session {session_id!r}")
        store = cls(sessions_dir() / session_id.removesuffix("-plan"))
        return store, store.load()

    @property
    def state_path(self) -> Path:
        return self.directory / STATE_FILE

    def transcript(self, which: str) -> Path:
        """The transcript of the work or the plan conversation (they resume from it)."""
        return self.directory / f"{which}.transcript.jsonl"

    @property
    def plan_dir(self) -> Path:
        """The host side of the plan container's /plan: only the plan file lives here."""
        return self.directory / "plan"

    def load(self) -> SessionState:
        try:
            data = json.loads(self.state_path.read_bytes()[:MAX_STATE_BYTES])
            state = SessionState(**data)
            modes = {mode.value for mode in PermissionMode}
            if state.mode not in modes or state.previous_mode not in modes:
                raise ValueError(f"unknown mode {state.mode!r}")
            if state.active not in ("work", "plan"):
                raise ValueError(f"unknown session {state.active!r}")
            state.todos = saved_todos(state.todos)  # a damaged checklist is dropped
            return state
        except FileNotFoundError:
            raise ConfigError(f"no session {self.directory.name!r}") from None
        except (OSError, ValueError, TypeError) as error:
            raise ConfigError(f"cannot read session {self.directory.name}: {error}") from None

    def save(self, state: SessionState) -> None:
        """Write the state atomically: a crash leaves the old state or the new one."""
        state.last_activity = time.time()
        text = json.dumps(asdict(state), indent=2)
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".state-")
        with os.fdopen(handle, "w") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.state_path)

    def event(self, kind: str, **fields: Any) -> None:
        """Append one event (mode_changed, plan_accepted, ...) to the event log."""
        entry = {"event": kind, "time": time.time(), **fields}
        with (self.directory / EVENTS_FILE).open("a") as file:
            file.write(json.dumps(entry, ensure_ascii=False) + "\n")
            file.flush()
            os.fsync(file.fileno())

    def events(self) -> list[dict[str, Any]]:
        try:
            lines = (self.directory / EVENTS_FILE).read_text().split("\n")
        except FileNotFoundError:
            return []
        events = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if isinstance(entry, dict) and "event" in entry and "time" in entry:
                events.append(entry)
        return events


def all_sessions() -> list[SessionState]:
    """Every session that can be read, the most recently active first."""
    found = []
    directory = sessions_dir()
    for path in directory.iterdir() if directory.is_dir() else []:
        try:
            found.append(SessionStore(path).load())
        except ConfigError:
            continue
    return sorted(found, key=lambda state: state.last_activity, reverse=True)


def latest_for(repo: Path) -> str | None:
    """The id of the latest session of this repository, or None."""
    for state in all_sessions():
        if state.repo == str(repo):
            return state.id
    return None
