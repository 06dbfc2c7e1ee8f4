"""`planrun plans resume` decided from a run's files: what is kept, what goes on, what is
made again, and the ways a run directory can be wrong (scripted models, local sandboxes)."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from sandbox_runner.cli import cli
from sandbox_runner.errors import ConfigError
from sandbox_runner.runs.locks import RUN_LOCK, DirectoryLock
from sandbox_runner.runs.multi import PlanRunOutcome, execute, sandbox_root_of
from sandbox_runner.runs.plan_resume import (
    check_not_batch_task,
    plan_resume,
    read_run_record,
)
from sandbox_runner.runs.prepare import PlanRequest, claim_out_dir
from sandbox_runner.runs.run_spec import PlanRunSpec, Resumption
from sandbox_runner.types import ModelRequest, ModelResponse
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, Step, reply, say, use
from tests.unit.test_batch import conversation
from tests.unit.test_continue import OVERLOADED
from tests.unit.test_plan_loop import VALID_PLAN


def spec_for(workspace: Path, parallel: int = 2) -> PlanRunSpec:
    return PlanRunSpec(
        requirements="Add a --verbose flag",
        workspace=workspace,
        perspectives=["simplicity", "security"],
        model_id="claude-test",
        parallel=parallel,
        synthesis=False,
    )


def go(
    spec: PlanRunSpec,
    out: Path,
    scripts: dict[str, list[Step]],
    resumption: Resumption | None = None,
) -> PlanRunOutcome:
    models = {label: ScriptedModel(list(steps)) for label, steps in scripts.items()}
    sandboxes: list[LocalSandbox] = []

    def factory(plan_dir: Path | None) -> LocalSandbox:
        sandboxes.append(LocalSandbox(spec.workspace, plan_dir))
        return sandboxes[-1]

    def stop_all() -> None:
        for sandbox in sandboxes:
            sandbox.stop()

    try:
        return execute(
            spec,
            out,
            model_factory=lambda label: models.setdefault(label, ScriptedModel([])),
            sandbox_factory=factory,
            stop_sandboxes=stop_all,
            resumption=resumption,
        )
    finally:
        stop_all()


def explores_then_fails() -> list[Step]:
    return [reply(use("Glob", {"pattern": "**/*.py"})), OVERLOADED]


@pytest.fixture
def failed_run(sample_repo: Path, tmp_path: Path) -> tuple[PlanRunSpec, Path]:
    """A run whose two plans both stopped on an overloaded API, after one look around."""
    out = tmp_path / "out"
    out.mkdir()
    spec = spec_for(sample_repo, parallel=1)
    go(spec, out, {"simplicity": explores_then_fails(), "security": explores_then_fails()})
    return spec, out


def test_a_resume_killed_after_setting_files_aside_still_goes_on(
    failed_run: tuple[PlanRunSpec, Path],
) -> None:
    resume = plan_resume(*failed_run)
    assert resume.going_on == ["simplicity", "security"]
    resume.set_aside()
    # Killed here: the new runs never copied the conversations into the run directory.
    again = plan_resume(*failed_run)
    assert again.going_on == ["simplicity", "security"] and again.starting_over == []


def test_a_conversation_an_interrupt_kept_from_going_on_is_gone_on_with_later(
    failed_run: tuple[PlanRunSpec, Path],
) -> None:
    spec, out = failed_run
    resume = plan_resume(spec, out)
    resume.set_aside()
    released = threading.Event()

    def interrupt(request: ModelRequest) -> ModelResponse:
        signal.raise_signal(signal.SIGINT)  # Ctrl-C while security still waits its turn
        released.wait(3)
        return reply(say("late"))

    try:
        outcome = go(spec, out, {"simplicity": [interrupt]}, resume.resumption)
    finally:
        released.set()
    assert outcome.interrupted
    security = outcome.report.document["plans"][1]
    assert security["reason"].startswith("interrupted before it") and security["resumable"]
    assert plan_resume(spec, out).going_on == ["simplicity", "security"]


def test_a_run_whose_plans_are_all_kept_is_finished_when_its_report_is_not(
    sample_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    spec = spec_for(sample_repo)
    done = [reply(say(VALID_PLAN)), reply(say(VALID_PLAN))]
    go(spec, out, {"simplicity": list(done), "security": list(done)})
    assert plan_resume(spec, out).nothing_to_do
    report = json.loads((out / "report.json").read_text())
    (out / "report.json").write_text(json.dumps({**report, "exit_code": 130}))
    assert plan_resume(spec, out).unfinished == "it was interrupted"
    (out / "report.json").unlink()
    resume = plan_resume(spec, out)
    assert resume.kept == ["simplicity", "security"] and resume.unfinished == "it has no report"


@pytest.mark.parametrize(
    "edit", ["wall_seconds: fast", "suggested_commands: 3", "turns: 1e400", "agent: [1]"]
)
def test_a_hand_edited_plan_is_still_kept(sample_repo: Path, tmp_path: Path, edit: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    spec = spec_for(sample_repo)
    done = [reply(say(VALID_PLAN)), reply(say(VALID_PLAN))]
    go(spec, out, {"simplicity": list(done), "security": list(done)})
    plan = out / "simplicity.md"
    key = edit.split(":")[0]
    lines = [edit if line.startswith(f"{key}:") else line for line in plan.read_text().split("\n")]
    plan.write_text("\n".join(lines))
    assert plan_resume(spec, out).kept == ["simplicity", "security"]


def test_attempts_through_a_planted_link_are_refused(
    failed_run: tuple[PlanRunSpec, Path], tmp_path: Path
) -> None:
    spec, out = failed_run
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / ".attempts").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="never writes through links"):
        plan_resume(spec, out).set_aside()
    assert list(elsewhere.iterdir()) == []
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / ".attempts").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="already holds plans"):
        claim_out_dir(fresh, spec.workspace)


@pytest.mark.parametrize(
    "record", ['{"request": {"parallel": 1e400}}', '{"request": []}', "[1, 2]", "{not json"]
)
def test_a_damaged_run_record_is_one_clear_error(tmp_path: Path, record: str) -> None:
    (tmp_path / "run.json").write_text(record)
    with pytest.raises(ConfigError, match=r"run\.json"):
        read_run_record(tmp_path)


def test_a_batch_task_is_resumed_by_its_batch(tmp_path: Path) -> None:
    task = tmp_path / "batch" / "tasks" / "t1"
    task.mkdir(parents=True)
    (tmp_path / "batch" / "batch.json").write_text("{}")
    with pytest.raises(ConfigError, match="run the same `planrun batch` command again"):
        check_not_batch_task(task)


def test_a_relative_context_file_is_recorded_as_read_from_the_repository(
    sample_repo: Path,
) -> None:
    request = PlanRequest("r", context_files=[Path("docs/notes.md")])
    recorded = request.to_json(sample_repo, "claude-test")
    assert recorded["context_files"] == [str(sample_repo / "docs" / "notes.md")]
    assert PlanRequest.from_json(json.loads(json.dumps(recorded))).model == "claude-test"


def test_a_run_being_written_is_not_resumed(tmp_path: Path, sample_repo: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    request = PlanRequest("r", repo=sample_repo).to_json(sample_repo, "claude-test")
    (out / "run.json").write_text(json.dumps({"request": request, "tree": None}))
    with DirectoryLock(out, name=RUN_LOCK, what="planrun plan"):
        result = CliRunner().invoke(cli, ["plans", "resume", str(out)])
    assert result.exit_code == 2
    assert f"another planrun plan (pid {os.getpid()}) is running in {out}" in result.output


def test_a_run_killed_before_its_files_were_recorded_says_so(
    tmp_path: Path, sample_repo: Path
) -> None:
    """The walk runs beside the first model calls: a kill before it ends leaves no tree."""
    from sandbox_runner.errors import ConfigError
    from sandbox_runner.runs.multi import PlanRunSpec
    from sandbox_runner.runs.plan_resume import check_unchanged

    spec = PlanRunSpec(requirements="r", workspace=sample_repo, perspectives=[None],
                       model_id="claude-test")  # fmt: skip
    with pytest.raises(ConfigError, match="stopped before its repository's files were recorded"):
        check_unchanged(spec, tmp_path / "out", None)


@pytest.mark.parametrize("kind", ["directory", "link"])
def test_a_lock_that_is_not_a_file_is_one_clear_error(tmp_path: Path, kind: str) -> None:
    lock = tmp_path / RUN_LOCK
    if kind == "directory":
        lock.mkdir()
    else:
        lock.symlink_to(tmp_path / "target")
    with pytest.raises(ConfigError, match="cannot lock"):
        DirectoryLock(tmp_path, name=RUN_LOCK, what="planrun plan").__enter__()


def test_a_killed_run_inside_the_repository_keeps_its_draft_for_the_resume(
    sample_repo: Path,
) -> None:
    out = sample_repo / "plans-out"
    out.mkdir()
    spec = spec_for(sample_repo)
    root = sandbox_root_of(sample_repo, out)
    assert not root.is_relative_to(sample_repo) and root == sandbox_root_of(sample_repo, out)
    # What a SIGKILL leaves: transcripts in the run directory, drafts in the sandbox root.
    for label in ("simplicity", "security"):
        (out / f"{label}.transcript.jsonl").write_text(conversation(label))
    (root / "security").mkdir(parents=True)
    (root / "security" / "security.md").write_text("# draft\n")
    resume = plan_resume(spec, out)
    assert resume.going_on == ["simplicity", "security"]
    assert resume.resumption.earlier["security"].plan == "# draft\n"
    resume.set_aside()
    assert not (root / "security").exists()
    kept = out / ".attempts" / "security" / "resumed" / "security" / "security.md"
    assert kept.read_text() == "# draft\n"


def test_a_plan_made_again_keeps_a_revision_the_report_and_the_cli_show(
    sample_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    spec = spec_for(sample_repo)
    invalid = VALID_PLAN.split("## Risks")[0]  # no Risks, no Alternatives: made again
    valid = [reply(say(VALID_PLAN)), reply(say(VALID_PLAN))]
    go(spec, out, {"simplicity": [reply(say(invalid))] * 2, "security": list(valid)})
    resume = plan_resume(spec, out)
    assert resume.starting_over == ["simplicity"]
    resume.set_aside()
    outcome = go(spec, out, {"simplicity": list(valid)}, resume.resumption)
    assert outcome.report.document["plans"][0]["valid"]
    history = CliRunner().invoke(cli, ["plans", "history", str(out), "-p", "simplicity"])
    assert history.exit_code == 0, history.output
    lines = history.output.splitlines()
    assert [line.split()[3] for line in lines] == ["plan", "resume"]
    # The sections the first plan lacked, and nothing else.
    added = len(VALID_PLAN.rstrip("\n").split("\n")) - len(invalid.rstrip("\n").split("\n"))
    assert added > 4 and f"+{added} -0" in lines[1]
    assert (
        "several plans (security, simplicity)"
        in CliRunner().invoke(cli, ["plans", "diff", str(out)]).output
    )
    html = (out / "report.html").read_text()
    assert f"<summary>simplicity: 2 revisions; revision 1 to 2: +{added} −0 lines" in html
