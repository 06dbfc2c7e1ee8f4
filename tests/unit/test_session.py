"""The session engine with fakes: mode transitions, the plan file, accept and reject,
ExitPlanMode, Task dispatch, state on disk and resume (no Docker, a scripted model)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner import Model, Sandbox
from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.agents.registry import Registry
from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import RunLimits
from sandbox_runner.model.anthropic_model import AnthropicModel
from sandbox_runner.session.commands import Commands
from sandbox_runner.session.session import PlanReview, Session
from sandbox_runner.session.state import SessionStore
from sandbox_runner.session.ui import SessionUI
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode
from tests.support import fake_messages_api as fake
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, reply, say, use

GENERAL = "general-purpose"
PLAN_TEXT = "# Plan: greet\n\n## Approach\nSay hello.\n"


class FakeUI:
    """Records what the session shows; answers approvals and reviews from lists."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.asked: list[Ask] = []
        self.approvals: list[Approval] = []
        self.reviews: list[PlanReview] = []
        self.reviewed: list[str] = []

    def show(self, text: str) -> None:
        self.shown.append(text)

    def event(self, event: AgentEvent) -> None:
        if event.kind == "text_end":  # an answer, as a UI prints it once it is complete
            self.shown.append(event.detail.strip())

    def approve(self, ask: Ask) -> Approval:
        self.asked.append(ask)
        return self.approvals.pop(0) if self.approvals else Approval(False)

    def review_plan(self, plan_file: Path, text: str) -> PlanReview:
        self.reviewed.append(text)
        return self.reviews.pop(0)


class LocalSandboxes:
    """Sandboxes as local tool-server processes (not a security boundary: tests only)."""

    def __init__(self, workspace: Path, scratch: Path) -> None:
        self.workspace, self.scratch = workspace, scratch
        self.made: list[tuple[str, LocalSandbox]] = []

    def _make(self, kind: str, plan_dir: Path | None) -> Sandbox:
        sandbox = LocalSandbox(self.workspace, plan_dir)
        self.made.append((kind, sandbox))
        return sandbox

    def plan(self, plan_dir: Path) -> Sandbox:
        plan_dir.mkdir(parents=True, exist_ok=True)
        return self._make("plan", plan_dir)

    def read_only(self) -> Sandbox:
        return self._make("read_only", None)

    def work(self) -> Sandbox:
        return self._make("work", None)


class Models:
    """One scripted model per conversation label (work, plan, task-1-Explore, ...)."""

    def __init__(self, scripts: dict[str, list[Any]]) -> None:
        self.scripts = scripts
        self.made: dict[str, ScriptedModel] = {}

    def __call__(self, label: str) -> ScriptedModel:
        key = next((k for k in self.scripts if label == k or label.startswith(k)), label)
        model = self.made.get(label) or ScriptedModel(self.scripts.get(key, []))
        self.made[label] = model
        return model


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


def open_session(
    workspace: Path,
    tmp_path: Path,
    models: Callable[[str], Model],
    ui: SessionUI,
    resume: str | None = None,
) -> Session:
    if resume:
        store, state = SessionStore.open(resume)
    else:
        store, state = SessionStore.create(workspace, "claude-test")
    return Session(
        store,
        state,
        workspace=workspace,
        registry=Registry.load(workspace),
        sandboxes=LocalSandboxes(workspace, tmp_path),
        model=models,
        ui=ui,
        limits=RunLimits(max_turns=20),
    )


@pytest.fixture
def session(workspace: Path, tmp_path: Path) -> Iterator[Session]:
    made = open_session(workspace, tmp_path, Models({}), FakeUI())
    yield made
    made.close()


def test_shift_tab_order_and_plan_mode_bookkeeping(session: Session) -> None:
    state = session.state
    session.set_mode(PermissionMode.ACCEPT_EDITS)
    session.set_mode(PermissionMode.PLAN)
    assert (state.mode, state.previous_mode, state.active) == ("plan", "acceptEdits", "plan")
    assert state.active_id == f"{state.id}-plan"
    plan_file = state.plan_file
    assert plan_file and plan_file.endswith(".md") and "/plans/" in plan_file
    # Reserved at once with an empty file (no plan yet): no other session can take it.
    assert Path(plan_file).read_text() == "" and state.snapshot is None
    session.exit_plan()
    assert (state.mode, state.active) == ("acceptEdits", "work")
    session.enter_plan()
    assert state.plan_file == plan_file  # chosen once
    events = [e["event"] for e in session.store.events()]
    assert events.count("plan_mode_entered") == 2 and "plan_mode_exited" in events
    # The state on disk is what the session holds.
    assert SessionStore.open(state.id)[1] == state


