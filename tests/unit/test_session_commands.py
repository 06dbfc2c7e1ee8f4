"""The commands a Claude Code user reaches for first: /clear, /model, /cost, /exit, /init
and `!cmd`, against a session with a scripted model and local sandboxes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sandbox_runner.cli import Services, cli
from sandbox_runner.errors import ConfigError, DockerUnavailableError
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.session.commands import COMMANDS, INIT_REQUEST, Commands
from sandbox_runner.session.picker import pick_session
from sandbox_runner.session.session import Session
from sandbox_runner.session.state import SessionState, SessionStore
from sandbox_runner.types import Usage
from tests.support.scripted_model import reply, say
from tests.unit.test_session import FakeUI, Models, open_session


@pytest.fixture
def models() -> Models:
    return Models({})


@pytest.fixture
def ui() -> FakeUI:
    return FakeUI()


@pytest.fixture
def session(workspace: Path, tmp_path: Path, models: Models, ui: FakeUI) -> Iterator[Session]:
    made = open_session(workspace, tmp_path, models, ui)
    yield made
    made.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


def texts(message: dict[str, object]) -> list[str]:
    return [str(block["text"]) for block in message["content"]]  # type: ignore[attr-defined]


def test_clear_starts_a_new_conversation_that_a_resume_takes_up(
    session: Session, models: Models, workspace: Path, tmp_path: Path
) -> None:
    models.scripts["work"] = [reply(say("First answer.")), reply(say("Second answer."))]
    commands = Commands(session)
    session.send("remember the number 7")
    commands.run("/mode acceptEdits")
    tokens = session.state.tokens
    said = commands.run("/clear").lines
    assert said == [f"new conversation in {session.state.id}; the old one stays in its transcript"]
    session.send("what was the number?")
    request = models.made["work"].requests[-1]
    assert texts(request.messages[0])[0] == "what was the number?"
    assert all("7" not in text for m in request.messages for text in texts(m))
    assert session.state.mode == "acceptEdits" and session.state.tokens > tokens
    transcript = session.store.transcript("work").read_text()
    assert "remember the number 7" in transcript and '"type": "cleared"' in transcript
    session.close()
    again = open_session(workspace, tmp_path, Models({}), FakeUI(), resume=session.state.id)
    try:
        [first, second] = again.messages("work")
        assert texts(first)[0] == "what was the number?"
        assert texts(second) == ["Second answer."]
    finally:
        again.close()


def test_clear_in_plan_mode_keeps_the_plan_file_and_says_plan_mode_again(
    session: Session, models: Models
) -> None:
    models.scripts["plan"] = [reply(say("Planning.")), reply(say("Planning again."))]
    commands = Commands(session)
    commands.run("/plan look around")
    plan_file = session.state.plan_file
    commands.run("/clear")
    session.send("start over")
    request = models.made["plan"].requests[-1]
    [message] = request.messages
    assert texts(message)[0] == "start over"
    assert any(text.startswith("## Re-entering Plan Mode") for text in texts(message))
    assert session.state.plan_file == plan_file and session.state.mode == "plan"


def test_model_shows_switches_validates_and_is_saved(session: Session, models: Models) -> None:
    commands = Commands(session)
    shown = commands.run("/model").lines
    assert shown[0] == "model: claude-test" and "opus (claude-opus-4-8)" in shown[1]
    models.scripts["work"] = [reply(say("One.")), reply(say("Two."))]
    session.send("hello")
    assert commands.run("/model opus").lines == ["model: claude-opus-4-8 (from the next turn)"]
    session.send("again")
    assert [r.model for r in models.made["work"].requests] == ["claude-test", "claude-opus-4-8"]
    assert SessionStore(session.store.directory).load().model == "claude-opus-4-8"
    assert commands.run("/model claude-haiku-4-5").lines[0].startswith("model: claude-haiku-4-5")
    for bad in ("/model gpt-4", "/model opus extra", "/model 'claude- x'"):
        assert commands.run(bad).lines[0].startswith("error: unknown model")
    assert session.state.model == "claude-haiku-4-5"


def test_cost_prices_each_stretch_at_its_model_per_conversation_and_in_all(
    session: Session, models: Models
) -> None:
    commands = Commands(session)
    commands.run("/model sonnet")
    models.scripts["work"] = [reply(say("One."), tokens=1000), reply(say("Two."), tokens=1000)]
    models.scripts["plan"] = [reply(say("Plan."), tokens=400)]
    session.send("hello")
    commands.run("/model haiku")
    session.send("again")
    commands.run("/plan look")
    one = Usage(input_tokens=1000, output_tokens=250)
    work = (estimate_cost("claude-sonnet-4-6", one) or 0) + (
        estimate_cost("claude-haiku-4-5", one) or 0
    )
    plan = estimate_cost("claude-haiku-4-5", Usage(input_tokens=400, output_tokens=100)) or 0
    assert session.state.cost_usd == pytest.approx(work + plan, abs=1e-6)
    lines = commands.run("/cost").lines
    assert lines[0] == (
        f"{session.state.id}: 2,000 input, 500 output, 0 cache read, 0 cache write tokens; "
        f"${work:.4f}"
    )
    assert lines[1].startswith(f"{session.state.id}-plan: 400 input, 100 output")
    assert lines[2] == f"total: 3,000 tokens; ${work + plan:.4f} (estimated at list price)"


def test_exit_and_quit_end_the_session_and_say_how_to_come_back(session: Session) -> None:
    commands = Commands(session)
    for name in ("/exit", "/quit"):
        outcome = commands.run(name)
        assert outcome.quit
        assert outcome.lines == [
            f"session {session.state.id} kept: planrun --continue "
            f"(or planrun --resume {session.state.id}) comes back"
        ]


def test_bang_runs_in_the_work_container_unasked_and_the_agent_sees_it(
    session: Session, models: Models, ui: FakeUI, workspace: Path
) -> None:
    commands = Commands(session)
    outcome = commands.shell("!ls src; echo oops >&2; exit 3")
    assert "app.py" in "\n".join(outcome.lines) and outcome.lines[-1] == "(exit status 3)"
    assert ui.asked == []
    models.scripts["work"] = [reply(say("I see app.py."))]
    session.send("what is there?")
    [message] = models.made["work"].requests[0].messages
    [asked, note] = texts(message)
    assert asked == "what is there?"
    assert "<bash-input>ls src; echo oops >&2; exit 3</bash-input>" in note
    assert "app.py" in note and "oops" in note and "exit status 3" in note
    events = [e for e in session.store.events() if e["event"] == "user_command"]
    assert events[0]["exit_code"] == 3
    assert commands.shell("!").lines == ["error: ! takes a command: !ls"]


def test_bang_in_plan_mode_runs_read_only_commands_only(
    session: Session, models: Models, workspace: Path
) -> None:
    commands = Commands(session)
    commands.run("/plan")
    refused = commands.shell("!rm src/app.py").lines
    assert refused[0].startswith("error: plan mode is read-only, so `rm src/app.py` was not run")
    assert (workspace / "src" / "app.py").exists()
    assert commands.shell("!cat src/app.py").lines == ["print('hi')", "(exit status 0)"]
    models.scripts["plan"] = [reply(say("Noted."))]
    session.send("plan it")
    notes = texts(models.made["plan"].requests[0].messages[0])
    assert any("<bash-input>cat src/app.py</bash-input>" in note for note in notes)


def test_init_asks_the_agent_to_write_claude_md_and_not_in_plan_mode(
    session: Session, models: Models
) -> None:
    commands = Commands(session)
    models.scripts["work"] = [reply(say("Written."))]
    assert commands.run("/init").lines == []
    assert texts(models.made["work"].requests[0].messages[0]) == [INIT_REQUEST]
    commands.run("/plan")
    assert commands.run("/init").lines[0].startswith("error: /init writes CLAUDE.md")


def test_help_lists_every_command_and_every_listed_command_runs(session: Session) -> None:
    commands = Commands(session)
    listed = [line.split()[0] for line in commands.run("/help").lines]
    assert listed == list(COMMANDS)
    assert {*commands._handlers, "!"} == set(COMMANDS)
    docs = (Path(__file__).parents[2] / "docs" / "session.md").read_text()
    for name in COMMANDS:
        assert f"`{name}" in docs, name


def test_a_cleared_transcript_entry_is_read_back(tmp_path: Path) -> None:
    from sandbox_runner.agents.conversation import saved_conversation

    lines = [
        json.dumps({"type": "system", "text": "s", "model": "m"}),
        json.dumps({"type": "user", "text": "old"}),
        json.dumps({"type": "cleared"}),
        json.dumps({"type": "user", "text": "new"}),
    ]
    assert saved_conversation(lines).messages == [
        {"role": "user", "content": [{"type": "text", "text": "new"}]}
    ]


def test_resume_without_an_id_lists_the_repository_sessions_and_exits_2(
    workspace: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    mine = open_session(workspace, tmp_path, Models({}), FakeUI())
    theirs = open_session(other, tmp_path, Models({}), FakeUI())
    mine.close()
    theirs.close()

    def no_docker() -> Any:
        raise DockerUnavailableError("not here")

    if os.geteuid() == 0:  # a work session needs a repository a regular user owns
        for path in [workspace, *workspace.rglob("*")]:
            os.chown(path, 4321, 4321)
    services = Services(docker=no_docker)
    listed = CliRunner().invoke(cli, ["--repo", str(workspace), "--resume"], obj=services)
    assert listed.exit_code == 2
    assert mine.state.id in listed.output and theirs.state.id not in listed.output
    assert "choose a session: planrun --resume ID" in listed.output
    args = ["--repo", str(workspace), "--resume", mine.state.id]
    resumed = CliRunner().invoke(cli, args, obj=services, input="")
    assert resumed.output.startswith(f"resumed session {mine.state.id} in default mode")


def test_the_picker_resumes_the_session_chosen(workspace: Path, tmp_path: Path) -> None:
    first = open_session(workspace, tmp_path, Models({}), FakeUI())
    second = open_session(workspace, tmp_path, Models({}), FakeUI())
    first.close()
    second.close()
    offered: list[list[str]] = []

    def choose(found: list[SessionState]) -> str | None:
        offered.append([state.id for state in found])
        return first.state.id

    assert pick_session(workspace, choose) == first.state.id
    assert offered == [[second.state.id, first.state.id]]  # the most recent first
    with pytest.raises(ConfigError, match="no session chosen"):
        pick_session(workspace, lambda found: None)
    with pytest.raises(ConfigError, match="no session of"):
        pick_session(tmp_path, choose)


def test_resume_lists_the_other_sessions_and_switches_to_one_by_id_or_prefix(
    session: Session, workspace: Path, tmp_path: Path
) -> None:
    commands = Commands(session)
    alone = commands.run("/resume")
    assert alone.lines == ["no other session of this repository (planrun starts a new one)"]
    other = open_session(workspace, tmp_path, Models({}), FakeUI())
    other.close()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    open_session(elsewhere, tmp_path, Models({}), FakeUI()).close()
    listed = commands.run("/resume")
    assert not listed.quit and listed.resume is None
    assert any(line.startswith(other.state.id) for line in listed.lines)
    assert session.state.id not in "\n".join(listed.lines[1:])  # not itself
    assert len(listed.lines) == 3  # the heading, the one other session, how to switch
    switched = commands.run(f"/resume {other.state.id[:-2]}")
    assert switched.quit and switched.resume == other.state.id
    assert switched.lines[0] == f"switching to session {other.state.id}"
    assert switched.lines[1].startswith(f"session {session.state.id} kept")
    wrong = commands.run("/resume nosuch")
    assert not wrong.quit and wrong.resume is None
    assert wrong.lines == [
        "error: no other session of this repository match 'nosuch'; /resume lists them"
    ]
