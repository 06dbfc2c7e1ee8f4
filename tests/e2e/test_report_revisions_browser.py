"""report.html's Revisions section as headless Chromium loads it: collapsed, the diff
inert text, a model's markup in a revision never rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_runner.plans.report import build_report
from sandbox_runner.plans.revisions import record_revision
from tests.support.browser import BrowserMissing, dump_dom, ensure_chromium
from tests.unit.test_report import REPO_FILES, make_record, make_result, plan_text


@pytest.fixture(scope="module", autouse=True)
def chromium() -> str:
    try:
        return ensure_chromium()
    except BrowserMissing as missing:
        pytest.fail(str(missing), pytrace=False)


def test_the_revisions_diff_is_collapsed_and_inert(tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    for relative in REPO_FILES:
        (workspace / relative).parent.mkdir(parents=True, exist_ok=True)
        (workspace / relative).write_text("x\n")
    out_dir = tmp_path / "run"
    out_dir.mkdir()
    text = plan_text(REPO_FILES[:3])
    only = make_result("simplicity", workspace, out_dir, text=text)
    record_revision(out_dir / "simplicity.md", "# Plan\n\nfirst draft\n", "plan")
    record_revision(
        out_dir / "simplicity.md", text + "<script>document.title='x'</script>\n", "resume"
    )
    page = out_dir / "report.html"
    page.write_text(build_report(make_record(out_dir, [only], ["simplicity"])).to_html())
    dom = dump_dom(page)
    assert "<title>Plan report: gentle-breeze</title>" in dom  # no script ran
    assert '<section id="revisions" class="revisions">' in dom
    details = dom[dom.index('id="revisions"') :]
    assert "<details><summary>simplicity: 2 revisions" in details  # no `open`: collapsed
    assert '<span class="del">-first draft</span>' in details
    assert "&lt;script&gt;document.title='x'&lt;/script&gt;" in details
