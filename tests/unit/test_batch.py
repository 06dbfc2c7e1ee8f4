"""Batches without Docker: the batch file, the resume matrix, the ledger, the driver's writes."""

from __future__ import annotations

import functools
import io
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt
from rich.console import Console
from rich.progress import Progress as RichProgress

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.batch.driver import BatchDriver
from sandbox_runner.batch.job import JobOutcome, run_job
from sandbox_runner.batch.ledger import Ledger, LedgerRecord, batch_lock
from sandbox_runner.batch.resume import Action, OnDisk, decide
from sandbox_runner.batch.run import BatchStart, DryRun
from sandbox_runner.batch.setup import (
    BatchJob,
    ChangedTaskError,
    batch_jobs,
    decide_all,
    prepare_tasks,
)
from sandbox_runner.batch.summary import read_status, render_summary, summary_document
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.cli import cli
from sandbox_runner.cli.batch_cmd import start_line
from sandbox_runner.cli.batch_progress import BatchProgress, JobsRemaining
from sandbox_runner.cli.estimate_view import budget_fit, budget_words
from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.document import render_document, split_document
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.plans.revisions import load_revisions
from sandbox_runner.plans.validate import validate_plan
from sandbox_runner.runs.executor import ThreadExecutor
from sandbox_runner.runs.plan_job import EarlierAttempt, required_sections
from sandbox_runner.runs.synthesis_step import SYNTHESIS_LABEL
from sandbox_runner.runs.workspace import GitStatusRunner
from sandbox_runner.types import Usage
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, reply, say
from tests.unit.test_plan_loop import VALID_PLAN
from tests.unit.test_synthesis import RECOMMENDED_PLAN

FP = "sha256:aaa"


def record(status: str = "complete", fingerprint: str = FP, attempt: int = 1) -> LedgerRecord:
    return LedgerRecord("t/p", fingerprint, status, attempt)


# The resume matrix -------------------------------------------------------------------


def test_a_complete_job_is_skipped() -> None:
    assert decide(FP, record(), 1, OnDisk(FP, 1, True)).action is Action.SKIP_COMPLETE


def test_a_failed_job_is_skipped_unless_retry_failed_which_moves_it_aside() -> None:
    assert decide(FP, record("failed"), 1, OnDisk(FP, 1, False)).action is Action.SKIP_FAILED
    retry = decide(FP, record("failed"), 1, OnDisk(FP, 1, False), retry_failed=True)
    assert (retry.action, retry.move_aside, retry.attempt) == (Action.RETRY, True, 2)


def test_a_job_without_a_record_is_pending_and_runs() -> None:
    assert decide(FP, None, 0, None) == decide(FP, None, 0, None)
    assert decide(FP, None, 0, None).action is Action.RUN
    # Files of an attempt the driver never recorded are moved aside first.
    assert decide(FP, None, 0, None, leftovers=True).move_aside


def test_a_changed_job_is_refused_unless_redone() -> None:
    assert decide("sha256:new", record(), 1, OnDisk(FP, 1, True)).action is Action.REFUSED
    redo = decide("sha256:new", record(), 1, OnDisk(FP, 1, True), redo=True)
    assert (redo.action, redo.move_aside) == (Action.REDO, True)


def test_a_plan_written_without_its_ledger_line_is_adopted_when_valid() -> None:
    adopted = decide(FP, None, 0, OnDisk(FP, 1, True))
    assert (adopted.action, adopted.attempt) == (Action.ADOPT, 1)
    # ... and run again (the file moved aside) when invalid or from other inputs.
    for disk in (OnDisk(FP, 1, False), OnDisk("sha256:old", 1, True)):
        decision = decide(FP, None, 0, disk)
        assert (decision.action, decision.move_aside) == (Action.RUN, True)
    # A retry committed after a failed record, then the driver died: adopted too.
    assert decide(FP, record("failed"), 1, OnDisk(FP, 2, True)).action is Action.ADOPT


