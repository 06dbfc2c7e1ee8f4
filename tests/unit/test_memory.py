"""Memory files (CLAUDE.md, AGENTS.md, PLANRUN.md): found, read safely, and given to every
prompt: the work and plan sessions, Task subagents and `planrun plan`; `/memory` lists them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.agents.memory import (
    MAX_FILE_BYTES,
    MAX_IMPORT_DEPTH,
    NestedMemory,
    imports,
    load_memory,
)
from sandbox_runner.batch.setup import batch_jobs, prepare_tasks
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.runs.plan_job import run_plan
from sandbox_runner.runs.prepare import PlanRequest, prepare
from sandbox_runner.session.commands import Commands
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, reply, say, use
from tests.unit.test_plan_loop import VALID_PLAN
from tests.unit.test_session import FakeUI, Models, open_session


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / "src" / "app.py", "print('hi')\n")
    write(root / "CLAUDE.md", "Use tabs. MARK-CLAUDE\n")
    write(root / "AGENTS.md", "Run make check. MARK-AGENTS\n")
    return root


def test_user_files_come_first_then_the_repositorys_then_the_local_one(
    repo: Path, planrun_home: Path, claude_home: Path
) -> None:
    write(claude_home / "CLAUDE.md", "MARK-USER-CLAUDE\n")
    write(planrun_home / "PLANRUN.md", "MARK-USER-PLANRUN\n")
    write(repo / ".planrun" / "PLANRUN.md", "MARK-PROJECT-PLANRUN\n")
    write(repo / "CLAUDE.local.md", "MARK-LOCAL\n")
    write(repo / "pkg" / "CLAUDE.md", "MARK-NESTED\n")
    memory = load_memory(repo)
    assert [f.path for f in memory.files] == [
        claude_home / "CLAUDE.md",
        planrun_home / "PLANRUN.md",
        repo / "CLAUDE.md",
        repo / "AGENTS.md",
        repo / ".planrun" / "PLANRUN.md",
        repo / "CLAUDE.local.md",
    ]
    prompt = memory.prompt()
    marks = ["USER-CLAUDE", "USER-PLANRUN", "CLAUDE", "AGENTS", "PROJECT-PLANRUN", "LOCAL"]
    positions = [prompt.index(f"MARK-{mark}\n") for mark in marks]
    assert positions == sorted(positions)
    assert (
        "Contents of /workspace/CLAUDE.md (project instructions, checked into the codebase):"
        in prompt
    )
    assert f"Contents of {claude_home / 'CLAUDE.md'} (user's private global instructions" in prompt
    assert "/workspace/CLAUDE.local.md (user's private project instructions, not checked in)" in (
        prompt
    )
    # A nested file is named, not read: the agent gets it when it works there.
    assert memory.nested == ("pkg/CLAUDE.md",) and "MARK-NESTED" not in prompt
    assert "- /workspace/pkg/CLAUDE.md" in prompt


def test_no_memory_files_means_no_prompt_section(tmp_path: Path) -> None:
    write(tmp_path / "repo" / "a.py", "")
    memory = load_memory(tmp_path / "repo")
    assert memory.prompt() == "" and memory.digest() == ""


def test_a_link_out_of_the_repository_is_refused(repo: Path, tmp_path: Path) -> None:
    secret = write(tmp_path / "secret.txt", "SECRET-TOKEN\n")
    (repo / "CLAUDE.md").unlink()
    (repo / "CLAUDE.md").symlink_to(secret)
    write(repo / "docs" / "rules.md", "MARK-RULES\n")
    (repo / "AGENTS.md").unlink()
    (repo / "AGENTS.md").symlink_to(repo / "docs" / "rules.md")  # inside: followed
    memory = load_memory(repo)
    assert "SECRET-TOKEN" not in memory.prompt()
    assert "MARK-RULES" in memory.prompt()
    assert any("leads outside" in problem for problem in memory.problems)


def test_a_large_file_is_cut_with_a_note_and_all_files_share_a_budget(repo: Path) -> None:
    write(repo / "CLAUDE.md", "x" * (MAX_FILE_BYTES + 5000))
    write(repo / "AGENTS.md", "y" * (MAX_FILE_BYTES - 10))
    write(repo / ".planrun" / "PLANRUN.md", "z" * (MAX_FILE_BYTES - 10))
    memory = load_memory(repo)
    first, second, third = memory.files
    assert len(first.text) == MAX_FILE_BYTES and "per file" in first.note
    assert first.size == MAX_FILE_BYTES + 5000
    assert second.note == "" and "for all memory files" in third.note
    assert sum(len(f.text) for f in memory.files) == 100 * 1024
    assert "[cut at 40 KB of 44 KB: the limit per file]" in memory.prompt()


def test_control_characters_show_as_question_marks_and_binary_files_are_left_out(
    repo: Path,
) -> None:
    write(repo / "CLAUDE.md", "red \x1b[31mtext\u202e here\n")
    (repo / "AGENTS.md").write_bytes(b"\x00\x01binary")
    memory = load_memory(repo)
    assert [f.text for f in memory.files] == ["red ?[31mtext? here\n"]
    assert any("not text" in problem for problem in memory.problems)


def test_imports_are_followed_inside_the_repository_only(repo: Path, claude_home: Path) -> None:
    write(repo / "CLAUDE.md", "See @docs/style.md and @~/.ssh/id_rsa and @../outside.md.\n")
    write(repo / "docs" / "style.md", "MARK-STYLE\n")
    write(repo.parent / "outside.md", "MARK-OUTSIDE\n")
    write(claude_home / "CLAUDE.md", "Mine: @extra.md\n")
    write(claude_home / "extra.md", "MARK-USER-IMPORT\n")
    memory = load_memory(repo)
    prompt = memory.prompt()
    assert "MARK-STYLE" in prompt and "MARK-USER-IMPORT" in prompt
    assert "MARK-OUTSIDE" not in prompt
    style = next(f for f in memory.files if f.path == repo / "docs" / "style.md")
    assert style.imported_by == "/workspace/CLAUDE.md"
    assert "imported by /workspace/CLAUDE.md" in prompt
    assert sum("outside the repository; not followed" in p for p in memory.problems) == 2


def test_imports_skip_code_and_mentions_and_stop_after_five_hops(repo: Path) -> None:
    text = "Ask @alice. `@not/this.md`\n```\n@nor/this.md\n```\nBut @a/b.md, please\n"
    assert imports(text) == ["a/b.md"]
    write(repo / "CLAUDE.md", "@chain/1.md\n")
    for n in range(1, 9):
        write(repo / "chain" / f"{n}.md", f"MARK-{n} @{n + 1}.md\n")
    prompt = load_memory(repo).prompt()
    assert f"MARK-{MAX_IMPORT_DEPTH}" in prompt and f"MARK-{MAX_IMPORT_DEPTH + 1}" not in prompt


def tool_use_message(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": [use(name, tool_input)]}


def test_a_nested_file_is_shown_once_when_a_tool_first_works_under_it(repo: Path) -> None:
    write(repo / "pkg" / "CLAUDE.md", "MARK-NESTED\n")
    write(repo / "pkg" / "deep" / "mod.py", "")
    nested = NestedMemory(repo, load_memory(repo))
    assert (
        nested.notes_for([tool_use_message("Read", {"file_path": "/workspace/src/app.py"})]) == []
    )
    assert nested.notes_for([tool_use_message("Grep", {"path": "/workspace/pkgs"})]) == []
    touching = [tool_use_message("Read", {"file_path": "/workspace/pkg/deep/mod.py"})]
    [note] = nested.notes_for(touching)
    assert note.startswith("Contents of /workspace/pkg/CLAUDE.md (project instructions")
    assert "MARK-NESTED" in note
    assert nested.notes_for(touching) == []


# ---------------------------------------------------------------------------- prompts


def test_the_work_and_plan_sessions_and_task_subagents_get_the_memory(
    repo: Path, tmp_path: Path
) -> None:
    write(repo / "pkg" / "AGENTS.md", "MARK-NESTED\n")
    write(repo / "pkg" / "mod.py", "x = 1\n")
    models = Models(
        {
            "work": [
                reply(use("Read", {"file_path": "/workspace/pkg/mod.py"})),
                reply(
                    use("Task", {"description": "d", "prompt": "look", "subagent_type": "Explore"})
                ),
                reply(say("Done.")),
            ],
            "task": [reply(say("Looked."))],
            "plan": [reply(say("Planning."))],
        }
    )
    session = open_session(repo, tmp_path, models, FakeUI())
    try:
        session.send("read the module")
        work = models.made["work"].requests
        assert all("MARK-CLAUDE" in r.system and "MARK-AGENTS" in r.system for r in work)
        # The nested file arrives with the Read's result, once.
        notes = [b["text"] for b in work[1].messages[-1]["content"] if b["type"] == "text"]
        assert any("MARK-NESTED" in note for note in notes)
        assert not any("MARK-NESTED" in b.get("text", "") for b in work[2].messages[-1]["content"])
        [task_request] = models.made["task-1-Explore"].requests
        assert "MARK-CLAUDE" in task_request.system and "MARK-AGENTS" in task_request.system
        session.enter_plan()
        session.send("plan it")
        [plan_request] = models.made["plan"].requests
        assert "MARK-CLAUDE" in plan_request.system
        assert plan_request.system.index("MARK-CLAUDE") < plan_request.system.index(
            "## Plan File Info:"
        )
    finally:
        session.close()


def test_a_plan_run_and_its_batch_fingerprint_carry_the_memory(
    sample_repo: Path, tmp_path: Path, claude_home: Path
) -> None:
    write(sample_repo / "CLAUDE.md", "MARK-PLAN-RUN\n")
    spec, _ = prepare(PlanRequest("add a flag", sample_repo), lambda warning: None)
    [job] = spec.jobs()
    model = ScriptedModel(
        [
            reply(use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
            reply(say("ok")),
        ]
    )
    sandboxes: list[LocalSandbox] = []

    def factory(plan_dir: Path | None) -> LocalSandbox:
        sandboxes.append(LocalSandbox(sample_repo, plan_dir))
        return sandboxes[-1]

    run_plan(
        job,
        workspace=sample_repo,
        out_dir=tmp_path / "out",
        model=model,
        model_id="claude-test",
        sandbox_factory=factory,
    )
    assert "Contents of /workspace/CLAUDE.md (project instructions" in model.requests[0].system
    assert "MARK-PLAN-RUN" in model.requests[0].system

    # The user's file lies outside the repository's tree fingerprint: the job's includes it.
    batch_file = write(
        tmp_path / "batch.yaml",
        f"defaults: {{repo: {sample_repo}}}\ntasks:\n  - {{id: t1, requirements: r}}\n",
    )

    def job_fingerprint() -> str:
        batch = load_batch_file(batch_file)
        [batch_job] = batch_jobs(prepare_tasks(batch, batch.tasks, None, lambda _: None), None)
        return batch_job.fingerprint

    before = job_fingerprint()
    write(claude_home / "CLAUDE.md", "Prefer small functions.\n")
    assert job_fingerprint() != before


# ---------------------------------------------------------------------------- commands


def test_memory_and_status_list_the_files_in_use(repo: Path, tmp_path: Path) -> None:
    write(repo / "pkg" / "CLAUDE.md", "nested\n")
    session = open_session(repo, tmp_path, Models({}), FakeUI())
    try:
        commands = Commands(session)
        status = commands.run("/status").lines
        assert "memory: CLAUDE.md, AGENTS.md" in status
        lines = commands.run("/memory").lines
        assert lines[0] == "memory files in use (read when the session started):"
        assert any(str(repo / "CLAUDE.md") in line and "22 B" in line for line in lines)
        assert any(str(repo / "pkg" / "CLAUDE.md") in line and "nested" in line for line in lines)
        assert "ask the agent" in lines[-1]
        assert "/memory" in "\n".join(commands.run("/help").lines)
    finally:
        session.close()


def test_memory_says_where_files_would_be_read_when_there_are_none(
    tmp_path: Path, claude_home: Path
) -> None:
    write(tmp_path / "bare" / "a.py", "")
    session = open_session(tmp_path / "bare", tmp_path, Models({}), FakeUI())
    try:
        commands = Commands(session)
        assert "memory: -" in commands.run("/status").lines
        first = commands.run("/memory").lines[0]
        assert first.startswith("no memory files") and str(claude_home / "CLAUDE.md") in first
    finally:
        session.close()
