"""report.md says what report.html says of each plan's validation rounds and revisions: a
plan fixed after feedback says so, and a plan changed after it was first written gives its
count of revisions and the commands that show them."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox_runner.plans.history import runs_dir
from sandbox_runner.plans.report import RunRecord, build_report
from sandbox_runner.plans.revisions import record_revision
from tests.unit.test_report_html import record, workspace

__all__ = ["record", "workspace"]  # the fixtures, used by name

FEEDBACK = "missing section: `Risks`\nadd one with the risks you found"


def section(markdown: str, heading: str) -> str:
    start = markdown.index(f"## {heading}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end != -1 else len(markdown)]


def with_feedback(record: RunRecord, *feedback: str) -> RunRecord:
    """The record with its second plan (security, valid) sent FEEDBACK before it passed."""
    results = list(record.results)
    results[1] = replace(results[1], validation_feedback=list(feedback))
    return replace(record, results=results)


def test_a_plan_fixed_after_feedback_says_so_with_the_feedbacks_first_line(
    record: RunRecord,
) -> None:
    report = build_report(with_feedback(record, FEEDBACK, "name a test file"))
    rows = section(report.to_markdown(), "Validation rounds").splitlines()[4:]
    simplicity, security, performance = rows
    assert simplicity.startswith("| simplicity | 1 | passed the first check | — |")
    assert security.startswith(
        "| security | 2 | fixed after validation feedback (2 problems in round 1, valid in "
        "round 2) | missing section: `Risks` (and 1 more in report.json) |"
    )
    assert "add one with" not in security  # the first line only
    assert performance.startswith("| performance | 0 | not validated (no plan was checked) |")
    # The same words as report.html's Validation rounds.
    assert "fixed after validation feedback (2 problems in round 1" in report.to_html()


def test_model_written_feedback_is_inert_in_the_table(record: RunRecord) -> None:
    hostile = "see <script>alert(1)</script> | ![x](https://evil.example/x.png)"
    markdown = build_report(with_feedback(record, hostile)).to_markdown()
    row = section(markdown, "Validation rounds").splitlines()[5]
    assert "<script>" not in row and "![x]" not in row
    assert row.count(" | ") == 3 and "\\|" in row  # its pipe is escaped: no new column


@pytest.mark.parametrize("under_runs_dir", [True, False])
def test_a_plan_changed_after_it_was_written_gives_its_revisions_and_commands(
    record: RunRecord, tmp_path: Path, under_runs_dir: bool
) -> None:
    if under_runs_dir:
        runs_dir().mkdir(parents=True, exist_ok=True)
        moved = runs_dir() / record.out_dir.name
        record.out_dir.rename(moved)
        record = replace(record, out_dir=moved)
    simplicity = record.out_dir / "simplicity.md"
    record_revision(simplicity, "# Plan\n\n## Steps\n1. Cache it.\n", "plan")
    record_revision(simplicity, "# Plan\n\n## Steps\n1. Cache it.\n2. Test it.\n", "resume")
    record_revision(record.out_dir / "security.md", "# One revision only\n", "plan")
    report = build_report(record)
    revisions = section(report.to_markdown(), "Revisions")
    name = "gentle-breeze" if under_runs_dir else shlex.quote(str(record.out_dir))
    [line] = [line for line in revisions.splitlines() if line.startswith("- ")]
    assert line == (
        "- **simplicity:** 2 revisions; revision 1 to 2: +1 −0 lines · "
        f"`planrun plans history {name} -p simplicity` · "
        f"`planrun plans diff {name} 1 2 -p simplicity`"
    )
    # report.html names the same commands beside the diff it shows.
    assert f"planrun plans history {name} -p simplicity" in report.to_html()


def test_no_revisions_section_when_no_plan_changed(record: RunRecord) -> None:
    record_revision(record.out_dir / "simplicity.md", "# Plan\n", "plan")
    assert "## Revisions" not in build_report(record).to_markdown()


def test_the_revisions_are_read_once_for_both_pages(
    record: RunRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox_runner.plans import report_view
    from sandbox_runner.plans.report_revisions import plan_revisions as real

    calls = []

    def counting(out_dir: Path, labels: list[str]) -> object:
        calls.append(out_dir)
        return real(out_dir, labels)

    monkeypatch.setattr(report_view, "plan_revisions", counting)
    report = build_report(record)
    report.to_markdown(), report.to_html()
    assert len(calls) == 1
