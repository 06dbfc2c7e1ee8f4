"""report.html of real runs, rendered by headless Chromium: what a reader sees, and that a
hostile plan runs and loads nothing. Chromium is installed when missing (root on Debian);
otherwise these tests fail saying what to install, they never skip."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from sandbox_runner.cli import cli
from tests.support.browser import (
    BrowserMissing,
    dump_dom,
    ensure_chromium,
    layout_boxes,
    screenshot,
)
from tests.support.fake_messages_api import FakeMessagesAPI, error
from tests.support.plan_scripts import PerspectiveScript, writes_plan
from tests.unit.test_plan_loop import VALID_PLAN
from tests.unit.test_synthesis import RECOMMENDED_PLAN

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_APPROACH = (
    "<script>document.title='owned'</script> <img src=http://evil.example/b.png> "
    "![beacon](http://evil.example/p.png) [run](javascript:alert(1)) "
    '<a href="javascript:alert(2)">x</a> [docs](https://example.com/)\n'
)
HOSTILE = VALID_PLAN.replace("## Approach\n", "## Approach\n" + HOSTILE_APPROACH, 1)
HOSTILE_RECOMMENDED = RECOMMENDED_PLAN.replace(
    "## Approach\n", "## Approach\n" + HOSTILE_APPROACH, 1
)


@pytest.fixture(scope="module", autouse=True)
def chromium() -> str:
    try:
        return ensure_chromium()
    except BrowserMissing as missing:
        pytest.fail(str(missing), pytrace=False)


@pytest.fixture(autouse=True)
def needs_docker(sandbox_image: str) -> None:
    """The runs use real sandboxes."""


def png_size(png: Path) -> tuple[int, int]:
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_demo_report_in_a_browser(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = CliRunner().invoke(
        cli,
        [
            "plan",
            "-f",
            str(ROOT / "examples/demo-requirements.md"),
            "--repo",
            str(ROOT / "examples/demo-repo"),
            "--perspective",
            "simplicity",
            "--perspective",
            "performance",
            "--replay",
            str(ROOT / "examples/cassettes/due-dates"),
            "--out",
            str(out),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    page = out / "report.html"
    assert f"HTML report: {page}" in result.output
    dom = dump_dom(page)
    assert "<h1>Plan report: demo" in dom
    titles = re.findall(r'<div class="title">([^<]+)</div>', dom)
    assert titles == [
        "Due dates, an overdue filter and atomic saves for todo",
        "Due dates and an overdue filter for todo",
        "Due dates with a fast overdue query",
    ]
    shared = re.findall(r'<tr class="shared"><td><a class="file" [^>]*><code>([^<]+)</code>', dom)
    assert "todo/models.py" in shared and "todo/store.py" in shared
    assert "None: every plan is complete and valid" in dom
    assert dom.index('id="recommended"') < dom.index('id="plans"')
    assert "Merged from simplicity, performance" in dom
    png = screenshot(page, tmp_path / "report.png")
    assert png_size(png) == (1400, 1800)
    assert png.stat().st_size > 50_000, "the screenshot looks blank"


def test_a_hostile_plan_and_a_failure_in_a_browser(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    api.script = PerspectiveScript(
        {
            "simplicity": writes_plan("simplicity", VALID_PLAN),
            "security": writes_plan("security", HOSTILE),
            "performance": [error(400, "invalid_request_error", "prompt is too long")],
            "recommended": writes_plan("recommended", HOSTILE_RECOMMENDED),
        }
    )
    out = tmp_path / "out"
    arguments = ["plan", "Add a flag", "--repo", str(sample_repo), "--out", str(out)]
    for perspective in ("simplicity", "security", "performance"):
        arguments += ["--perspective", perspective]
    result = CliRunner().invoke(cli, arguments, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    dom = dump_dom(out / "report.html")
    assert "<title>Plan report: out</title>" in dom  # no script renamed the page
    assert "<script" not in dom.lower()
    assert not re.search(r"<img\b", dom, re.IGNORECASE)
    assert not re.search(r"""<a\b[^>]*href=["']?\s*javascript:""", dom, re.IGNORECASE)
    assert '!<a href="http://evil.example/p.png"' in dom  # a link, not an image
    assert "&lt;script&gt;document.title='owned'&lt;/script&gt;" in dom
    assert '<a href="https://example.com/" rel="nofollow noopener noreferrer">docs</a>' in dom
    failures = re.findall(r'<tr class="failure">(.*?)</tr>', dom, re.DOTALL)
    assert len(failures) == 1
    assert "performance" in failures[0] and "context window" in failures[0]
    assert '<section class="recommended" id="recommended">' in dom
    recommended = dom[dom.index('id="recommended"') : dom.index('id="plans"')]
    assert "&lt;script&gt;document.title='owned'&lt;/script&gt;" in recommended
    assert re.findall(r'<article class="plan" id="plan-\d">', dom) == [
        f'<article class="plan" id="plan-{n}">' for n in (1, 2, 3)
    ]


