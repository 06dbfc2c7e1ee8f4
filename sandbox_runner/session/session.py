"""An interactive session: a work session `<id>` and a plan session `<id>-plan`, one
active, the permission mode, the plan file and its snapshot, and every change saved.

`Session` is what the UIs drive; its parts live beside it: the two conversations and
their containers (`conversations.py`), mode changes and the plan's review
(`plan_mode.py`), the loops' notes and "always" approvals (`hooks.py`), and cost and
compaction (`accounting.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sandbox_runner import Model
from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.agents.memory import Memory, load_memory
from sandbox_runner.agents.registry import Registry
from sandbox_runner.agents.run_state import Interrupted, LimitReached
from sandbox_runner.errors import PlanrunError
from sandbox_runner.limits import RunLimits
from sandbox_runner.session import accounting, prompts
from sandbox_runner.session.checkpoints import Checkpoints
from sandbox_runner.session.conversations import Conversations
from sandbox_runner.session.hooks import Notes
from sandbox_runner.session.mcp_servers import SessionServers
from sandbox_runner.session.plan_file import PlanFile
from sandbox_runner.session.plan_mode import PlanAccepted, PlanMode
from sandbox_runner.session.state import SessionState, SessionStore
from sandbox_runner.session.todos import load_todos, plain_lines
from sandbox_runner.session.ui import PlanReview, SessionSandboxes, SessionUI
from sandbox_runner.tools.permissions import PermissionMode
from sandbox_runner.web_grant import WebGrant

INTERRUPTED_NOTE = "[The user interrupted this turn before it finished.]"


class Session:
    """The engine of an interactive session; UIs drive it with messages and commands."""

    def __init__(
        self,
        store: SessionStore,
        state: SessionState,
        *,
        workspace: Path,
        registry: Registry,
        sandboxes: SessionSandboxes,
        model: Callable[[str], Model],
        ui: SessionUI,
        limits: RunLimits,
        task_budget: int = 4,
        web: WebGrant | None = None,
        mcp: SessionServers | None = None,
        scratch: bool = False,
    ) -> None:
        self.store, self.state = store, state
        self.web = web or WebGrant()
        """The hosts WebFetch and WebSearch may reach; none: they are not offered."""
        self.scratch = scratch
        """Plan mode's commands may write, into a throw-away layer (plan_commands: scratch)."""
        self.workspace = workspace
        self.registry = registry
        self.sandboxes = sandboxes
        self.model = model
        self.ui = ui
        self.limits = limits
        self.mcp = mcp
        """The MCP servers, started at the first turn; None when none are defined."""
        self._memory: Memory | None = None
        self.cancel = threading.Event()
        """Set by the user's interrupt (and by close); cleared when new work starts."""
        self.plan_file = PlanFile(store.plan_dir, state)
        self.notes = Notes()
        self.conversations = Conversations(self, task_budget)
        if mcp is not None:
            mcp.slots = self.conversations.task_slots
        self.tally = accounting.Tally(state)
        """The session's one count of tokens and cost (the spinner's, the toolbar's)."""
        self.plan_mode = PlanMode(self)
        self.checkpoints = Checkpoints(store.directory / "checkpoints", workspace)
        """Each work turn's changes to the repository (/diff, /undo)."""
        self._mode_lock = threading.Lock()
        self._busy = 0
        self._pending_mode: PermissionMode | None = None
        """A mode asked for during a turn, applied by the turn's thread at its next step."""

    @property
    def memory(self) -> Memory:
        """The memory files (CLAUDE.md, AGENTS.md, PLANRUN.md), read on first use: the
        conversations' prompts keep what was read then."""
        if self._memory is None:
            self._memory = load_memory(self.workspace)
        return self._memory

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Get the containers going ahead of need (a mode switch then waits for nothing)."""
        if self.state.plan_file is not None:
            # What the plan agent wrote before a crash is newer than the plan file.
            self.plan_file.sync_out()
            self.plan_file.stage()
        self.conversations.sandbox("work")
        self.conversations.sandbox("plan")
        # While the containers start: the snapshot that /diff and /undo start from.
        if warning := self.checkpoints.open():
            self.ui.show(warning)

    def close(self) -> None:
        """Save the state and remove every container."""
        self.cancel.set()
        self.save()
        self.conversations.stop()
        if self.mcp is not None:
            self.mcp.stop()

    def save(self) -> None:
        self.store.save(self.state)

    @property
    def ledger(self) -> accounting.Ledger:
        """The price of each conversation's usage (for /cost)."""
        return self.tally.ledger

    def totals(self) -> tuple[int, float]:
        """Tokens and estimated cost so far, live: the one count every view shows."""
        return self.tally.totals(self.state.model)

    # ------------------------------------------------------------------ messages

    def send(self, text: str) -> None:
        """A user message to the active session; returns when the agent's turn is over
        (and, when the plan was accepted meanwhile, when the work session's first turn is)."""
        with self._working():
            self._turn(self.state.active, text)
            self.run_pending()

    def run_pending(self) -> None:
        """Start implementing an accepted plan: the work session's kickoff turn."""
        with self._working():
            while (kickoff := self.plan_mode.take_kickoff()) is not None:
                self._turn("work", kickoff)

    @contextmanager
    def _working(self) -> Iterator[None]:
        """While the agent works, mode changes from other threads wait for its next step."""
        with self._mode_lock:
            if not self._busy:
                # A new piece of work; an interrupt from here on stops it, even one that
                # comes before its first model call.
                self.cancel.clear()
            self._busy += 1
        try:
            yield
        finally:
            with self._mode_lock:
                self._busy -= 1
            if not self._busy:
                self._apply_pending_mode()

    def _turn(self, which: str, text: str) -> None:
        """One turn of WHICH; its answers reach the UI as they stream (`text` events)."""
        loop = self.conversations.loop(which)
        accepted: PlanReview | None = None
        if which == "work" and (warning := self.checkpoints.begin()):
            self.ui.show(warning)
        try:
            if loop.state.messages:
                loop.run_turn(text)
            else:
                loop.run(text)
        except PlanAccepted as plan:
            accepted = plan.review
        except Interrupted as stopped:
            # The next message goes out with this one, unanswered: the model is told why.
            loop.add_note(INTERRUPTED_NOTE)
            self.ui.show(f"stopped: {stopped}")
        except LimitReached as limit:
            self.ui.show(f"stopped: {limit}")
        except PlanrunError as error:
            self.ui.show(f"error: {error}")
        finally:
            if which == "work" and (note := self.checkpoints.end()):
                self.ui.show(note)
            self._apply_pending_mode()
            self._after_turn(which, accepted)

    def _after_turn(self, which: str, accepted: PlanReview | None) -> None:
        if which == "plan":
            self.plan_file.sync_out()
        if self.plan_file.problem:
            self.ui.show(f"warning: {self.plan_file.problem}")
            self.plan_file.problem = ""
        if accepted is not None:
            self.accept(accepted.feedback, accepted.mode)
        self.tally.update(self.state)
        interrupted = self.cancel.is_set()  # no new call after the user's interrupt
        if not interrupted and accounting.too_large(self.conversations.loop(which), self.limits):
            self.compact(which)
        self.save()

    def messages(self, which: str) -> list[dict[str, object]]:
        """The conversation of the work or the plan session, as the model sees it."""
        return self.conversations.loop(which).state.messages

    def interrupt(self) -> None:
        """Stop the agent's turn (Esc, Ctrl-C): the model call in flight is abandoned."""
        self.cancel.set()

    def on_event(self, event: AgentEvent) -> None:
        """A step of the work or the plan loop, on its way to the UI."""
        if event.kind in ("turn_started", "tool_call"):
            self._apply_pending_mode()  # before the loop reads the mode for this step
        if event.kind == "plan_written" and self.state.plan_file is not None:
            # The plan file is current after every write, each write a revision.
            self.plan_file.sync_out("agent-edit" if event.tool == "Edit" else "agent-write")
        self.ui.event(event)

    def take_notes(self, which: str) -> list[str]:
        """The notes waiting for the next model call of WHICH ("work" or "plan")."""
        return self.notes.take(which)

    def compact(self, which: str | None = None) -> None:
        """Summarise the conversation and replace it with the summary (the full history
        stays in the transcript); mode, plan file and approvals are kept."""
        which = which or self.state.active
        loop = self.conversations.loop(which)
        if not loop.state.messages:
            return
        # New work: an interrupt of the turn before it does not stop it, one during it does.
        with self._working():
            try:
                accounting.compact(loop)
            except (LimitReached, PlanrunError) as error:
                self.ui.show(f"could not compact: {error}")
                return
            finally:
                self.tally.update(self.state)
        if which == "plan":
            self.plan_mode.remind()
        elif todos := load_todos(self.state.todos):
            self.notes.add("work", prompts.checklist_reminder("\n".join(plain_lines(todos))))
        self.ui.show("conversation compacted")

    def clear(self) -> None:
        """/clear: a new conversation for the active session, in the same mode and with
        the same plan file; the old one stays in the transcript, its cost in the total."""
        which = self.state.active
        self.conversations.loop(which).clear()
        if which == "plan":
            self.plan_mode.remind()
        elif self.state.permission_mode is not PermissionMode.DEFAULT:
            self.notes.add("work", prompts.mode_changed(self.state.mode))
        self.store.event("conversation_cleared", conversation=which)
        self.save()

    def set_model(self, model_id: str) -> None:
        """/model: the session's model from the next request on (what was used so far
        stays priced at the model it ran on)."""
        self.tally.settle(self.state.model)
        previous, self.state.model = self.state.model, model_id
        self.conversations.use_model()
        self.store.event("model_changed", model=model_id, previous=previous)
        self.save()

    # ------------------------------------------------------------------ modes

    def set_mode(self, mode: PermissionMode) -> None:
        """Switch to MODE (Shift+Tab, /mode, --mode); it applies from the next tool call."""
        self.plan_mode.switch(mode)

    @property
    def working(self) -> bool:
        """Whether the agent is in a turn (send or run_pending under way)."""
        return self._busy > 0

    @property
    def wanted_mode(self) -> PermissionMode:
        """The mode the user chose last: the current one, or one a turn will switch to."""
        return self._pending_mode or self.state.permission_mode

    def request_mode(self, mode: PermissionMode) -> None:
        """Switch to MODE from any thread (Shift+Tab while the agent works): at once when
        no turn runs, else the turn's own thread switches before its next tool call."""
        with self._mode_lock:
            if self._busy:
                self._pending_mode = mode
                return
        self.set_mode(mode)

    def _apply_pending_mode(self) -> None:
        with self._mode_lock:
            mode, self._pending_mode = self._pending_mode, None
        if mode is not None:
            self.set_mode(mode)

    def enter_plan(self) -> None:
        """Switch to the plan session; the plan file is chosen once, and snapshotted."""
        self.plan_mode.enter()

    def exit_plan(self) -> None:
        """/exit-plan: back to the previous mode, the plan untouched, nothing injected."""
        self.plan_mode.exit()

    def accept(self, note: str = "", mode: PermissionMode | None = None) -> None:
        """/accept, /apply-plan: keep the plan, switch to the work session, start on it."""
        self.plan_mode.accept(note, mode)

    def reject(self) -> None:
        """/reject: restore the plan file from the snapshot, leave plan mode, no trace."""
        self.plan_mode.reject()


__all__ = ["PlanReview", "Session", "SessionSandboxes", "SessionUI"]
