"""report.html shows, collapsed, what changed between the first and the last revision of
each plan that has more than one."""

from __future__ import annotations

from pathlib import Path

from sandbox_runner.plans.report import RunRecord, build_report
from sandbox_runner.plans.revisions import record_revision
from tests.unit.test_report_html import record, workspace

__all__ = ["record", "workspace"]  # the fixtures, used by name

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_a_plan_made_again_shows_its_first_to_last_diff(record: RunRecord) -> None:
    simplicity = record.out_dir / "simplicity.md"
    record_revision(simplicity, "# Plan\n\n## Steps\n1. Cache it.\n", "plan")
    record_revision(simplicity, "# Plan\n\n## Steps\n1. Cache it <b>now</b>.\n", "resume")
    record_revision(simplicity, f"# Plan\n\n## Steps\n1. Cache it.\n2. Use {TOKEN}.\n", "resume")
    record_revision(record.out_dir / "security.md", "# One revision only\n", "plan")
    html = build_report(record).to_html()
    assert '<section id="revisions" class="revisions">' in html
    section = html[html.index('<section id="revisions"') :]
    section = section[: section.index("</section>")]
    assert section.count("<details>") == 1  # security has a single revision: nothing changed
    assert "<summary>simplicity: 3 revisions; revision 1 to 3: +1 −0 lines</summary>" in section
    assert '<span class="add">+2. Use [REDACTED' in section and TOKEN not in html
    assert "&lt;b&gt;now" not in section  # first against last, not the steps between
    assert '<a href="#revisions">Revisions</a>' in html  # in the table of contents


def test_no_section_when_no_plan_changed(record: RunRecord) -> None:
    record_revision(record.out_dir / "simplicity.md", "# Plan\n", "plan")
    html = build_report(record).to_html()
    assert 'id="revisions"' not in html and "<details>" not in html
    assert 'href="#revisions"' not in html


def test_a_hostile_revision_store_is_left_out(record: RunRecord, tmp_path: Path) -> None:
    store = record.out_dir / ".revisions"
    store.symlink_to(tmp_path)
    assert 'id="revisions"' not in build_report(record).to_html()
