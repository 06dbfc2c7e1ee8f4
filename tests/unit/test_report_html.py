"""report.html: one self-contained page, the plans side by side, inert whatever a model wrote."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.plans.report import RunRecord, build_report, render_html
from sandbox_runner.plans.results import PlanStatus
from sandbox_runner.safe_text import markdown_html
from sandbox_runner.types import Usage
from tests.support import browser
from tests.unit.test_report import REPO_FILES, make_record, make_result, plan_text

HOSTILE_APPROACH = (
    "<script>alert(1)</script> <img src=http://evil.example/beacon.png> "
    "![pixel](http://evil.example/p.png) [click](javascript:alert(2)) "
    '[data](data:text/html,<b>x</b>) <a href="javascript:alert(3)">a</a> '
    "[fine](https://example.com/doc) \x1b]0;owned\x07"
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for relative in REPO_FILES:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("x\n")
    return root


@pytest.fixture
def record(workspace: Path, tmp_path: Path) -> RunRecord:
    """simplicity (valid), security (valid, hostile text), performance (failed)."""
    out_dir = tmp_path / "plans" / "gentle-breeze"
    out_dir.mkdir(parents=True)
    simplicity = make_result(
        "simplicity",
        workspace,
        out_dir,
        text=plan_text(["src/app/main.py", "src/app/cache.py", "tests/test_cache.py"]),
        usage=Usage(12_000, 3_000, 0, 40_000),
    )
    security = make_result(
        "security",
        workspace,
        out_dir,
        text=plan_text(
            ["src/app/cache.py", "src/app/main.py", "src/app/config.py"],
            title="Plan: a <b>safe</b> cache",
            approach=HOSTILE_APPROACH,
        ),
    )
    performance = make_result(
        "performance",
        workspace,
        out_dir,
        status=PlanStatus.FAILED,
        reason="model error: overloaded",
    )
    results = [simplicity, security, performance]
    return make_record(out_dir, results, ["simplicity", "security", "performance"], exit_code=1)


def page(record: RunRecord, **extra: Any) -> str:
    built = build_report(record)
    return render_html({**built.document, **extra}, built.bodies)


def test_the_page_fetches_nothing_and_runs_nothing(record: RunRecord) -> None:
    html = page(record)
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert "<script" not in html and "<img" not in html and "<link" not in html
    assert not re.search(r"<[^>]*\ssrc\s*=", html)
    assert not re.search(r"<[^>]*(?:javascript|data):", html)
    # Every other link is a relative path: quote() leaves no ":" for a scheme.
    assert not re.search(r"""href="(?!https?://|#|[\w./%-]+")""", html)
    assert "\x1b" not in html and "\x07" not in html


def test_model_html_is_shown_as_text(record: RunRecord) -> None:
    html = page(record)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=http://evil.example/beacon.png&gt;" in html
    assert "Plan: a &lt;b&gt;safe&lt;/b&gt; cache" in html
    assert '<a href="https://example.com/doc" rel="nofollow noopener noreferrer">fine</a>' in html
    assert '<a href="http://evil.example/p.png"' in html  # an image is at most a link


def test_plans_side_by_side_with_titles_status_and_usage(record: RunRecord) -> None:
    html = page(record)
    columns = re.findall(r'<article class="plan" id="plan-\d">.*?</article>', html, re.S)
    assert len(columns) == 3
    assert "Plan: add a cache" in columns[0] and "<h3>Approach</h3>" in columns[0]
    assert "No plan was written (failed)" in columns[2]
    assert "model error: overloaded" in columns[2]
    assert 'href="simplicity.md"' in columns[0]
    assert "55,000 tokens" in columns[0]


def test_the_matrix_highlights_the_files_every_plan_shares(record: RunRecord) -> None:
    html = page(record)
    matrix = html[html.index('<table class="matrix">') :]
    matrix = matrix[: matrix.index("</table>")]
    shared = re.findall(
        r'<tr class="shared"><td><a class="file" [^>]*><code>([^<]+)</code>', matrix
    )
    assert sorted(shared) == ["src/app/cache.py", "src/app/main.py"]
    assert "<code>tests/test_cache.py</code></a></td><td" in matrix
    assert "2 of 2" in matrix and "1 of 2" in matrix
    assert "2 of 4 critical files named by every plan" in html


def test_failures_and_disagreements_are_listed(record: RunRecord) -> None:
    html = page(record)
    failures = re.findall(r'<tr class="failure">(.*?)</tr>', html, re.S)
    assert len(failures) == 1 and "performance" in failures[0] and "overloaded" in failures[0]
    disagreements = html[html.index('id="disagreements"') :]
    assert "Wrap the loader in a small LRU cache." in disagreements
    assert "<code>src/app/config.py</code>" in disagreements


def test_tokens_cost_and_time_per_plan_and_in_total(record: RunRecord) -> None:
    usage = page(record).split('id="usage"', 1)[1]
    rows = re.findall(r"<tr(?: class=\"total\")?><td>([^<]+)</td>", usage)
    assert rows == ["simplicity", "security", "performance", "Total"]
    assert "1 min 02 s" in usage or "61.5 s" in usage


def test_a_recommended_plan_comes_first_only_when_there_is_one(record: RunRecord) -> None:
    assert 'id="recommended"' not in page(record)
    recommended = {
        **build_report(record).document["plans"][0],
        "label": "simplicity",
        "perspective": None,
        "title": "Recommended: a small cache",
    }
    html = page(record, recommended=recommended)
    assert html.index('id="recommended"') < html.index('id="plans"')
    assert "Recommended: a small cache" in html
    assert html.count("<tr><td>Recommended</td>") == 1


def test_the_page_reads_on_a_narrow_screen_and_prints(record: RunRecord) -> None:
    html = page(record)
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    assert "@media print" in html and "@media (max-width: 640px)" in html
    assert "minmax(min(100%, 380px), 1fr)" in html  # the plan columns wrap, then stack


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("## Steps\n1. one\n2. *two*", "<h3>Steps</h3>\n<ol>\n<li>one</li>\n<li><em>two</em>"),
        ("```py\n<b>x</b>\n```", '<pre><code class="language-py">&lt;b&gt;x&lt;/b&gt;'),
        ("`a<b`", "<code>a&lt;b</code>"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "<td>1</td>"),
        ("[x](file:///etc/passwd) [y](//evil.example/)", "[x](file:///etc/passwd) [y](//evil"),
        ("<http://ok.example/>", '<a href="http://ok.example/" rel="nofollow'),
    ],
)
def test_markdown_html(markdown: str, expected: str) -> None:
    assert expected in markdown_html(markdown, heading_offset=1)


def test_without_chromium_and_without_root_the_browser_tests_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(browser, "find_chromium", lambda: None)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(browser.BrowserMissing, match="apt-get install chromium"):
        browser.ensure_chromium()


def test_the_headline_badge_names_the_run_status_with_or_without_a_budget(
    record: RunRecord,
) -> None:
    budget = {"max_cost_usd": 25.0, "max_cost_usd_per_plan": None, "reached": False}
    for extra in ({}, {"budget": budget}, {"status": "ok", "budget": budget}):
        html = page(record, **extra)
        badge = re.search(r'<h1>[^<]*<span class="badge (\w+)">([^<]*)</span></h1>', html)
        assert badge is not None, html[:2000]
        expected = ("ok", "ok: every plan is valid") if extra.get("status") else None
        assert badge.groups() == (expected or ("bad", "plan_failed")), extra
