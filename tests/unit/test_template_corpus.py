"""Real plan templates and plan documents (tests/corpus/templates, see SOURCES.md) as planrun
reads them: the sections each requires, or why it is refused or not used."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.inputs import Template, read_template
from sandbox_runner.plans.template import read_template_text
from sandbox_runner.plans.validate import validate_plan

CORPUS = Path(__file__).parent.parent / "corpus" / "templates"

REFUSED = "refused: larger than 64 KiB"
CODEX_PLAN = "not used: Codex's working plan"

# file, read as --template ("template") or found as .codex/plan.md ("codex"), the verdict
VERDICTS: list[tuple[str, str, tuple[str, ...] | str]] = [
    (
        "spec-kit-plan-template.md",
        "template",
        (
            "Summary",
            "Technical Context",
            "Constitution Check",
            "Project Structure",
            "Complexity Tracking",
        ),
    ),
    (
        "spec-kit-plan-template-2025-08.md",
        "template",
        (
            "Execution Flow (/plan command scope)",
            "Summary",
            "Technical Context",
            "Constitution Check",
            "Project Structure",
            "Phase 0: Outline & Research",
            "Phase 1: Design & Contracts",
            "Phase 2: Task Planning Approach",
            "Phase 3+: Future Implementation",
            "Complexity Tracking",
            "Progress Tracking",
        ),
    ),
    (
        "spec-kit-spec-template.md",
        "template",
        ("User Scenarios & Testing", "Requirements", "Success Criteria", "Assumptions"),
    ),
    (
        "spec-kit-tasks-template.md",
        "template",
        (
            "Format",
            "Path Conventions",
            "Phase 1: Setup (Shared Infrastructure)",
            "Phase 2: Foundational (Blocking Prerequisites)",
            "Phase 3: User Story 1",
            "Phase 4: User Story 2",
            "Phase 5: User Story 3",
            "Phase N: Polish & Cross-Cutting Concerns",
            "Dependencies & Execution Order",
            "Parallel Example: User Story 1",
            "Implementation Strategy",
            "Notes",
        ),
    ),
    ("spec-kit-constitution-template.md", "template", ("Core Principles", "Governance")),
    # Also when found as .codex/plan.md: a template is told from a plan.
    (
        "spec-kit-plan-template.md",
        "codex",
        (
            "Summary",
            "Technical Context",
            "Constitution Check",
            "Project Structure",
            "Complexity Tracking",
        ),
    ),
    (
        "openai-cookbook-plans-md.md",
        "template",
        (
            "How to use ExecPlans and PLANS.md",
            "Requirements",
            "Formatting",
            "Guidelines",
            "Milestones",
            "Living plans and design decisions",
            "Skeleton of a Good ExecPlan",
        ),
    ),
    (
        "superpowers-writing-plans-skill.md",
        "template",
        (
            "Overview",
            "Scope Check",
            "File Structure",
            "Task Right-Sizing",
            "Bite-Sized Task Granularity",
            "Plan Document Header",
            "Task Structure",
            "No Placeholders",
            "Self-Review",
            "Execution Handoff",
        ),
    ),
    ("pulse-ts-codex-plan.md", "codex", CODEX_PLAN),
    ("embedairr-codex-plan.md", "codex", CODEX_PLAN),
    ("superpowers-plan-pi-extension.md", "codex", CODEX_PLAN),
    # A plan given with --template on purpose is used, headings as they are, and said so.
    (
        "superpowers-plan-pi-extension.md",
        "template",
        (
            "Task 1: Pi package manifest and extension tests",
            "Task 2: Pi tool mapping reference",
            "Task 3: Drill Pi backend and session log normalization",
            "Task 4: Documentation and full verification",
        ),
    ),
    # A plan that quotes prompt templates: its placeholders make it read as a template.
    (
        "superpowers-plan-document-review.md",
        "codex",
        (
            "Chunk 1: Spec Document Reviewer",
            "Chunk 2: Plan Document Reviewer",
            "Chunk 3: Update Plan Document Header",
        ),
    ),
    ("superpowers-plan-sdd-fix-loop.md", "template", REFUSED),
]


def _read(tmp_path: Path, name: str, location: str) -> Template | str | None:
    if location == "template":
        return read_template(tmp_path, CORPUS / name)
    (tmp_path / ".codex").mkdir()
    shutil.copyfile(CORPUS / name, tmp_path / ".codex" / "plan.md")
    return read_template(tmp_path, None)


@pytest.mark.parametrize(("name", "location", "verdict"), VERDICTS)
def test_each_corpus_file_gets_its_verdict(
    tmp_path: Path, name: str, location: str, verdict: tuple[str, ...] | str
) -> None:
    if verdict == REFUSED:
        with pytest.raises(ConfigError, match=r"larger than 64 KiB: .*shorten it$"):
            _read(tmp_path, name, location)
        return
    result = _read(tmp_path, name, location)
    if verdict == CODEX_PLAN:
        assert isinstance(result, str) and "reads as Codex's working plan" in result
        return
    assert isinstance(result, Template), result
    assert result.sections == verdict
    [required] = [note for note in result.notes if "requires" in note]
    assert f"requires {len(verdict)} sections" in required
    unwrapped = any("wrapped in one ```markdown fence" in note for note in result.notes)
    assert unwrapped == (name == "openai-cookbook-plans-md.md")


@pytest.mark.parametrize(
    "name", sorted({name for name, _, verdict in VERDICTS if isinstance(verdict, tuple)})
)
def test_a_templates_own_text_passes_its_own_validation(tmp_path: Path, name: str) -> None:
    read = read_template_text((CORPUS / name).read_text())
    check = validate_plan(read.text, sections=read.sections, workspace=tmp_path)
    assert check.missing_sections == []


def test_every_corpus_file_has_a_verdict_and_a_source() -> None:
    files = {path.name for path in CORPUS.glob("*.md")} - {"SOURCES.md"}
    assert files == {name for name, _, _ in VERDICTS}
    sources = (CORPUS / "SOURCES.md").read_text()
    assert all(f"`{name}`" in sources for name in files)