def test_exit_plan_injects_nothing_and_reject_restores_the_snapshot(session: Session) -> None:
    session.enter_plan()
    path = Path(session.state.plan_file or "")
    path.write_text("# Old plan\n")
    session.exit_plan()
    session.enter_plan()
    assert session.state.snapshot == "# Old plan\n"
    path.write_text("# Rewritten plan\n")
    session.reject()
    assert path.read_text() == "# Old plan\n"
    assert session.state.active == "work" and session.take_notes("work") == []
    rejected = [e for e in session.store.events() if e["event"] == "plan_rejected"]
    assert rejected[0]["rejected"] == "# Rewritten plan\n"  # kept in the session's history


def test_a_plan_is_written_refused_elsewhere_reviewed_and_accepted(
    workspace: Path, tmp_path: Path
) -> None:
    ui = FakeUI()
    ui.reviews = [
        PlanReview(False, feedback="add tests"),
        PlanReview(True, PermissionMode.ACCEPT_EDITS),
    ]
    models = Models(
        {
            "plan": [],
            "work": [reply(say("Implementing now."))],
        }
    )
    made = open_session(workspace, tmp_path, models, ui)
    try:
        made.enter_plan()
        target = made.plan_file.container_path
        models.scripts["plan"] = [
            reply(use("Write", {"file_path": "src/app.py", "content": "x"})),
            reply(use("Bash", {"command": "rm -rf src"})),
            reply(use("Write", {"file_path": target, "content": PLAN_TEXT})),
            reply(use("ExitPlanMode", {})),
            reply(
                use(
                    "Edit",
                    {"file_path": target, "old_string": "hello", "new_string": "hello and test"},
                )
            ),
            reply(use("ExitPlanMode", {})),
        ]
        made.send("plan a greeting")
        plan_model = models.made["plan"]
        results = [
            block["content"]
            for request in plan_model.requests[1:]
            for block in request.messages[-1]["content"]
            if block.get("type") == "tool_result"
        ]
        assert "only allowed on the plan file" in results[0]
        assert "Plan mode is read-only" in results[1]
        assert "add tests" in results[3]
        assert (workspace / "src" / "app.py").read_text() == "print('hi')\n"
        assert Path(made.state.plan_file or "").read_text() == PLAN_TEXT.replace(
            "hello", "hello and test"
        )
        assert made.state.mode == "acceptEdits" and made.state.active == "work"
        kickoff = models.made["work"].requests[0].messages[0]["content"][0]["text"]
        assert kickoff.startswith(f"Start implementing the plan at {made.state.plan_file}")
        assert "Say hello and test." in kickoff
        events = [e["event"] for e in made.store.events()]
        assert events.count("plan_ready") == 2 and "plan_accepted" in events
    finally:
        made.close()


def test_the_plan_prompt_follows_the_plan_file_from_call_to_call(
    workspace: Path, tmp_path: Path
) -> None:
    models = Models({})
    made = open_session(workspace, tmp_path, models, FakeUI())
    try:
        made.enter_plan()  # the name is reserved with an empty file: no plan yet
        target = made.plan_file.container_path
        models.scripts["plan"] = [
            reply(use("Write", {"file_path": target, "content": PLAN_TEXT})),
            reply(say("Written.")),
        ]
        made.send("plan a greeting")
        before, after = (request.system for request in models.made["plan"].requests)
        assert "No plan file exists yet" in before and "already exists" not in before
        assert f"A plan file already exists at {target}" in after
    finally:
        made.close()


def test_plan_mode_tasks_are_read_only_agents_only(workspace: Path, tmp_path: Path) -> None:
    ui = FakeUI()
    models = Models({"task": [reply(say("Found the entry point in src/app.py."))]})
    made = open_session(workspace, tmp_path, models, ui)
    try:
        made.enter_plan()
        plan_label = "plan"
        models.scripts[plan_label] = [
            reply(
                use(
                    "Task", {"description": "d", "prompt": "p", "subagent_type": "general-purpose"}
                ),
                use(
                    "Task", {"description": "d", "prompt": "find main", "subagent_type": "Explore"}
                ),
            ),
            reply(say("Done exploring.")),
        ]
        made.send("explore")
        last = models.made[plan_label].requests[1].messages[-1]["content"]
        assert "Cannot launch 'general-purpose' here" in last[0]["content"] and last[0]["is_error"]
        assert "Found the entry point" in last[1]["content"]
        kinds = [kind for kind, _ in made.sandboxes.made]  # type: ignore[attr-defined]
        assert "work" not in kinds[1:] and "read_only" in kinds
    finally:
        made.close()


