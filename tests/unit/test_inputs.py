"""Requirements, templates and context files: read bounded, never blocking, never outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.inputs import (
    Template,
    find_template,
    load_template,
    read_context_files,
    read_requirements,
)


def test_requirements_from_text_file_or_neither(tmp_path: Path) -> None:
    assert read_requirements("  Add a flag \n", None) == "Add a flag"
    (tmp_path / "req.md").write_text("From a file\n")
    assert read_requirements(None, tmp_path / "req.md") == "From a file"
    with pytest.raises(ConfigError, match="not both"):
        read_requirements("x", tmp_path / "req.md")
    with pytest.raises(ConfigError, match="no requirements given"):
        read_requirements("   ", None)
    with pytest.raises(ConfigError, match="does not exist"):
        read_requirements(None, tmp_path / "missing.md")


def test_requirements_from_dev_zero_are_bounded(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a regular file"):
        read_requirements(None, Path("/dev/zero"))


def test_template_sections_come_from_its_headings(tmp_path: Path) -> None:
    template = tmp_path / "plan.md"
    template.write_text(
        "# Title\n\n## Goal\n\n```\n## not a heading\n```\n\n### Design:\n## **Rollout**\n"
    )
    assert load_template(template) == Template(template, ("Goal", "Design", "Rollout"))


def test_template_discovery_order(tmp_path: Path) -> None:
    assert find_template(tmp_path, None) is None
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "plan.md").write_text("## A\n")
    assert find_template(tmp_path, None) == tmp_path / ".codex" / "plan.md"
    (tmp_path / ".planrun").mkdir()
    (tmp_path / ".planrun" / "plan.md").write_text("## B\n")
    assert find_template(tmp_path, None) == tmp_path / ".planrun" / "plan.md"
    assert find_template(tmp_path, tmp_path / "x.md") == tmp_path / "x.md"


@pytest.mark.parametrize("kind", ["fifo", "empty", "missing", "directory"])
def test_unusable_templates_warn_and_fall_back(tmp_path: Path, kind: str) -> None:
    template = tmp_path / "plan.md"
    if kind == "fifo":
        os.mkfifo(template)
    elif kind == "empty":
        template.write_text("no headings here\n")
    elif kind == "directory":
        template.mkdir()
    warning = load_template(template)
    assert isinstance(warning, str) and "default sections" in warning


def test_context_files_inside_are_attached_and_outside_refused(tmp_path: Path) -> None:
    workspace, docs = tmp_path / "repo", tmp_path / "docs"
    workspace.mkdir()
    docs.mkdir()
    (workspace / "NOTES.md").write_text("note")
    (docs / "guide.md").write_text("guide")
    (tmp_path / "secret").write_text("secret")
    (workspace / "link").symlink_to(tmp_path / "secret")
    text = read_context_files([workspace / "NOTES.md", docs / "guide.md"], workspace, [docs])
    assert "Attached file: NOTES.md" in text and "guide" in text
    for outside in (tmp_path / "secret", workspace / "link", workspace / ".." / "secret"):
        with pytest.raises(ConfigError, match="outside the repository"):
            read_context_files([outside], workspace, [docs])


def test_large_and_fifo_context_files(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 300_000)
    assert "[cut at 256 KiB]" in read_context_files([tmp_path / "big.txt"], tmp_path, [])
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ConfigError, match="not a regular file"):
        read_context_files([tmp_path / "pipe"], tmp_path, [])
