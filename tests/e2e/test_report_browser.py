"""report.html of real runs, rendered by headless Chromium: what a reader sees, and that a
hostile plan runs and loads nothing. Chromium is installed when missing (root on Debian);
otherwise these tests fail saying what to install, they never skip."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from sandbox_runner.cli import cli
from tests.support.browser import BrowserMissing, dump_dom, ensure_chromium, screenshot
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
    shared = re.findall(r'<tr class="shared"><td><code>([^<]+)</code>', dom)
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
