"""report.html read section by section: each section of every plan side by side, critical
files as links into the repository, transcripts and validation rounds."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from sandbox_runner.plans.report import RunRecord, build_report, render_html
from sandbox_runner.plans.report_compare import COMPARED_SECTIONS
from sandbox_runner.plans.results import PlanResult
from tests.unit.test_report import REPO_FILES, make_record, make_result, plan_text


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for relative in REPO_FILES:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("x\n")
    return root


def two_plans(workspace: Path, out_dir: Path, **second: Any) -> list[PlanResult]:
    first = make_result(
        "simplicity",
        workspace,
        out_dir,
        text=plan_text(
            ["src/app/main.py:12", "src/app/cache.py:3-9", "tests/test_cache.py"],
            approach="Wrap `load()` in an **LRU** cache.",
        ),
    )
    other = make_result(
        "security",
        workspace,
        out_dir,
        text=plan_text(
            ["src/app/cache.py", "src/app/config.py", "tests/test_cache.py"],
            approach=second.pop("approach", "Sign the cache entries with `hmac`."),
        ),
    )
    return [first, replace(other, **second)]


def render(workspace: Path, out_dir: Path, results: list[PlanResult], **extra: Any) -> str:
    record: RunRecord = make_record(
        out_dir, results, ["simplicity", "security"], repository=str(workspace)
    )
    built = build_report(record)
    return render_html({**built.document, **extra}, built.bodies)


def part(html: str, anchor: str) -> str:
    start = html.index(f'id="{anchor}"')
    return html[start : html.index("</section>", start)]


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    path = tmp_path / "plans" / "gentle-breeze"
    path.mkdir(parents=True)
    return path


def test_each_section_shows_every_plan_side_by_side(workspace: Path, out_dir: Path) -> None:
    html = render(workspace, out_dir, two_plans(workspace, out_dir))
    compare = part(html, "compare")
    rows = re.findall(r'<div class="compare" id="compare-([\w-]+)">', compare)
    assert rows == [*("-".join(t.lower().split()) for t in COMPARED_SECTIONS), "critical-files"]
    approach = compare[compare.index('id="compare-approach"') :]
    approach = approach[: approach.index('<div class="compare" ')]
    heads = re.findall(r'<div class="cell-head">(\w+) ', approach)
    assert heads == ["simplicity", "security"]
    # Markdown is rendered, not shown as raw backticks or asterisks.
    assert "<code>load()</code>" in approach and "<strong>LRU</strong>" in approach
    assert "`" not in re.sub(r"<[^>]+>", "", compare)


def test_critical_files_link_into_the_repository_with_their_lines(
    workspace: Path, out_dir: Path
) -> None:
    html = render(workspace, out_dir, two_plans(workspace, out_dir))
    links = re.findall(r'<a class="file" href="([^"]+)"><code>([^<]+)</code></a>', html)
    shown = {text for _, text in links}
    assert {"src/app/main.py:12", "src/app/cache.py:3-9", "tests/test_cache.py"} <= shown
    for href, text in links:
        target = (out_dir / unquote(href)).resolve()
        assert target == (workspace / text.split(":")[0]).resolve()
        assert target.is_file()


def test_files_are_plain_code_without_a_local_repository(workspace: Path, out_dir: Path) -> None:
    results = two_plans(workspace, out_dir)
    record = make_record(
        out_dir, results, ["simplicity", "security"], repository="https://example.com/r.git"
    )
    built = build_report(record)
    html = render_html(built.document, built.bodies)
    assert '<a class="file"' not in html
    assert '<span class="file"><code>src/app/main.py:12</code></span>' in html


def test_a_path_that_leaves_the_repository_is_never_a_link(workspace: Path, out_dir: Path) -> None:
    built = build_report(
        make_record(
            out_dir,
            two_plans(workspace, out_dir),
            ["simplicity", "security"],
            repository=str(workspace),
        )
    )
    document = built.document
    document["plans"][0]["critical_files"].append(
        {"path": "../../etc/passwd", "reason": "x", "exists": True, "line": None}
    )
    html = render_html(document, built.bodies)
    assert "etc/passwd</code></span>" in html
    assert not re.search(r'href="[^"]*passwd', html)


def test_transcripts_are_linked_from_each_plan(workspace: Path, out_dir: Path) -> None:
    html = render(workspace, out_dir, two_plans(workspace, out_dir))
    for label in ("simplicity", "security"):
        assert f'<a href="{label}.transcript.jsonl">transcript</a>' in html


def test_a_plan_fixed_after_feedback_says_so(workspace: Path, out_dir: Path) -> None:
    results = two_plans(workspace, out_dir, validation_feedback=["missing section: `Risks`"])
    built = build_report(
        make_record(out_dir, results, ["simplicity", "security"], repository=str(workspace))
    )
    validations = [plan["validation"] for plan in built.document["plans"]]
    assert validations == [
        {"rounds": 1, "feedback": [], "fixed_after_feedback": False},
        {"rounds": 2, "feedback": ["missing section: `Risks`"], "fixed_after_feedback": True},
    ]
    html = render_html(built.document, built.bodies)
    table = part(html, "validation")
    rows = re.findall(r'<tr class="validation( fixed)?">(.*?)</tr>', table, re.S)
    assert [fixed for fixed, _ in rows] == ["", " fixed"]
    assert "passed the first check" in rows[0][1]
    assert "fixed after validation feedback (1 problem in round 1, valid in round 2)" in rows[1][1]
    assert "<code>Risks</code>" in rows[1][1]
    assert "Validation: fixed after validation feedback" in part(html, "plan-2")


def test_critical_files_nested_under_the_last_section_are_shown_once(
    workspace: Path, out_dir: Path
) -> None:
    # A plan's usual shape: `### Critical Files for Implementation` under its last `##`.
    nested = plan_text(["src/app/main.py"]).replace(
        "## Critical Files for Implementation", "### Critical Files for Implementation"
    )
    nested = nested.replace(
        "Text about Next Actions.", "Run the tests.\n\n```\n# Critical files\n```"
    )
    labels = ("simplicity", "security")
    results = [make_result(label, workspace, out_dir, text=nested) for label in labels]
    compare = part(render(workspace, out_dir, results), "compare")
    actions = compare[compare.index('id="compare-next-actions"') :]
    actions = actions[: actions.index('id="compare-critical-files"')]
    assert actions.count("Run the tests.") == 2 and actions.count("# Critical files") == 2
    assert "Critical Files for Implementation" not in actions and "needed for" not in actions
    files = compare[compare.index('id="compare-critical-files"') :]
    assert files.count("src/app/main.py</code></a>") == 2
