"""Plan templates: one fence scanner, top-level sections, placeholders, Codex plans, limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.inputs import Template, load_template, read_template
from sandbox_runner.plans.text import fenced_lines
from sandbox_runner.plans.validate import validate_plan

WRAPPED = """```markdown
# Implementation Plan: [Feature]

## Overview
[What this change does]

## Database Changes
```sql
CREATE TABLE orders (id integer primary key);
```

## Rollout
```bash
make migrate
```
```
"""


def _template(tmp_path: Path, text: str) -> Template:
    (tmp_path / "template.md").write_text(text)
    template = load_template(tmp_path / "template.md")
    assert isinstance(template, Template), template
    return template


def _missing(text: str, sections: tuple[str, ...], workspace: Path) -> list[str]:
    return validate_plan(text, sections=sections, workspace=workspace).missing_sections


def test_a_template_wrapped_in_a_markdown_fence_with_inner_code_blocks_is_unwrapped(
    tmp_path: Path,
) -> None:
    template = _template(tmp_path, WRAPPED)
    assert template.sections == ("Overview", "Database Changes", "Rollout")
    assert any("wrapped in one ```markdown fence" in note for note in template.notes)


def test_a_fence_closes_only_with_its_own_character_and_length() -> None:
    lines = ["````markdown", "```python", "## inside", "```", "## still inside", "````", "## out"]
    assert fenced_lines(lines) == [True, True, True, True, True, True, False]
    assert fenced_lines(["~~~", "```", "~~", "## in", "~~~~", "## out"])[-2:] == [True, False]
    # A backtick fence whose info string holds a backtick is inline code, not a fence.
    assert fenced_lines(["```a`b", "## out"]) == [False, False]


def test_a_templates_own_text_passes_its_own_validation(tmp_path: Path) -> None:
    text = "# Plan\n\n## Goal\n\n````md\n```\n## not a section\n````\n\n## Design\n\ntext\n"
    template = _template(tmp_path, text)
    assert template.sections == ("Goal", "Design")
    assert _missing(text, template.sections, tmp_path) == []


def test_only_the_top_heading_level_is_required_and_placeholders_keep_their_prefix(
    tmp_path: Path,
) -> None:
    template = _template(
        tmp_path,
        "# Plan: [Title]\n\n## Tasks\n\n### Task 1: [Task Title]\n\n### Task 2: [Task Title]\n\n"
        "## Phase 1: <phase name>\n\n## [Feature Name]\n\n## Notes TODO\n\n## {{extra}}\n",
    )
    assert template.sections == ("Tasks", "Phase 1", "Notes")
    [required] = [note for note in template.notes if "requires" in note]
    assert '3 sections (## headings): "Tasks", "Phase 1", "Notes"' in required
    assert "2 deeper headings are structure" in required
    assert "2 placeholder headings dropped" in required
    filled = (
        "# Add a verbose option\n\n## Tasks\n\n### Task 1: Add the --verbose option\n\n"
        "## Phase 1: Parsing the flag\n\n## Notes\n\nNone.\n"
    )
    assert _missing(filled, template.sections, tmp_path) == []


def _codex_plan(workspace: Path, text: str) -> Template | str | None:
    (workspace / ".codex").mkdir(exist_ok=True)
    (workspace / ".codex" / "plan.md").write_text(text)
    return read_template(workspace, None)


def test_a_codex_working_plan_is_not_used_as_a_template(tmp_path: Path) -> None:
    working_plan = (
        "# Port the client\n\n## Overview\n\nWe port the Python client to TypeScript.\n\n"
        "## Tasks\n\n- [x] Initialise the project\n- [ ] Port authentication\n"
    )
    warning = _codex_plan(tmp_path, working_plan)
    assert isinstance(warning, str)
    assert "reads as Codex's working plan" in warning and "default sections" in warning
    template = _codex_plan(tmp_path, "# [Feature]\n\n## Goal\n\n[One sentence]\n\n## Steps\n")
    assert isinstance(template, Template) and template.sections == ("Goal", "Steps")


def test_an_oversized_template_is_refused_before_anything_runs(tmp_path: Path) -> None:
    big = "## Goal\n\n" + "filler text\n" * 7000
    (tmp_path / "big.md").write_text(big)
    with pytest.raises(ConfigError, match=r"larger than 64 KiB: .*shorten it$"):
        read_template(tmp_path, tmp_path / "big.md")
    (tmp_path / ".planrun").mkdir()
    (tmp_path / ".planrun" / "plan.md").write_text(big)
    with pytest.raises(ConfigError, match="larger than 64 KiB"):
        read_template(tmp_path, None)
    # Codex's file is not planrun's: a warning, and the default sections.
    (tmp_path / ".planrun" / "plan.md").unlink()
    warning = _codex_plan(tmp_path, big.replace("filler text", "[placeholder]"))
    assert isinstance(warning, str) and "larger than 64 KiB" in warning
    assert warning.endswith("using the default sections")


def test_a_template_asking_for_too_many_sections_is_refused(tmp_path: Path) -> None:
    (tmp_path / "many.md").write_text("".join(f"## Section {n}\n\ntext\n\n" for n in range(25)))
    with pytest.raises(ConfigError, match=r"asks for 25 sections \(at most 20\).*### subheadings"):
        read_template(tmp_path, tmp_path / "many.md")
