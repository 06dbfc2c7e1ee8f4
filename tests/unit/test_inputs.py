"""Requirements, templates and context files: read bounded, never blocking, never outside."""

from __future__ import annotations

import io
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
    read_template,
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
    loaded = load_template(template)
    # "### Design:" is a subsection of Goal: structure, not a required section.
    assert isinstance(loaded, Template) and loaded.sections == ("Goal", "Rollout")


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


def test_a_repository_template_linking_outside_is_not_followed(tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    (workspace / ".planrun").mkdir(parents=True)
    host_file = tmp_path / "host-notes.md"
    host_file.write_text("## Host secret heading\n")
    (workspace / ".planrun" / "plan.md").symlink_to(host_file)
    warning = read_template(workspace, None)
    assert isinstance(warning, str)
    assert "leads outside" in warning and "default sections" in warning
    assert "Host secret heading" not in warning
    # A link that stays inside the repository is fine.
    (workspace / "docs").mkdir()
    (workspace / "docs" / "plan.md").write_text("## Goal\n")
    (workspace / ".planrun" / "plan.md").unlink()
    (workspace / ".planrun" / "plan.md").symlink_to("../docs/plan.md")
    template = read_template(workspace, None)
    assert isinstance(template, Template) and template.sections == ("Goal",)


def test_a_missing_or_empty_explicit_template_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--template: plan template .* does not exist$"):
        read_template(tmp_path, tmp_path / "missing.md")
    (tmp_path / "flat.md").write_text("no headings\n")
    with pytest.raises(ConfigError, match="has no section headings"):
        read_template(tmp_path, tmp_path / "flat.md")


def test_relative_context_paths_are_read_from_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "repo"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("app")
    monkeypatch.chdir(tmp_path)
    assert "Attached file: src/app.py" in read_context_files([Path("src/app.py")], workspace, [])
    with pytest.raises(ConfigError, match="relative paths are read from the repository") as error:
        read_context_files([Path("repo/src/app.py")], workspace, [])
    assert "not the current directory" in str(error.value)


def test_context_files_linking_outside_through_a_directory_are_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "key").write_text("secret")
    (workspace / "docs").symlink_to(tmp_path / "host")
    with pytest.raises(ConfigError, match="outside the repository"):
        read_context_files([Path("docs/key")], workspace, [])


def test_requirements_file_dash_is_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("From stdin\n"))
    assert read_requirements(None, Path("-")) == "From stdin"
