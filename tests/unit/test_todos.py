"""The work agent's checklist: TodoWrite's validation, the checklist an accepted plan's
steps start, how the terminal and /todos show it, and the state it is kept in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.agents.agent_file import read_agent_file
from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.session.commands import Commands
from sandbox_runner.session.session import PlanReview, Session
from sandbox_runner.session.state import SessionStore
from sandbox_runner.session.todo_view import compact_fragments, visible_window
from sandbox_runner.session.todos import (
    MAX_TODO_CHARS,
    MAX_TODOS,
    TODOS_EVENT,
    Todo,
    TodoProblem,
    parse_todos,
    plan_steps,
    saved_todos,
)
from sandbox_runner.tools.permissions import PermissionMode
from tests.support.scripted_model import reply, say, use
from tests.unit.test_session import FakeUI, Models, open_session

STEPS_PLAN = """# Plan: loud flag

## Approach
Add a flag.

## Detailed Steps
1. Add `--loud` to the **parser**
2. Make main() print in capitals
   (details that belong to step 2)
3. Test the flag

```
4. not a step: inside a code block
```

## Test Plan
- run pytest
"""


def item(content: str, status: str = "pending", **more: Any) -> dict[str, Any]:
    return {"content": content, "status": status, **more}


class RecordingUI(FakeUI):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[AgentEvent] = []

    def event(self, event: AgentEvent) -> None:
        self.events.append(event)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


@pytest.fixture
def ui() -> RecordingUI:
    return RecordingUI()


@pytest.fixture
def models() -> Models:
    return Models({})


@pytest.fixture
def session(workspace: Path, tmp_path: Path, models: Models, ui: RecordingUI) -> Iterator[Session]:
    made = open_session(workspace, tmp_path, models, ui)
    yield made
    made.close()


def test_todowrite_input_is_validated_and_bounded() -> None:
    todos, warnings = parse_todos(
        [item("Add the flag", "completed"), item("Test it", "in_progress", activeForm="Testing")]
    )
    assert todos == [Todo("Add the flag", "completed"), Todo("Test it", "in_progress", "Testing")]
    assert todos[1].label == "Testing" and warnings == []
    with pytest.raises(TodoProblem, match=f"at most {MAX_TODOS}"):
        parse_todos([item(f"step {n}") for n in range(MAX_TODOS + 1)])
    with pytest.raises(TodoProblem, match=rf"todos\[0\].content has .* at most {MAX_TODO_CHARS}"):
        parse_todos([item("x" * (MAX_TODO_CHARS + 1))])
    with pytest.raises(TodoProblem, match="status must be one of"):
        parse_todos([item("a", "done")])
    with pytest.raises(TodoProblem, match="content is empty"):
        parse_todos([item("  \n ")])
    with pytest.raises(TodoProblem, match="must be an array"):
        parse_todos("a, b")


def test_two_steps_in_progress_are_kept_with_a_warning_and_escapes_are_made_harmless() -> None:
    todos, warnings = parse_todos(
        [item("one", "in_progress"), item("two\x1b]0;owned\x07\nthree", "in_progress")]
    )
    assert len(todos) == 2 and "keep exactly one in_progress" in warnings[0]
    assert "\x1b" not in todos[1].content and "\n" not in todos[1].content


def test_a_damaged_saved_checklist_is_dropped() -> None:
    assert saved_todos([item("a", "completed")]) == [
        {"content": "a", "status": "completed", "activeForm": ""}
    ]
    assert saved_todos([{"content": 3}]) == [] and saved_todos("oops") == []


def test_the_work_agent_updates_the_checklist_unasked_and_the_state_keeps_it(
    session: Session, models: Models, ui: RecordingUI, workspace: Path, tmp_path: Path
) -> None:
    todos = [
        item("Read the code", "completed"),
        item("Edit it", "in_progress", activeForm="Editing"),
    ]
    models.scripts["work"] = [
        reply(use("TodoWrite", {"todos": todos})),
        reply(use("TodoWrite", {"todos": [item("x" * 400)]})),
        reply(say("on it")),
    ]
    session.send("do the thing")
    assert ui.asked == []  # never an approval, in default mode
    assert session.state.todos[1] == {
        "content": "Edit it",
        "status": "in_progress",
        "activeForm": "Editing",
    }
    [changed] = [event for event in ui.events if event.kind == TODOS_EVENT]
    assert changed.detail == "[x] Read the code\n[~] Edit it"
    messages: list[dict[str, Any]] = session.messages("work")
    results = [
        block
        for message in messages
        if message["role"] == "user"
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results[0]["content"].startswith("Checklist updated (1 of 2 done; in progress: Edit it)")
    assert results[1]["is_error"] and "was not changed" in results[1]["content"]
    tools = [tool.name for tool in models.made["work"].requests[0].tools]
    assert "TodoWrite" in tools
    saved = json.loads(session.store.state_path.read_text())
    assert saved["todos"] == session.state.todos
    session_id = session.state.id
    session.close()
    again = open_session(workspace, tmp_path, Models({}), FakeUI(), resume=session_id)
    try:
        assert again.state.todos == saved["todos"]
        assert Commands(again).run("/todos").lines == [
            "checklist: 1 of 2 done; in progress: Edit it",
            "  1. [x] Read the code",
            "  2. [~] Edit it",
        ]
    finally:
        again.close()


def test_an_accepted_plans_steps_become_the_checklist_in_the_kickoff(
    session: Session, models: Models, ui: RecordingUI
) -> None:
    session.enter_plan()
    target = session.plan_file.container_path
    models.scripts["plan"] = [
        reply(use("Write", {"file_path": target, "content": STEPS_PLAN})),
        reply(use("ExitPlanMode", {})),
    ]
    models.scripts["work"] = [reply(say("Implementing."))]
    ui.reviews.append(PlanReview(True, PermissionMode.ACCEPT_EDITS))
    session.send("plan a loud flag")
    assert [todo["content"] for todo in session.state.todos] == [
        "Add --loud to the parser",
        "Make main() print in capitals (details that belong to step 2)",
        "Test the flag",
    ]
    kickoff = models.made["work"].requests[0].messages[0]["content"][0]["text"]
    assert "The plan's steps are your checklist now" in kickoff
    assert "[ ] Add --loud to the parser\n[ ] Make main()" in kickoff
    system = models.made["work"].requests[0].system
    assert "TodoWrite" in system and "in_progress" in system


def test_plan_steps_take_subheadings_else_items_and_nothing_without_the_section() -> None:
    headed = "# P\n\n## Steps\n### 1. Parse the flag\ntext\n- detail\n### 2. Print loudly\n"
    assert [t.content for t in plan_steps(headed)] == ["1. Parse the flag", "2. Print loudly"]
    assert plan_steps("# P\n\n## Approach\n- a\n") == []
    assert [t.content for t in plan_steps("## Implementation Steps\n- [x] done\n- [ ] b\n")] == [
        "done",
        "b",
    ]


def test_compaction_and_clear_keep_the_agent_and_the_checklist_in_step(
    session: Session, models: Models
) -> None:
    session.state.todos = [{"content": "Edit it", "status": "in_progress", "activeForm": ""}]
    models.scripts["work"] = [reply(say("hi")), reply(say("summary")), reply(say("again"))]
    session.send("hello")
    session.compact()
    session.send("go on")
    last = models.made["work"].requests[-1].messages[0]["content"]
    assert any("## Your checklist (TodoWrite)\n\n[~] Edit it" in block["text"] for block in last)
    assert Commands(session).run("/clear").lines[-1] == "checklist cleared"
    assert session.state.todos == []
    assert Commands(session).run("/todos").lines[0].startswith("no checklist")


def window_text(todos: list[Todo], busy: bool = True, width: int = 80) -> str:
    return "".join(text for _, text in compact_fragments(todos, width, busy=busy))


def test_the_checklist_above_the_prompt_is_compact_and_highlights_the_step_under_way() -> None:
    short = [Todo("a", "completed"), Todo("b", "in_progress", "Doing b"), Todo("c")]
    assert window_text(short) == "  ☑ a\n  ◐ Doing b\n  ☐ c\n"
    styles = [style for style, _ in compact_fragments(short, 80, busy=True)]
    assert styles == ["class:todo.done", "class:todo.active", "class:todo"]
    long = [Todo(f"step {n}", "completed" if n < 6 else "pending") for n in range(12)]
    long[6] = Todo("step 6", "in_progress")
    assert visible_window(long) == (5, 10)
    text = window_text(long)
    assert text.splitlines() == [
        "  ☑ step 5",
        "  ◐ step 6",
        "  ☐ step 7",
        "  ☐ step 8",
        "  ☐ step 9",
        "  +7 more (5 done, 2 to do) · /todos",
    ]
    assert window_text([Todo("x" * 200)], width=40) == "  ☐ " + "x" * 35 + "…\n"
    done = [Todo("a", "completed")]
    assert window_text(done, busy=True) and window_text(done, busy=False) == ""
    assert window_text([]) == ""


def test_agent_files_may_list_todowrite_and_subagents_never_get_it(tmp_path: Path) -> None:
    for name in ("TodoWrite", "update_work_plan"):
        path = tmp_path / f"{name}.md"
        path.write_text(f"---\nname: helper\ndescription: d\ntools: Read, {name}\n---\nHelp.\n")
        parsed = read_agent_file(path, "user")
        assert parsed.fields["tools"] == ("Read", "TodoWrite") and parsed.notes == []


def test_only_the_work_session_is_offered_todowrite_whatever_agent_files_list(
    workspace: Path, tmp_path: Path, planrun_home: Path
) -> None:
    agents = planrun_home / "agents"
    agents.mkdir()
    for name in ("general-purpose", "Plan"):
        (agents / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: d\ntools: Read, Glob, Task, TodoWrite\n---\nGo.\n"
        )
    task = {"description": "d", "prompt": "look", "subagent_type": "general-purpose"}
    models = Models(
        {"work": [reply(use("Task", task)), reply(say("done"))], "task": [reply(say("ok"))]}
    )
    session = open_session(workspace, tmp_path, models, FakeUI())
    try:
        session.send("look around")
        [task_model] = [m for label, m in models.made.items() if label.startswith("task")]
        assert [t.name for t in task_model.requests[0].tools] == ["Read", "Glob"]
        work_tools = [t.name for t in models.made["work"].requests[0].tools]
        assert work_tools.count("TodoWrite") == 1
        plan_tools = [t.name for t in session.conversations.loop("plan").config.tools()]
        assert "TodoWrite" not in plan_tools and "Read" in plan_tools
    finally:
        session.close()


def test_a_work_agent_whose_definition_disallows_todowrite_has_no_checklist(
    workspace: Path, tmp_path: Path, planrun_home: Path
) -> None:
    (planrun_home / "agents").mkdir()
    (planrun_home / "agents" / "general-purpose.md").write_text(
        "---\nname: general-purpose\ndescription: d\ndisallowedTools: TodoWrite\n---\nGo.\n"
    )
    models = Models({"work": [reply(say("hi"))]})
    session = open_session(workspace, tmp_path, models, FakeUI())
    try:
        session.send("hello")
        [request] = models.made["work"].requests
        assert "TodoWrite" not in [t.name for t in request.tools]
        assert "TodoWrite" not in request.system
    finally:
        session.close()


def test_a_state_written_before_checklists_loads(session: Session) -> None:
    data = json.loads(session.store.state_path.read_text())
    del data["todos"]
    session.store.state_path.write_text(json.dumps(data))
    assert SessionStore(session.store.directory).load().todos == []