def test_sections_side_by_side_links_and_validation_rounds_in_a_browser(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    """Two plans, one fixed after validation feedback: each section sits side by side on a
    wide screen and stacks on a narrow one; file and transcript links lead to real files."""
    broken = VALID_PLAN.replace("- tests/test_app.py - the tests of the flag\n", "")
    fixed = VALID_PLAN.replace("- src/app.py - the entry", "- src/app.py:1 - the entry")
    api.script = PerspectiveScript(
        {
            "simplicity": writes_plan("simplicity", VALID_PLAN),
            "security": [
                *writes_plan("security", broken)[1:],
                *writes_plan("security", fixed)[1:],
            ],
            "recommended": writes_plan("recommended", RECOMMENDED_PLAN),
        }
    )
    out = tmp_path / "out"
    arguments = ["plan", "Add a flag", "--repo", str(sample_repo), "--out", str(out)]
    arguments += ["--perspective", "simplicity", "--perspective", "security"]
    result = CliRunner().invoke(cli, arguments, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    page = out / "report.html"
    dom = dump_dom(page)
    rows = re.findall(r'<div class="compare" id="compare-([\w-]+)">', dom)
    assert {"approach", "detailed-steps", "risks", "critical-files"} <= set(rows)
    compare = dom[dom.index('id="compare"') : dom.index('id="plans"')]
    assert "`" not in re.sub(r"<[^>]+>", "", compare), "raw backticks in the comparison"
    assert "<code>app --verbose</code>" in compare
    # Validation rounds: the security plan says it was fixed after feedback.
    validation = dom[dom.index('id="validation"') :]
    rows_html = re.findall(r'<tr class="validation( fixed)?">(.*?)</tr>', validation, re.S)
    assert [fixed_row for fixed_row, _ in rows_html] == ["", " fixed"]
    assert "fixed after validation feedback" in rows_html[1][1]
    # Every file and transcript link resolves from the report's directory.
    links = re.findall(r'<a class="file" href="([^"]+)"><code>([^<]+)</code>', dom)
    assert ("src/app.py:1" in {text for _, text in links}) and len(links) >= 3
    transcripts = re.findall(r'<a href="([^"]+)">transcript</a>', dom)
    assert len(transcripts) == 3  # two perspectives and the recommended plan
    for href in [href for href, _ in links] + transcripts:
        assert (out / unquote(href)).resolve().is_file(), href
    # Wide: the two Approach cells share a row. Narrow: they stack, one above the other.
    selector = "#compare-approach .cell"
    wide = layout_boxes(page, selector, 1400)
    assert len(wide) == 2 and wide[0][1] == wide[1][1] and wide[0][0] < wide[1][0]
    narrow = layout_boxes(page, selector, 480)
    assert narrow[0][0] == narrow[1][0] and narrow[0][1] < narrow[1][1]
    assert narrow[0][2] <= 480
