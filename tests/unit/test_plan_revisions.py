"""The revision store of a plan file: numbered, deduplicated, bounded, atomic, and never
led through a symbolic link."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from sandbox_runner.plans.history import list_runs
from sandbox_runner.plans.revision_diff import line_changes
from sandbox_runner.plans.revisions import (
    keep_published,
    load_revisions,
    record_revision,
    revisions_dir,
)
from sandbox_runner.safe_io import UnsafeFileError


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    path = tmp_path / "plans" / "brave-comet.md"
    path.parent.mkdir()
    path.write_text("# Plan\n")
    return path


def test_each_change_is_a_numbered_revision_with_its_index_entry(plan: Path) -> None:
    first = record_revision(plan, "# Plan\n\none\n", "agent-write")
    second = record_revision(plan, "# Plan\n\none\ntwo\n", "agent-edit")
    assert first is not None and second is not None
    assert (first.number, second.number) == (1, 2)
    store = revisions_dir(plan)
    assert store == plan.parent / ".revisions" / "brave-comet"
    assert (store / "0002.md").read_text() == "# Plan\n\none\ntwo\n"
    index = json.loads((store / "index.json").read_text())
    entry = index["revisions"][1]
    assert entry["source"] == "agent-edit" and entry["size"] == len("# Plan\n\none\ntwo\n")
    assert entry["sha256"] == hashlib.sha256(b"# Plan\n\none\ntwo\n").hexdigest()
    assert entry["time"].endswith("+00:00") and index["pruned"] == 0
    log = load_revisions(plan)
    assert [log.text(rev) for rev in log.revisions] == ["# Plan\n\none\n", "# Plan\n\none\ntwo\n"]


def test_the_same_text_is_not_kept_twice_but_a_review_of_it_is_noted(plan: Path) -> None:
    record_revision(plan, "A\n", "agent-write")
    assert record_revision(plan, "A\n", "agent") is None
    assert record_revision(plan, "A\n", "keep-planning") is None
    assert record_revision(plan, "A\n", "resume") is None
    log = load_revisions(plan)
    assert len(log.revisions) == 1 and log.revisions[0].again == ["keep-planning", "resume"]
    assert sorted(p.name for p in log.directory.iterdir()) == ["0001.md", "index.json"]
    # The same text again after a change is a new revision (an undo is a change too).
    record_revision(plan, "B\n", "editor")
    assert record_revision(plan, "A\n", "editor") is not None
    assert len(load_revisions(plan).revisions) == 3


def test_the_store_is_bounded_by_count_and_by_bytes_and_says_what_it_pruned(plan: Path) -> None:
    for number in range(1, 6):
        record_revision(plan, f"text {number}\n", "agent", keep=3)
    log = load_revisions(plan)
    assert [rev.number for rev in log.revisions] == [3, 4, 5] and log.pruned == 2
    assert not (log.directory / "0001.md").exists() and not (log.directory / "0002.md").exists()
    # Numbers go on after pruning; the byte cap keeps the newest even when it alone is over.
    record_revision(plan, "x" * 100 + "\n", "agent", max_bytes=50)
    log = load_revisions(plan)
    assert [rev.number for rev in log.revisions] == [6] and log.pruned == 5


def test_a_symbolic_link_where_the_store_should_be_is_refused(plan: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (plan.parent / ".revisions").symlink_to(elsewhere)
    with pytest.raises(UnsafeFileError, match="not a directory"):
        record_revision(plan, "A\n", "agent-write")
    assert list(elsewhere.iterdir()) == []
    (plan.parent / ".revisions").unlink()
    (plan.parent / ".revisions").mkdir()
    (plan.parent / ".revisions" / "brave-comet").symlink_to(elsewhere)
    with pytest.raises(UnsafeFileError):
        record_revision(plan, "A\n", "agent-write")
    assert list(elsewhere.iterdir()) == []


def test_a_link_in_place_of_a_revision_or_the_index_is_never_followed(
    plan: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    store = revisions_dir(plan)
    store.mkdir(parents=True)
    (store / "0001.md").symlink_to(victim)  # planted before the first revision
    revision = record_revision(plan, "A\n", "agent-write")
    assert revision is not None and revision.number == 2  # 0001 is skipped, not written
    assert victim.read_text() == "precious\n"
    (store / "index.json").unlink()
    (store / "index.json").symlink_to(victim)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        load_revisions(plan)


def test_writes_are_atomic_and_a_writer_that_died_is_not_overwritten(plan: Path) -> None:
    record_revision(plan, "A\n", "agent-write")
    store = revisions_dir(plan)
    # A writer died after writing 0002.md, before its index: its file stays as it is.
    (store / "0002.md").write_text("orphan\n")
    revision = record_revision(plan, "B\n", "agent-edit")
    assert revision is not None and revision.number == 3
    assert (store / "0002.md").read_text() == "orphan\n"
    assert not [name for name in os.listdir(store) if name.endswith(".tmp")]
    assert [rev.number for rev in load_revisions(plan).revisions] == [1, 3]


def test_a_malformed_index_and_an_unknown_source_are_errors(plan: Path) -> None:
    with pytest.raises(ValueError, match="unknown revision source"):
        record_revision(plan, "A\n", "model")
    revisions_dir(plan).mkdir(parents=True)
    (revisions_dir(plan) / "index.json").write_text("{not json")
    with pytest.raises(UnsafeFileError, match="malformed"):
        load_revisions(plan)
    assert "no revision of brave-comet.md was kept" in keep_published(plan, "A\n", "plan")


def test_a_re_plan_of_a_published_plan_is_a_resume(plan: Path) -> None:
    assert keep_published(plan, "first\n", "plan") == ""
    assert keep_published(plan, "second\n", "plan") == ""
    assert [rev.source for rev in load_revisions(plan).revisions] == ["plan", "resume"]


def test_the_store_of_session_plans_is_not_listed_as_a_run(planrun_home: Path) -> None:
    plan = planrun_home / "plans" / "quiet-fox.md"
    plan.parent.mkdir(parents=True)
    record_revision(plan, "A\n", "agent-write")
    assert [run.name for run in list_runs()] == []


def test_line_changes_count_lines_that_look_like_diff_headers() -> None:
    assert line_changes("a\n-- b\n", "a\n++ c\nd\n") == (2, 1)
    assert line_changes("", "") == (0, 0)