def test_a_torn_last_ledger_line_is_ignored_and_healed(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.append(record())
    with ledger.path.open("a") as handle:
        handle.write('{"key": "t/q", "fingerp')
    assert [r.key for r in ledger.read()] == ["t/p"]
    ledger.append(LedgerRecord("t/r", FP, "complete", 1))
    assert [r.key for r in ledger.read()] == ["t/p", "t/r"]


def test_a_second_driver_is_refused(tmp_path: Path) -> None:
    with batch_lock(tmp_path), pytest.raises(ConfigError, match="another planrun batch"):
        batch_lock(tmp_path).__enter__()


# The batch file ------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tasks:\n  - id: a\n", "task 'a': key 'requirements'"),
        ("tasks:\n  - id: ../x\n    requirements: r\n", "task 1: key 'id'"),
        ("tasks:\n  - {id: a, requirements: r, colour: red}\n", "task 'a': key 'colour'"),
        (
            "tasks:\n  - {id: a, requirements: r, overrides: {max_turns: zero}}\n",
            "task 'a': overrides: key 'max_turns'",
        ),
        (
            "tasks:\n  - {id: a, requirements: r, overrides: {image: evil}}\n",
            "task 'a': key 'overrides.image'",
        ),
        ("tasks:\n  - {id: a, requirements: r}\n  - {id: a, requirements: s}\n", "'a': key 'id'"),
        ("tasks: [", "not valid YAML"),
    ],
)
def test_a_bad_batch_file_names_task_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_batch_file(write(tmp_path / "batch.yaml", text))


def test_jsonl_and_relative_paths(tmp_path: Path, sample_repo: Path) -> None:
    (tmp_path / "reqs.md").write_text("Add a flag\n")
    line = {"id": "t1", "requirements_file": "reqs.md", "repo": "repo", "perspectives": ["a"]}
    batch = load_batch_file(write(tmp_path / "b.jsonl", json.dumps(line) + "\n"))
    task = batch.tasks[0]
    assert (task.requirements, task.repo, task.perspectives) == (
        "Add a flag\n",
        sample_repo,
        ("a",),
    )


