"""A batch's synthesis of each task, without Docker: when it runs, what it is given, how it
resumes, and that it never fails its task."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sandbox_runner.batch.driver import BatchDriver
from sandbox_runner.batch.job import JobOutcome, JobPayload
from sandbox_runner.batch.ledger import Ledger
from sandbox_runner.batch.resume import Action
from sandbox_runner.batch.setup import BatchJob, batch_jobs, decide_all, prepare_tasks
from sandbox_runner.batch.summary import read_status
from sandbox_runner.batch.synthesis import planned_syntheses, tasks_of
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.cli import cli
from sandbox_runner.plans.document import split_document
from sandbox_runner.runs.executor import ThreadExecutor
from sandbox_runner.spend import Spend
from tests.unit.test_batch import FakeWork, conversation, in_flight_scratch, write


class SeeingWork(FakeWork):
    """FakeWork that keeps the payload of every job it ran."""

    def __init__(self, failing: set[str] | None = None, **options: Any) -> None:
        super().__init__(failing, **options)
        self.payloads: dict[str, JobPayload] = {}

    def __call__(self, job: BatchJob) -> Callable[[], JobOutcome]:
        self.payloads[job.key] = job.payload
        return super().__call__(job)


def run(
    tmp_path: Path,
    work: FakeWork,
    *,
    perspectives: str = "[a, b]",
    synthesis: bool = True,
    spend: Spend | None = None,
    retry_failed: bool = False,
) -> tuple[BatchDriver, int]:
    text = (
        f"defaults: {{repo: repo, perspectives: {perspectives}}}\n"
        "tasks:\n  - {id: t1, requirements: Add a flag}\n  - {id: t2, requirements: s}\n"
    )
    batch = load_batch_file(write(tmp_path / "batch.yaml", text))
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    prepared = prepare_tasks(batch, batch.tasks, None, lambda _: None, synthesis=synthesis)
    jobs = decide_all(batch_jobs(prepared, out), out, retry_failed=retry_failed)
    driver = BatchDriver(
        "b",
        out,
        jobs,
        ThreadExecutor(2),
        work,
        scratch=tmp_path / "scratch",
        spend=spend,
        retry_failed=retry_failed,
    )
    return driver, driver.run().exit_code


def report(tmp_path: Path, task: str = "t1") -> dict[str, Any]:
    document = json.loads((tmp_path / f"out/tasks/{task}/report.json").read_text())
    assert isinstance(document, dict)
    return document


def test_a_task_with_two_valid_plans_gets_one_synthesis_of_them(
    tmp_path: Path, sample_repo: Path
) -> None:
    work = SeeingWork()
    driver, code = run(tmp_path, work)
    assert code == 0
    assert work.runs == {"t1/a": 1, "t1/b": 1, "t1/recommended": 1, "t2/a": 1, "t2/b": 1,
                         "t2/recommended": 1}  # fmt: skip
    synthesis = work.payloads["t1/recommended"]
    # The built-in Synthesis agent, given the task's requirements and both plans.
    assert synthesis.job.agent.name == "Synthesis" and synthesis.job.sources == ("a", "b")
    task = synthesis.job.requirements
    assert "<requirements>\nAdd a flag\n</requirements>" in task
    assert task.count('<plan perspective="') == 2
    out = tmp_path / "out"
    metadata, _ = split_document((out / "tasks/t1/recommended.md").read_text())
    assert metadata["batch_fingerprint"] == synthesis.fingerprint
    [record] = [r for r in Ledger(out).read() if r.key == "t1/recommended"]
    assert record.status == "complete" and record.fingerprint == synthesis.fingerprint
    recommended = report(tmp_path)["recommended"]
    assert (recommended["plan_file"], recommended["valid"]) == ("recommended.md", True)
    assert [row.key for row in driver.rows()][:3] == ["t1/a", "t1/b", "t1/recommended"]


def test_a_task_with_one_valid_plan_gets_the_reason_and_no_synthesis_job(
    tmp_path: Path, sample_repo: Path
) -> None:
    work = FakeWork(failing={"b"})
    _, code = run(tmp_path, work)
    assert code == 1
    assert not any(key.endswith("/recommended") for key in work.runs)
    assert not any(r.key.endswith("/recommended") for r in Ledger(tmp_path / "out").read())
    assert report(tmp_path)["synthesis"]["note"] == (
        "it needs at least 2 valid plans; 1 of 2 is valid"
    )
    assert not (tmp_path / "out/tasks/t1/recommended.md").exists()


def test_a_finished_synthesis_is_not_made_again_on_resume(
    tmp_path: Path, sample_repo: Path
) -> None:
    run(tmp_path, FakeWork())
    before = (tmp_path / "out/tasks/t1/recommended.md").read_bytes()
    again = FakeWork()
    driver, code = run(tmp_path, again)
    assert (again.runs, code) == ({}, 0)
    assert (tmp_path / "out/tasks/t1/recommended.md").read_bytes() == before
    assert {row.key: row.status for row in driver.rows()}["t1/recommended"] == "complete"
    assert report(tmp_path)["recommended"]["valid"] is True


def test_a_failed_synthesis_never_fails_its_task(tmp_path: Path, sample_repo: Path) -> None:
    driver, code = run(tmp_path, FakeWork(failing={"recommended"}, reason="model refused"))
    assert code == 0  # the plans stand
    document = report(tmp_path)
    assert document["status"] == "ok" and document["exit_code"] == 0
    assert document["recommended"]["status"] == "failed"
    assert document["recommended"]["reason"] == "model refused"
    rows = {row.key: row.status for row in driver.rows()}
    assert rows["t1/recommended"] == "failed" and rows["t1/a"] == "complete"
    status = read_status(tmp_path / "out")
    assert status is not None
    [t1, _] = status["tasks"]
    assert (
        t1["valid"] == 2 and t1["recommended_note"] == "the synthesis ended failed: model refused"
    )
    # Failed for good: a plain resume leaves it; --retry-failed makes it again.
    assert run(tmp_path, FakeWork())[0].syntheses["t1"].decision.action is Action.SKIP_FAILED
    retry = FakeWork()
    run(tmp_path, retry, retry_failed=True)
    assert retry.runs == {"t1/recommended": 1, "t2/recommended": 1}
    assert report(tmp_path)["recommended"]["valid"] is True


def test_a_synthesis_that_failed_transiently_runs_again_on_resume_going_on(
    tmp_path: Path, sample_repo: Path
) -> None:
    run(tmp_path, FakeWork(failing={"recommended"}, resumable=True))
    again = FakeWork()
    _, code = run(tmp_path, again)
    assert code == 0
    assert again.runs == {"t1/recommended": 1, "t2/recommended": 1}
    earlier = again.earlier["t1/recommended"]
    assert earlier is not None and earlier.reason == "overloaded"  # went on with it
    assert (tmp_path / "out/tasks/t1/.attempts/recommended/1/recommended.md").is_file()


def test_a_synthesis_the_budget_keeps_from_starting_says_so(
    tmp_path: Path, sample_repo: Path
) -> None:
    # Each plan costs more than the budget: the synthesis is never started.
    work = FakeWork()
    _, code = run(tmp_path, work, spend=Spend(0.00001))
    assert code == 0  # the plans stand
    assert not any(key.endswith("/recommended") for key in work.runs)
    [record] = [r for r in Ledger(tmp_path / "out").read() if r.key == "t1/recommended"]
    assert record.status == "budget"
    note = report(tmp_path)["synthesis"]["note"]
    assert note.startswith("not started: cost budget of $0.0000 reached")
    # A higher budget makes it.
    again = FakeWork()
    assert run(tmp_path, again, spend=Spend(10.0))[1] == 0
    assert again.runs["t1/recommended"] == 1
    assert report(tmp_path)["recommended"]["valid"] is True


def test_no_synthesis_turns_it_off_and_says_why(tmp_path: Path, sample_repo: Path) -> None:
    work = FakeWork()
    _, code = run(tmp_path, work, synthesis=False)
    assert code == 0 and set(work.runs) == {"t1/a", "t1/b", "t2/a", "t2/b"}
    assert report(tmp_path)["synthesis"] == {
        "state": "off",
        "note": "turned off by flag --no-synthesis",
        "agent_override": None,
    }
    arguments = ["batch", str(tmp_path / "batch.yaml"), "--dry-run", "--no-synthesis"]
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code == 0 and "recommended" not in result.stdout


def test_new_valid_plans_make_the_synthesis_again(tmp_path: Path, sample_repo: Path) -> None:
    first = SeeingWork(failing={"c"})
    run(tmp_path, first, perspectives="[a, b, c]")
    assert first.payloads["t1/recommended"].job.sources == ("a", "b")
    retry = SeeingWork()
    run(tmp_path, retry, perspectives="[a, b, c]", retry_failed=True)
    assert retry.payloads["t1/recommended"].job.sources == ("a", "b", "c")
    kept = tmp_path / "out/tasks/t1/.attempts/recommended/superseded-1/recommended.md"
    assert kept.is_file()
    assert report(tmp_path)["recommended"]["sources"] == ["a", "b", "c"]


def test_what_an_engine_is_set_up_for(tmp_path: Path, sample_repo: Path) -> None:
    """The syntheses that may run this time: those of tasks with plans to run, and the
    ones left to make (a task with no other job still needs its sandboxes or its
    repository shipped)."""
    run(tmp_path, FakeWork(failing={"recommended"}, resumable=True))
    text = (tmp_path / "batch.yaml").read_text()
    batch = load_batch_file(write(tmp_path / "batch.yaml", text))
    out = tmp_path / "out"
    jobs = decide_all(batch_jobs(prepare_tasks(batch, batch.tasks, None, print), out), out)
    found = Ledger(out).last_by_key()
    records = {key: record for key, (record, _) in found.items()}
    attempts = {key: count for key, (_, count) in found.items()}
    planned = planned_syntheses(tasks_of(jobs), records, attempts, out)
    assert {task: decision.action for task, (_, decision, _) in planned.items()} == {
        "t1": Action.RETRY,
        "t2": Action.RETRY,
    }
    assert planned["t1"][0].payload.workspace == sample_repo


def test_a_task_override_turns_its_synthesis_off_and_its_limits_count(
    tmp_path: Path, sample_repo: Path
) -> None:
    text = (
        "defaults: {repo: repo, perspectives: [a, b]}\ntasks:\n"
        "  - {id: t1, requirements: r, overrides: {synthesis: false, max_turns: 60}}\n"
        "  - {id: t2, requirements: s}\n"
    )
    batch = load_batch_file(write(tmp_path / "tasks.yaml", text))
    one, two = prepare_tasks(batch, batch.tasks, None, lambda _: None)
    assert (one.spec.synthesis, one.spec.limits.max_turns) == (False, 60)
    assert one.spec.synthesis_note == "turned off by tasks.yaml (the task's overrides)"
    assert (two.spec.synthesis, two.spec.limits.max_turns) == (True, 40)


def test_a_synthesis_in_flight_when_the_driver_died_goes_on_with_its_conversation(
    tmp_path: Path, sample_repo: Path
) -> None:
    run(tmp_path, FakeWork())
    ledger = tmp_path / "out/results.jsonl"
    lines = ledger.read_text().splitlines()
    [fingerprint] = [
        json.loads(line)["fingerprint"] for line in lines if '"t1/recommended"' in line
    ]
    # As if the driver died while t1's synthesis ran: no ledger line, no committed files,
    # its conversation so far in its scratch.
    ledger.write_text("".join(f"{line}\n" for line in lines if '"t1/recommended"' not in line))
    for name in ("recommended.md", "recommended.transcript.jsonl"):
        (tmp_path / "out/tasks/t1" / name).unlink()
    in_flight_scratch(tmp_path, "t1/recommended", fingerprint)
    again = FakeWork()
    _, code = run(tmp_path, again)
    assert code == 0 and again.runs == {"t1/recommended": 1}
    earlier = again.earlier["t1/recommended"]
    assert earlier is not None and earlier.transcript == conversation("t1/recommended")
    kept = tmp_path / "out/tasks/t1/.attempts/recommended/interrupted"
    assert (kept / "recommended.transcript.jsonl").is_file()
