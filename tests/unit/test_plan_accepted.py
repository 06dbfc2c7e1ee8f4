"""Accepting a plan from ExitPlanMode: the plan turn ends there, on its own control flow
(PlanAccepted), never through the user's interrupt; the work session's kickoff follows."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.agents.registry import Registry
from sandbox_runner.limits import RunLimits
from sandbox_runner.session.session import PlanReview, Session
from sandbox_runner.session.state import SessionStore
from sandbox_runner.tools.permissions import PermissionMode
from sandbox_runner.types import ModelRequest, ModelResponse
from tests.support.scripted_model import reply, say, use
from tests.unit.test_session import PLAN_TEXT, CountingSandboxes, FakeUI, Models, open_session

EXPLORE = {"description": "d", "prompt": "look around", "subagent_type": "Explore"}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


class Reviewer(FakeUI):
    """Accepts the plan, after `before_accepting` (the user's Ctrl-C, say), and notes at
    every event whether the user's interrupt was set."""

    def __init__(self, before_accepting: Callable[[], object] = lambda: None) -> None:
        super().__init__()
        self.session: Session | None = None
        self.before_accepting = before_accepting
        self.interrupt_seen: list[bool] = []

    def event(self, event: AgentEvent) -> None:
        assert self.session is not None
        self.interrupt_seen.append(self.session.cancel.is_set())
        super().event(event)

    def review_plan(self, plan_file: Path, text: str) -> PlanReview:
        self.reviewed.append(text)
        self.before_accepting()
        return PlanReview(True, PermissionMode.ACCEPT_EDITS)


def plan_then_accept(session: Session, models: Models, *calls: dict[str, object]) -> None:
    """The plan agent writes the plan, then calls ExitPlanMode (with CALLS after it)."""
    session.enter_plan()
    target = session.plan_file.container_path
    models.scripts["plan"] = [
        reply(use("Write", {"file_path": target, "content": PLAN_TEXT})),
        reply(use("ExitPlanMode", {}), *calls),
        reply(say("This call must never be made: the turn ended at the acceptance.")),
    ]
    models.scripts["work"] = [reply(say("Implementing now."))]


def test_accepting_ends_the_plan_turn_and_the_kickoff_runs(workspace: Path, tmp_path: Path) -> None:
    ui, models = Reviewer(), Models({})
    made = open_session(workspace, tmp_path, models, ui)
    ui.session = made
    try:
        plan_then_accept(made, models)
        made.send("plan a greeting")
        assert len(models.made["plan"].requests) == 2  # nothing after the acceptance
        plan: list[Any] = made.messages("plan")
        [answer] = plan[-1]["content"]
        assert answer["content"].startswith("The user accepted the plan")
        assert ui.interrupt_seen and not any(ui.interrupt_seen)
        assert not made.cancel.is_set()
        kickoff = models.made["work"].requests[0].messages[0]["content"][0]["text"]
        assert kickoff.startswith(f"Start implementing the plan at {made.state.plan_file}")
        assert ui.shown[-1] == "Implementing now."
        assert not [line for line in ui.shown if line.startswith("stopped")]
        assert (made.state.mode, made.state.active) == ("acceptEdits", "work")
    finally:
        made.close()


def test_an_interrupt_as_the_plan_is_accepted_stops_the_kickoff(
    workspace: Path, tmp_path: Path
) -> None:
    models = Models({})
    ui = Reviewer(before_accepting=lambda: made.interrupt())
    made = open_session(workspace, tmp_path, models, ui)
    ui.session = made
    try:
        plan_then_accept(made, models)
        made.send("plan a greeting")
        assert made.state.active == "work"  # the plan was accepted all the same
        assert "plan_accepted" in [event["event"] for event in made.store.events()]
        assert ui.shown == ["stopped: interrupted"]
        assert models.made["work"].requests == []  # the kickoff never reached the model
    finally:
        made.close()


def test_subagents_of_the_accepting_turn_are_stopped_and_answered(
    workspace: Path, tmp_path: Path
) -> None:
    arrived, release = threading.Semaphore(0), threading.Event()

    def working(request: ModelRequest) -> ModelResponse:
        arrived.release()
        release.wait(30)  # a subagent still at work when the plan is accepted
        return reply(say("found it, too late"))

    def both_subagents_at_work() -> None:
        assert arrived.acquire(timeout=30) and arrived.acquire(timeout=30)

    models = Models({"task": [working]})
    ui = Reviewer(before_accepting=both_subagents_at_work)
    store, state = SessionStore.create(workspace, "claude-test")
    sandboxes = CountingSandboxes(workspace, tmp_path)
    made = Session(
        store, state, workspace=workspace, registry=Registry.load(workspace),
        sandboxes=sandboxes, model=models, ui=ui, limits=RunLimits(max_turns=20),
    )  # fmt: skip
    ui.session = made
    try:
        plan_then_accept(made, models, use("Task", EXPLORE), use("Task", EXPLORE))
        made.send("plan a greeting")
        assert sandboxes.most == 2 and sandboxes.running == 0  # none left behind
        plan: list[Any] = made.messages("plan")
        accepted, *tasks = plan[-1]["content"]
        assert accepted["content"].startswith("The user accepted the plan")
        assert [task["content"] for task in tasks] == ["[the subagent stopped: interrupted]"] * 2
        assert not made.cancel.is_set() and ui.shown[-1] == "Implementing now."
    finally:
        release.set()
        made.close()