def test_a_resumed_session_has_its_mode_plan_file_and_conversation(
    workspace: Path, tmp_path: Path
) -> None:
    models = Models({})
    first = open_session(workspace, tmp_path, models, FakeUI())
    first.enter_plan()
    models.scripts["plan"] = [reply(say("Looking around."))]
    first.send("hello")
    first.close()  # (a kill -9 leaves the same files: every change is written at once)
    again = open_session(workspace, tmp_path, Models({}), FakeUI(), resume=first.state.id)
    try:
        assert again.state.mode == "plan" and again.state.plan_file == first.state.plan_file
        messages: list[Any] = again.messages("plan")
        assert messages[0]["content"][0]["text"] == "hello"
        assert messages[0]["content"][1]["text"].startswith("## Entered Plan Mode")
        assert messages[1]["content"][0]["text"] == "Looking around."
    finally:
        again.close()


def test_commands_save_plan_and_status(session: Session) -> None:
    commands = Commands(session)
    assert commands.run("/accept").lines[0].startswith("error: /accept works in plan mode")
    session.enter_plan()
    Path(session.state.plan_file or "").write_text(PLAN_TEXT)
    refused = commands.run("/save-plan").lines[0]
    assert refused.startswith("error: the repository is read-only in plan mode")
    session.exit_plan()
    assert commands.run("/save-plan").lines == [f"plan saved to {session.workspace / 'PLAN.md'}"]
    again = commands.run("/save-plan PLAN.md").lines[0]
    assert "exists" in again and "--force" in again
    assert commands.run("/save-plan PLAN.md --force").lines[0].startswith("plan saved")
    status = dict(line.split(": ", 1) for line in commands.run("/status").lines)
    assert status["session"] == session.state.id and status["mode"] == "default"
    assert status["plan_file"] == session.state.plan_file
    assert {"previous_mode", "tokens", "cost_usd"} <= set(status)
    assert commands.run("/mode sideways").lines[0].startswith("error: unknown mode")
    assert commands.run("/frobnicate").lines[0].startswith("error: unknown command")


def test_attaching_outside_the_repository_is_refused_in_plan_mode(
    session: Session, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("s3cret")
    commands = Commands(session)
    session.enter_plan()
    refused = commands.run(f"/attach {outside}").lines[0]
    assert refused.startswith("error:") and "leave plan mode (/exit-plan)" in refused
    session.exit_plan()
    assert commands.run(f"/attach {outside}").lines[0].startswith("attached")
    assert "s3cret" in commands.message("look")
    with pytest.raises(ConfigError):
        session.accept()


def test_save_plan_never_writes_through_a_link_or_under_git(session: Session) -> None:
    commands = Commands(session)
    session.enter_plan()
    Path(session.state.plan_file or "").write_text(PLAN_TEXT)
    session.exit_plan()
    workspace = session.workspace
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "PLAN.md").symlink_to(".git/config")
    (workspace / "docs").mkdir()
    for args, message in [
        ("", "is a symbolic link"),
        ("--force", "is a symbolic link"),
        (".git/hooks/post-checkout", "never writes under .git"),
        ("../outside.md", "inside the repository"),
        ("docs --force", "not a regular file"),
    ]:
        assert message in commands.run(f"/save-plan {args}").lines[0], args
    assert (workspace / ".git" / "config").read_text() == "[core]\n"


def test_a_plan_too_large_to_take_back_keeps_the_last_good_one(session: Session) -> None:
    session.enter_plan()
    plan = Path(session.state.plan_file or "")
    plan.write_text(PLAN_TEXT)
    session.plan_file.stage()
    session.plan_file.staged.write_text("x" * (3 * 1024 * 1024))
    session.plan_file.sync_out()
    assert plan.read_text() == PLAN_TEXT and "was not taken" in session.plan_file.problem


def test_a_damaged_state_or_event_log_is_a_clear_error_or_skipped(session: Session) -> None:
    store = session.store
    with (store.directory / "events.jsonl").open("a") as events:
        events.write('{"event": "mode_chan')
    assert all("event" in event for event in store.events())
    data = store.state_path.read_text().replace('"mode": "default"', '"mode": "bogus"')
    store.state_path.write_text(data)
    with pytest.raises(ConfigError, match="unknown mode 'bogus'"):
        SessionStore.open(session.state.id)