def test_cli_bad_file_exits_2_before_anything_starts(tmp_path: Path, sample_repo: Path) -> None:
    text = 'defaults: {repo: repo}\ntasks:\n  - {id: a, requirements: r, perspectives: ["a\\nb"]}\n'
    batch = write(tmp_path / "batch.yaml", text)
    result = CliRunner().invoke(cli, ["batch", str(batch), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "task 'a'" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_cli_dry_run_lists_the_jobs(tmp_path: Path, sample_repo: Path) -> None:
    text = "defaults: {repo: repo, perspectives: [a, b]}\ntasks:\n  - {id: t, requirements: r}\n"
    batch = write(tmp_path / "batch.yaml", text)
    result = CliRunner().invoke(cli, ["batch", str(batch), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    fields = ("key", "action", "goes_on", "when")
    jobs = [{key: job[key] for key in fields} for job in document["jobs"]]
    assert jobs == [
        {"key": "t/a", "action": "run", "goes_on": False, "when": None},
        {"key": "t/b", "action": "run", "goes_on": False, "when": None},
        # The task's synthesis, if its plans turn out valid: estimated too.
        {
            "key": "t/recommended",
            "action": "run",
            "goes_on": False,
            "when": "if two or more of its plans are valid",
        },
    ]
    estimates = [job["estimate"] for job in document["jobs"]]
    assert [estimate["label"] for estimate in estimates] == ["a", "b", "recommended"]
    assert estimates[2]["agent"] == "Synthesis"
    # Its prompt holds both plans, so it is longer than either plan's.
    assert estimates[2]["prompt_tokens"] > 2 * 2_500
    one_turn = document["totals"]["one_turn"]
    assert one_turn["tokens"] == sum(estimate["one_turn"]["tokens"] for estimate in estimates)
    assert one_turn["cost_usd"] > 0
    assert document["budget"] == {
        "max_cost_usd": None,
        "spent_usd": 0.0,
        "left_usd": None,
        "fits": None,
    }


def test_a_dry_run_says_the_budget_and_whether_the_estimate_fits_it(
    tmp_path: Path, sample_repo: Path
) -> None:
    text = "defaults: {repo: repo, perspectives: [a, b]}\ntasks:\n  - {id: t, requirements: r}\n"
    batch = str(write(tmp_path / "batch.yaml", text))
    said = {}
    for cap in ("0.001", "0.5", "1000", "none"):
        flags = [] if cap == "none" else ["--max-cost-usd", cap]
        result = CliRunner().invoke(cli, ["batch", batch, "--dry-run", *flags])
        assert result.exit_code == 0, result.output
        said[cap] = [line for line in result.stderr.splitlines() if line.startswith("Budget:")]
        document = json.loads(
            CliRunner().invoke(cli, ["batch", batch, "--dry-run", "--json", *flags]).stdout
        )
        assert (
            document["budget"]["fits"]
            == {"0.001": "no", "0.5": "maybe", "1000": "yes", "none": None}[cap]
        )
    assert said["0.001"][0].startswith("Budget: $0.0010 for the batch; not even one turn of each")
    assert said["0.5"][0].startswith("Budget: $0.50 for the batch; one turn of each job ($0.")
    assert said["0.5"][0].endswith("does not: the budget may stop jobs")
    assert said["1000"][0].startswith("Budget: $1,000.00 for the batch; every turn of every job")
    assert said["none"] == ["Budget: no cap (--max-cost-usd sets one)"]


def test_the_budget_left_after_earlier_runs_is_what_the_estimate_must_fit() -> None:
    totals: dict[str, object] = {
        "one_turn": {"tokens": 1_000, "cost_usd": 0.4},
        "max_turns_estimate": {"tokens": 9_000, "cost_usd": 3.0},
    }
    fit = budget_fit(DryRun([], 5.0, 2.5), totals)
    assert fit == {"max_cost_usd": 5.0, "spent_usd": 2.5, "left_usd": 2.5, "fits": "maybe"}
    assert budget_words(fit, totals) == (
        "$5.00 for the batch ($2.50 spent by earlier runs, $2.50 left); one turn of each job "
        "($0.40) fits it, every turn ($3.00) does not: the budget may stop jobs"
    )


def conversation(task: str) -> str:
    """A transcript holding a conversation to go on with: the start and one answer."""
    entries = [
        {"type": "system", "text": "the prompt", "model": "m"},
        {"type": "user", "text": task},
        {"type": "assistant", "content": [{"type": "text", "text": "Looking."}], "usage": {}},
    ]
    return "".join(json.dumps(entry) + "\n" for entry in entries)


# The driver, with a fake engine --------------------------------------------------------


class FakeWork:
    """Plans instantly; `failing` labels fail. Counts how often each job ran."""

    def __init__(
        self,
        failing: set[str] | None = None,
        *,
        resumable: bool = False,
        reason: str = "overloaded",
    ) -> None:
        self.failing = failing or set()
        self.resumable = resumable
        self.reason = reason
        self.runs: dict[str, int] = {}
        self.earlier: dict[str, EarlierAttempt | None] = {}
        self.lock = threading.Lock()

    def __call__(self, job: BatchJob) -> Callable[[], JobOutcome]:
        def run() -> JobOutcome:
            with self.lock:
                self.runs[job.key] = self.runs.get(job.key, 0) + 1
                self.earlier[job.key] = job.payload.earlier
            fails = job.label in self.failing
            # A task's synthesis writes a recommended plan, checked for its own sections.
            synthesis = job.label == SYNTHESIS_LABEL
            plan = RECOMMENDED_PLAN if synthesis else VALID_PLAN
            sections = required_sections(job.payload.job) if synthesis else []
            check = validate_plan(plan, sections=sections, workspace=job.payload.workspace)
            result = PlanResult(
                job.label,
                "Plan",
                job.payload.model_id,
                PlanStatus.FAILED if fails else PlanStatus.COMPLETE,
                self.reason if fails else "",
                None,
                plan,
                check,
                [],
                2,
                1,
                Usage(10, 5),
                0.1,
                resumable=fails and self.resumable,
                continued=job.payload.earlier is not None,
            )
            metadata: dict[str, Any] = {"status": result.status.value, "valid": result.valid}
            transcript = conversation(job.key)
            return JobOutcome(job.key, result, render_document(metadata, plan), transcript)

        return run


def run_batch(
    tmp_path: Path,
    work: FakeWork,
    *,
    perspectives: str = "[a, b]",
    git_for: Callable[[Path], GitStatusRunner | None] | None = None,
    **options: Any,
) -> BatchDriver:
    text = (
        f"defaults: {{repo: repo, perspectives: {perspectives}}}\n"
        "tasks:\n  - {id: t1, requirements: r}\n  - {id: t2, requirements: s}\n"
    )
    batch = load_batch_file(write(tmp_path / "batch.yaml", text))
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    jobs = batch_jobs(prepare_tasks(batch, batch.tasks, None, lambda _: None), out)
    jobs = decide_all(jobs, out, **options)
    driver = BatchDriver("b", out, jobs, ThreadExecutor(2), work, scratch=tmp_path / "scratch")
    if git_for is not None:
        driver.git_for = git_for
    driver.exit_code = driver.run().exit_code  # type: ignore[attr-defined]
    return driver


def test_finished_jobs_never_run_again_and_failed_ones_only_with_retry(
    tmp_path: Path, sample_repo: Path
) -> None:
    first = FakeWork(failing={"b"})
    assert run_batch(tmp_path, first).exit_code == 1  # type: ignore[attr-defined]
    assert first.runs == {"t1/a": 1, "t1/b": 1, "t2/a": 1, "t2/b": 1}
    again = FakeWork()
    run_batch(tmp_path, again)
    assert again.runs == {}
    retry = FakeWork()
    driver = run_batch(tmp_path, retry, retry_failed=True)
    # Two valid plans per task now: each task's synthesis runs too.
    assert retry.runs == {"t1/b": 1, "t2/b": 1, "t1/recommended": 1, "t2/recommended": 1}
    assert {row.status for row in driver.rows()} == {"complete"}
    old = tmp_path / "out/tasks/t1/.attempts/b/1/b.md"
    assert old.is_file() and (tmp_path / "out/tasks/t1/b.md").is_file()
    # The retry made the same plan again: noted on its one revision, not kept twice.
    kept = {
        label: [
            (rev.source, rev.again)
            for rev in load_revisions(tmp_path / f"out/tasks/t1/{label}.md").revisions
        ]
        for label in ("a", "b")
    }
    assert kept == {"a": [("plan", [])], "b": [("plan", ["retry"])]}
    status = read_status(tmp_path / "out")
    assert status is not None and status["counts"] == {"complete": 6}
    report = json.loads((tmp_path / "out/tasks/t1/report.json").read_text())
    assert [plan["status"] for plan in report["plans"]] == ["complete", "complete"]


def test_a_changed_task_is_refused_then_redone(tmp_path: Path, sample_repo: Path) -> None:
    run_batch(tmp_path, FakeWork())
    (sample_repo / "src" / "new.py").write_text("x = 1\n")
    with pytest.raises(ChangedTaskError, match="task t1, t2 changed"):
        run_batch(tmp_path, FakeWork())
    redo = FakeWork()
    with pytest.raises(ChangedTaskError, match="task t2 changed"):
        run_batch(tmp_path, redo, redo=["t1"])
    run_batch(tmp_path, redo, redo=["t1", "t2"])
    assert len(redo.runs) == 6  # every plan, and each task's synthesis of the new plans
    assert (tmp_path / "out/tasks/t1/.attempts/recommended/superseded-1/recommended.md").is_file()
    assert (tmp_path / "out/tasks/t1/.attempts/a/superseded-1/a.md").is_file()


def test_a_plan_committed_without_its_ledger_line_is_adopted(
    tmp_path: Path, sample_repo: Path
) -> None:
    run_batch(tmp_path, FakeWork())
    ledger = tmp_path / "out" / "results.jsonl"
    lines = ledger.read_text().splitlines()
    # The driver died after committing the last plan, in the middle of its ledger line.
    ledger.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:25])
    again = FakeWork()
    driver = run_batch(tmp_path, again)
    assert again.runs == {}
    assert {row.status for row in driver.rows()} == {"complete"}
    assert "adopted" in Ledger(tmp_path / "out").read()[-1].reason


def test_files_are_never_overwritten(tmp_path: Path, sample_repo: Path) -> None:
    run_batch(tmp_path, FakeWork())
    plan = tmp_path / "out/tasks/t1/a.md"
    before = plan.read_bytes()
    run_batch(tmp_path, FakeWork(), retry_failed=True)
    assert plan.read_bytes() == before


def test_a_local_job_commits_the_files_its_run_wrote(tmp_path: Path, sample_repo: Path) -> None:
    text = "defaults: {repo: repo, perspectives: [a]}\ntasks:\n  - {id: t1, requirements: r}\n"
    batch = load_batch_file(write(tmp_path / "batch.yaml", text))
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    out.mkdir()
    [job] = decide_all(
        batch_jobs(prepare_tasks(batch, batch.tasks, None, lambda _: None), out), out
    )
    executor = ThreadExecutor(1)

    def work_for(job: BatchJob) -> Callable[[], JobOutcome]:
        # What local_work_for makes, with a scripted model.
        return functools.partial(
            run_job,
            job.payload,
            sandbox_factory=lambda plan_dir: LocalSandbox(sample_repo, plan_dir),
            scratch_root=scratch,
            model=lambda _: ScriptedModel([reply(say(VALID_PLAN))]),
            cancel=executor.cancelled,
        )

    assert BatchDriver("b", out, [job], executor, work_for, scratch=scratch).run().exit_code == 0
    metadata, body = split_document((out / "tasks/t1/a.md").read_text())
    assert (metadata["batch_fingerprint"], metadata["batch_attempt"]) == (job.fingerprint, 1)
    assert body == VALID_PLAN.strip() + "\n"
    assert (out / "tasks/t1/a.transcript.jsonl").is_file() and not any(scratch.iterdir())
    report = json.loads((out / "tasks/t1/report.json").read_text())
    assert [(plan["plan_file"], plan["valid"]) for plan in report["plans"]] == [("a.md", True)]
    [record] = Ledger(out).read()
    assert record.result["plan_path"] is None and record.result["transcript"] is None


def test_a_retried_job_goes_on_with_a_resumable_attempt_only(
    tmp_path: Path, sample_repo: Path
) -> None:
    run_batch(tmp_path, FakeWork(failing={"b"}, resumable=True))
    retry = FakeWork(failing={"b"})  # fails again, this time for good (not resumable)
    run_batch(tmp_path, retry, retry_failed=True)
    earlier = retry.earlier["t1/b"]
    assert earlier is not None and earlier.reason == "overloaded"
    assert "| 2, went on |" in (tmp_path / "out/summary.md").read_text()
    status = read_status(tmp_path / "out")
    assert status is not None
    assert {job["key"]: job["continued"] for job in status["jobs"]}["t1/b"] is True
    assert earlier.transcript == conversation("t1/b") and earlier.plan is not None
    assert (tmp_path / "out/tasks/t1/.attempts/b/1/attempt.json").is_file()
    third = FakeWork()
    run_batch(tmp_path, third, retry_failed=True)
    assert third.runs == {"t1/b": 1, "t2/b": 1, "t1/recommended": 1, "t2/recommended": 1}
    # The newest attempt ended for good.
    assert (third.earlier["t1/b"], third.earlier["t2/b"]) == (None, None)


HOSTILE_ERROR = (
    "529 \x1b]0;t\x07 `x` a|b \\| c <img src=x> "
    "![b](http://beacon.example/b) [docs](http://evil.example)\n## two"
)


def viewed(markdown_text: str) -> str:
    """Markdown as a viewer with tables shows it (HTML)."""
    return str(MarkdownIt("commonmark").enable("table").render(markdown_text))


def assert_inert(page: str) -> None:
    for active in ("<img", '<a href="http', "<code>", "<script"):
        assert active not in page
    # Only summary.md's own headings: no text from outside starts one.
    assert set(re.findall(r"<h2>(.*?)</h2>", page)) <= {"Tasks", "Jobs"}


def test_an_error_text_in_summary_md_is_inert(tmp_path: Path, sample_repo: Path) -> None:
    run_batch(tmp_path, FakeWork(failing={"b"}, reason=HOSTILE_ERROR))
    text = (tmp_path / "out/summary.md").read_text(encoding="utf-8")
    assert "\x1b" not in text and "\x07" not in text
    page = viewed(text)
    assert_inert(page)
    rows = page[page.index("<h2>Jobs</h2>") :].split("<tr>")[2:]
    assert len(rows) == 4 and all(row.count("<td") == 7 for row in rows)
    # The reader still sees what the API said, as text.
    assert (
        "529 ?]0;t? `x` a|b \\| c &lt;img src=x&gt; ![b](http://beacon.example/b) "
        "[docs](http://evil.example) ## two</td>"
    ) in page


def test_names_and_keys_in_summary_md_are_inert() -> None:
    document = summary_document(
        "<script>alert(1)</script>\x1b[31m",
        Path("out"),
        [],
        exit_code=1,
        state="done",
        not_in_batch=["t9/![n](http://beacon.example/n)"],
        wall_seconds=0,
    )
    document["jobs"] = [
        {
            "key": "t1/x](http://evil.example) ![i](http://beacon.example/k)",
            "plan_file": "tasks/t1/x) ![i](http://beacon.example/p.md",
            "status": "failed",
            "attempts": 1,
            "continued": False,
            "tokens": 0,
            "cost_usd": None,
            "wall_seconds": 0.0,
            "reason": "",
        }
    ]
    text = render_summary(document)
    assert "\x1b" not in text
    page = viewed(text)
    assert_inert(page)
    assert page.count("<a ") == 1 and '<a href="tasks/t1/x%29%20%21%5Bi%5D' in page


def in_flight_scratch(
    tmp_path: Path, key: str, fingerprint: str, transcript: str | None = None
) -> Path:
    """What a driver killed mid-job leaves in its scratch: the job's identity, the
    transcript so far and the plan draft in the sandbox's directory."""
    label = key.split("/")[1]
    scratch = tmp_path / "scratch" / f"{key.replace('/', '.')}.1234abcd"
    (scratch / ".sandbox" / label).mkdir(parents=True)
    identity = {"key": key, "label": label, "fingerprint": fingerprint}
    (scratch / "job.json").write_text(json.dumps(identity))
    (scratch / f"{label}.transcript.jsonl").write_text(transcript or conversation(key))
    (scratch / ".sandbox" / label / f"{label}.md").write_text("# draft\n")
    return scratch


def test_a_job_in_flight_when_the_driver_died_goes_on_with_its_conversation(
    tmp_path: Path, sample_repo: Path
) -> None:
    first = FakeWork(failing={"a", "b"})
    run_batch(tmp_path, first)
    ledger = tmp_path / "out" / "results.jsonl"
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    fingerprints = {record["key"]: record["fingerprint"] for record in records}
    # Only t1/a's ledger line remains: the other jobs never finished, as if in flight.
    ledger.write_text(json.dumps(next(r for r in records if r["key"] == "t1/a")) + "\n")
    for label in ("a", "b"):
        for task in ("t1", "t2"):
            (tmp_path / f"out/tasks/{task}/{label}.md").unlink(missing_ok=True)
            (tmp_path / f"out/tasks/{task}/{label}.transcript.jsonl").unlink(missing_ok=True)
    in_flight_scratch(tmp_path, "t1/b", fingerprints["t1/b"])
    in_flight_scratch(tmp_path, "t2/a", "sha256:of-a-task-since-changed")
    elsewhere = in_flight_scratch(tmp_path, "t9/a", "sha256:left-out-by-only")
    # Stopped before the model's first answer: nothing to go on with.
    in_flight_scratch(tmp_path, "t2/b", fingerprints["t2/b"], '{"type": "system"}\n')
    again = FakeWork()
    run_batch(tmp_path, again)
    assert again.runs == {"t1/b": 1, "t2/a": 1, "t2/b": 1, "t2/recommended": 1}
    earlier = again.earlier["t1/b"]
    assert earlier is not None and earlier.plan == "# draft\n"
    assert earlier.transcript == conversation("t1/b")
    assert again.earlier["t2/a"] is None and again.earlier["t2/b"] is None
    kept = tmp_path / "out/tasks/t2/.attempts/a/interrupted"
    assert (kept / "a.transcript.jsonl").is_file() and (kept / "a.md").is_file()
    # Only the scratch of a job not in this run stays, for a later run.
    assert list((tmp_path / "scratch").iterdir()) == [elsewhere]


def test_each_task_report_says_how_its_repository_was_compared(
    tmp_path: Path, sample_repo: Path
) -> None:
    run_batch(tmp_path, FakeWork())
    report = json.loads((tmp_path / "out/tasks/t1/report.json").read_text())
    assert report["workspace_check"] == "full"  # outside git, the files are all there is
    (sample_repo / ".git").mkdir()
    run_batch(tmp_path, FakeWork(), redo=["t1", "t2"])
    report = json.loads((tmp_path / "out/tasks/t1/report.json").read_text())
    assert report["workspace_check"] == "files_only"  # no git runner: files only
    statuses = iter([" M src/app.py\0", " M src/app.py\0 M src/util.py\0"])

    def git_for(workspace: Path) -> GitStatusRunner:
        assert workspace == sample_repo
        return lambda command: next(statuses)

    driver = run_batch(tmp_path, FakeWork(), git_for=git_for, redo=["t1", "t2"])
    assert driver.exit_code == 3  # type: ignore[attr-defined]
    report = json.loads((tmp_path / "out/tasks/t2/report.json").read_text())
    assert report["workspace_check"] == "full"
    assert report["workspace_problem"].startswith("`git status` changed outside the sandbox")
    assert report["workspace_changed_paths"] == ["src/util.py (git status M)"]


def test_progress_in_a_pipe_is_one_line_per_change_with_the_counts() -> None:
    stream = io.StringIO()
    with BatchProgress(3, 2, live=False, stream=stream) as progress:
        progress.job_started("t1/a", "goes on with its earlier conversation")
        progress.job_started("t1/b")
        progress.job_finished("t1/a", "complete", 0.25)
        progress.job_finished("t1/b", "failed", None)
        progress.stopping()
    assert stream.getvalue().splitlines() == [
        "planrun: [t1/a] started (goes on with its earlier conversation)",
        "planrun: [t1/b] started",
        "planrun: [t1/a] complete (done 1 · failed 0 · running 1 · queued 1 · skipped (earlier) 2)",
        "planrun: [t1/b] failed (done 1 · failed 1 · running 0 · queued 1 · skipped (earlier) 2)",
        "planrun: stopping… (finished plans are kept; run the same command to resume)",
    ]
    assert progress.cost == 0.25


def test_jobs_the_budget_stopped_count_as_budget_not_as_failed() -> None:
    stream = io.StringIO()
    with BatchProgress(3, 0, live=False, stream=stream) as progress:
        for key, status in (("t1/a", "complete"), ("t1/b", "budget"), ("t2/a", "budget")):
            progress.job_started(key)
            progress.job_finished(key, status, 0.5)
    assert stream.getvalue().splitlines()[-1] == (
        "planrun: [t2/a] budget (done 1 · failed 0 · budget 2 · running 0 · queued 0 · "
        "skipped (earlier) 0)"
    )


def test_the_start_and_the_bar_say_how_many_syntheses_may_join_the_plan_jobs(
    tmp_path: Path,
) -> None:
    start = BatchStart("b", tmp_path / "b", to_run=4, skipped=1, syntheses=2)
    assert start_line(start) == (
        f"planrun: batch b: 4 plan job(s) to run, and up to 2 syntheses, 1 done or skipped "
        f"earlier, into {tmp_path / 'b'}"
    )
    progress = BatchProgress(4, 1, live=True, stream=io.StringIO(), syntheses=2)

    def screen() -> str:
        drawn = io.StringIO()
        Console(file=drawn, width=120).print(progress.view())
        return drawn.getvalue()

    assert "0/4 (+ up to 2 syntheses)" in screen()
    progress.job_queued("t1/recommended")
    assert "0/5 (+ up to 1 synthesis)" in screen()
    progress.job_queued("t2/recommended")
    assert "0/6" in screen() and "up to" not in screen()
    stream = io.StringIO()
    with BatchProgress(1, 0, live=False, stream=stream, syntheses=1) as plain:
        plain.job_started("t1/a")
        plain.job_finished("t1/a", "complete", None)
    assert stream.getvalue().splitlines()[-1].endswith("skipped (earlier) 0 (+ up to 1 synthesis))")


def test_the_live_progress_shows_the_running_jobs_and_what_they_do() -> None:
    stream = io.StringIO()
    progress = BatchProgress(2, 0, live=True, stream=stream)
    progress.job_started("t1/a")
    progress.agent_event("t1/a", AgentEvent("tool_call", "a", 3, "Read", "src/app.py", 1, 900, 1))
    progress.job_started("t2/a", "goes on with its earlier conversation")
    console = Console(file=io.StringIO(), width=120)
    console.print(progress.view())
    screen = console.file.getvalue()  # type: ignore[attr-defined]
    assert "t1/a" in screen and "Read src/app.py" in screen and "900" in screen
    assert "goes on with its earlier conversation" in screen  # t2/a's note until its first tool
    assert "done 0 · failed 0 · running 2 · queued 0" in screen


def test_a_dry_run_says_which_jobs_would_go_on(tmp_path: Path, sample_repo: Path) -> None:
    run_batch(tmp_path, FakeWork(failing={"b"}, resumable=True))
    arguments = ["batch", str(tmp_path / "batch.yaml"), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(cli, [*arguments, "--dry-run", "--retry-failed"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split("  (~")[0] for line in lines] == [
        "skip (complete)    t1/a",
        "retry (goes on)    t1/b",
        "run                t1/recommended",
        "skip (complete)    t2/a",
        "retry (goes on)    t2/b",
        "run                t2/recommended",
    ]
    # Only the jobs that would run are estimated.
    estimated = ["prompt tokens, up to 40 turns)" in line for line in lines]
    assert estimated == [0, 1, 1, 0, 1, 1]
    assert lines[2].endswith(", if two or more of its plans are valid")


def test_the_time_left_is_the_average_job_time_times_the_jobs_left() -> None:
    now = [100.0]
    progress = RichProgress(get_time=lambda: now[0])
    task = progress.add_task("plans", total=6)
    assert JobsRemaining().render(progress.tasks[task]).plain == "-:--:--"
    now[0] = 130.0
    progress.update(task, advance=2)  # two jobs finished together after 30 s
    assert JobsRemaining().render(progress.tasks[task]).plain == "0:01:00"


def test_image_reaches_every_task_and_its_fingerprint(tmp_path: Path, sample_repo: Path) -> None:
    text = "defaults: {repo: repo}\ntasks:\n  - {id: t1, requirements: r}\n"
    batch = load_batch_file(write(tmp_path / "batch.yaml", text))
    plain = prepare_tasks(batch, batch.tasks, None, lambda _: None)
    chosen = prepare_tasks(batch, batch.tasks, None, lambda _: None, image="node-tools:18")
    assert plain[0].settings.settings.image is None
    assert chosen[0].settings.settings.image == "node-tools:18"
    assert chosen[0].settings.sources["image"] == "flag --image"
    [before] = batch_jobs(plain, None)
    [after] = batch_jobs(chosen, None)
    assert before.fingerprint != after.fingerprint  # another toolchain, another plan
    options = [p.name for p in batch_run_params() if p.name == "image"]
    assert options == ["image"]


def batch_run_params() -> list[Any]:
    from sandbox_runner.cli.batch_cmd import batch_run

    return list(batch_run.params)


def test_a_batch_recorded_by_an_earlier_planrun_resumes_without_running_again(
    tmp_path: Path, sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An earlier planrun keyed its jobs by the repository's digest made another way: an
    unchanged repository must still be recognised, and a changed one refused."""
    from sandbox_runner.sandbox.host_walk import FileTree, legacy_fingerprint, shared
    from sandbox_runner.sandbox.host_walk.find import Walk, walk

    def earlier_walk(root: str, **options: Any) -> Walk:
        return Walk(FileTree(legacy_fingerprint(root), 1, 0.0))

    with monkeypatch.context() as patched:
        patched.setattr(shared, "walk", earlier_walk)
        run_batch(tmp_path, FakeWork())
    assert walk(sample_repo).tree.digest.startswith("v2:")
    again = FakeWork()
    run_batch(tmp_path, again)
    assert again.runs == {}
    (sample_repo / "src" / "new.py").write_text("x = 1\n")
    with pytest.raises(ChangedTaskError, match="task t1, t2 changed"):
        run_batch(tmp_path, FakeWork())