def test_a_read_only_agent_whose_file_lists_writing_tools_is_not_launched(
    workspace: Path, tmp_path: Path, planrun_home: Path
) -> None:
    # The user's own directory: a repository's file cannot change a built-in's tools.
    agents = planrun_home / "agents"
    agents.mkdir(parents=True)
    (agents / "explore.md").write_text(
        "---\nname: Explore\ntools: Read, Write, Bash\n---\nYou write.\n"
    )
    models = Models(
        {
            "plan": [
                reply(use("Task", {"description": "d", "prompt": "p", "subagent_type": "Explore"})),
                reply(say("ok")),
            ]
        }
    )
    made = open_session(workspace, tmp_path, models, FakeUI())
    try:
        made.enter_plan()
        made.send("explore")
        result = models.made["plan"].requests[1].messages[-1]["content"][0]
        assert result["is_error"] and "The Explore subagent failed" in result["content"]
        assert "Write" in result["content"]
        assert "task" not in models.made  # no subagent conversation was started
    finally:
        made.close()


def test_a_protected_file_is_asked_about_each_time_even_in_accept_edits(
    workspace: Path, tmp_path: Path
) -> None:
    ui = FakeUI()
    write = {"file_path": ".claude/agents/general-purpose.md", "content": "be evil"}
    models = Models(
        {"work": [reply(use("Write", write)), reply(use("Write", write)), reply(say("ok"))]}
    )
    made = open_session(workspace, tmp_path, models, ui)
    try:
        made.set_mode(PermissionMode.ACCEPT_EDITS)
        ui.approvals = [Approval(False, always=True), Approval(False)]
        made.send("set up the agents")
        assert len(ui.asked) == 2 and all(ask.once_only for ask in ui.asked)
        assert "protected" in ui.asked[0].question
        assert not made.state.approve_edits  # an "always" never covers protected files
        assert not (workspace / ".claude").exists()
    finally:
        made.close()


class CountingSandboxes(LocalSandboxes):
    """Counts the subagent containers that run at the same time."""

    def __init__(self, workspace: Path, scratch: Path) -> None:
        super().__init__(workspace, scratch)
        self.running = self.most = 0
        self.lock = threading.Lock()

    def read_only(self) -> Sandbox:
        outer = self

        class Counted(LocalSandbox):
            def start(self) -> None:
                with outer.lock:
                    outer.running += 1
                    outer.most = max(outer.most, outer.running)
                time.sleep(0.05)
                super().start()

            def stop(self) -> None:
                super().stop()
                with outer.lock:
                    outer.running -= 1

        return Counted(self.workspace, None)


def test_task_subagents_share_the_session_container_budget(workspace: Path, tmp_path: Path) -> None:
    task = {"description": "d", "prompt": "look", "subagent_type": "Explore"}
    models = Models(
        {
            "work": [reply(*[use("Task", task) for _ in range(12)]), reply(say("done"))],
            "task": [reply(say("found it"))],
        }
    )
    store, state = SessionStore.create(workspace, "claude-test")
    sandboxes = CountingSandboxes(workspace, tmp_path)
    made = Session(
        store, state, workspace=workspace, registry=Registry.load(workspace),
        sandboxes=sandboxes, model=models, ui=FakeUI(), limits=RunLimits(max_turns=20),
        task_budget=3,
    )  # fmt: skip
    try:
        made.send("look around")
        assert sandboxes.most == 3
        results = made.messages("work")[-2]["content"]
        assert isinstance(results, list) and all("found it" in r["content"] for r in results)
    finally:
        made.close()


def test_an_answer_nested_too_deeply_is_an_error_and_the_session_goes_on(
    workspace: Path, tmp_path: Path
) -> None:
    ui = FakeUI()
    unreadable = fake.nested_tool_use("Read", 100_000)  # more than the SDK's json.loads can take
    refused = fake.nested_tool_use("Read", 950)  # parsed, but json.dumps would give up
    script: list[fake.Scripted] = [
        unreadable,
        unreadable,
        refused,
        fake.message(fake.text("Still here.")),
    ]
    with fake.FakeMessagesAPI(script) as api:
        model = AnthropicModel(
            "m", api_key="k", base_url=api.base_url, max_retries=1, sleep=lambda _: None
        )
        made = open_session(workspace, tmp_path, lambda label: model, ui)
        try:
            made.send("read it")
            made.send("try again")
        finally:
            made.close()
    assert ui.shown[0].startswith(
        "error: the model kept answering with JSON nested too deeply to read"
    )
    assert ui.shown[-1] == "Still here."
    [result] = api.message_requests[-1].body["messages"][-1]["content"][:1]
    assert result["is_error"] and "nested more than 64 levels deep" in result["content"]
