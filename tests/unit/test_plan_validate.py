"""Plan validation against a real workspace: sections, title, critical files, feedback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox_runner.agents.prompt import CRITICAL_FILES_SECTION, DEFAULT_SECTIONS
from sandbox_runner.plans.sections import SECTION_NAMES, accepted_names, accepted_names_markdown
from sandbox_runner.plans.validate import (
    CriticalFile,
    PlanCheck,
    extract_section,
    validate_plan,
)

SECTIONS = [
    "Understanding",
    "Constraints",
    "Assumptions",
    "Approach",
    "Detailed Steps",
    "Critical Files for Implementation",
    "Test Plan",
    "Risks",
    "Alternatives",
    "Rollback/Mitigations",
    "Success Criteria",
    "Next Actions",
]

GOOD_FILES = """\
- src/app/main.py - entry point that wires the cache in
- src/app/cache.py - new cache lives here
- tests/test_cache.py - tests for the cache
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for relative in ["src/app/main.py", "src/app/cache.py", "tests/test_cache.py", "Makefile"]:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("x\n")
    return root


def make_plan(
    files: str = GOOD_FILES, *, skip: str = "", title: str = "# Plan: add a cache"
) -> str:
    parts = [title, ""]
    for section in SECTIONS:
        if section == skip:
            continue
        parts.append(f"## {section}")
        parts.append(files if section.startswith("Critical") else f"Text about {section}.")
        parts.append("")
    return "\n".join(parts)


def check(text: str, workspace: Path, min_files: int = 3, max_files: int = 5) -> PlanCheck:
    return validate_plan(
        text, sections=SECTIONS, workspace=workspace, min_files=min_files, max_files=max_files
    )


def test_a_complete_plan_is_valid(workspace: Path) -> None:
    result = check(make_plan(), workspace)
    assert result.ok, result.problems
    assert result.problems == []
    assert result.title == "Plan: add a cache"
    assert result.sections_found == SECTIONS
    assert result.missing_sections == []
    assert result.critical_files == [
        CriticalFile("src/app/main.py", "entry point that wires the cache in", True),
        CriticalFile("src/app/cache.py", "new cache lives here", True),
        CriticalFile("tests/test_cache.py", "tests for the cache", True),
    ]
    assert result.feedback() == ""


@pytest.mark.parametrize("section", SECTIONS)
def test_each_missing_section_is_reported(workspace: Path, section: str) -> None:
    result = check(make_plan(skip=section), workspace)
    assert not result.ok
    assert result.missing_sections == [section]
    assert f"missing section: {section}" in result.problems
    assert section not in result.sections_found


def test_missing_title(workspace: Path) -> None:
    result = check(make_plan(title=""), workspace)
    assert result.title is None
    assert result.problems == ["missing title: start the plan with a first-level heading (# Title)"]


def test_any_heading_before_the_first_section_is_a_title(workspace: Path) -> None:
    result = check(make_plan(title="### Caching plan"), workspace)
    assert result.ok, result.problems
    assert result.title == "Caching plan"


def test_a_title_that_starts_like_a_section_stays_the_title(workspace: Path) -> None:
    result = check(make_plan(title="# Approach to caching"), workspace)
    assert result.ok, result.problems
    assert result.title == "Approach to caching"
    assert extract_section(make_plan(), "Approach") == "Text about Approach."


@pytest.mark.parametrize(
    "heading",
    [
        "## 4. Approach",
        "## 4) Approach",
        "### Approach:",
        "## **Approach**",
        "#### **4. Approach:**",
        "## APPROACH",
        "## Approach (implementation strategy)",
        "## Approach ##",
        "# IV. Approach",
    ],
)
def test_lenient_headings_are_accepted(workspace: Path, heading: str) -> None:
    result = check(make_plan().replace("## Approach", heading), workspace)
    assert result.ok, result.problems


@pytest.mark.parametrize(
    "heading", ["##### Approach", "## Approaches", "Approach", "#Approach", "    ## Approach"]
)
def test_non_headings_and_other_titles_are_not_sections(workspace: Path, heading: str) -> None:
    result = check(make_plan().replace("## Approach", heading), workspace)
    assert result.missing_sections == ["Approach"]


def test_split_title_accepts_either_half(workspace: Path) -> None:
    result = check(make_plan().replace("## Rollback/Mitigations", "## Mitigations"), workspace)
    assert result.ok, result.problems


def test_headings_in_code_fences_do_not_count(workspace: Path) -> None:
    fenced = "```markdown\n## Approach\n```\n\n~~~~\n## Risks\n~~~\n~~~~~\n"
    text = make_plan(skip="Approach").replace("## Risks\n", fenced)
    result = check(text, workspace)
    assert result.missing_sections == ["Approach", "Risks"]


def test_an_unclosed_fence_hides_everything_after_it(workspace: Path) -> None:
    text = make_plan().replace("## Test Plan", "```\n## Test Plan")
    assert check(text, workspace).missing_sections[0] == "Test Plan"


@pytest.mark.parametrize(
    ("entry", "path", "reason", "line"),
    [
        ("- src/app/cache.py - the cache", "src/app/cache.py", "the cache", None),
        ("* `src/app/cache.py` — the cache", "src/app/cache.py", "the cache", None),
        ("+ `src/app/cache.py` – the cache", "src/app/cache.py", "the cache", None),
        ("1. **src/app/cache.py**: the cache", "src/app/cache.py", "the cache", None),
        ("- **`src/app/cache.py`** - the cache", "src/app/cache.py", "the cache", None),
        ("- src/app/cache.py (the cache)", "src/app/cache.py", "the cache", None),
        ("- src/app/cache.py: the cache", "src/app/cache.py", "the cache", None),
        ("- src/app/cache.py:42 - the cache", "src/app/cache.py", "the cache", "42"),
        ("- `src/app/cache.py:10-20` - the cache", "src/app/cache.py", "the cache", "10-20"),
        (
            "- [src/app/cache.py](src/app/cache.py) - the cache",
            "src/app/cache.py",
            "the cache",
            None,
        ),
        ("- [the cache](src/app/cache.py#L7) - here", "src/app/cache.py", "here", "7"),
        ("- /workspace/src/app/cache.py - the cache", "src/app/cache.py", "the cache", None),
        ("- ./src/app/cache.py - the cache", "src/app/cache.py", "the cache", None),
        ("- Makefile - build rules", "Makefile", "build rules", None),
    ],
)
def test_critical_file_forms(
    workspace: Path, entry: str, path: str, reason: str, line: str | None
) -> None:
    files = f"{entry}\n- src/app/main.py - main\n- tests/test_cache.py - tests\n"
    result = check(make_plan(files), workspace)
    assert result.ok, result.problems
    assert result.critical_files[0] == CriticalFile(path, reason, True, line)


def test_host_path_of_the_workspace_is_normalised(workspace: Path) -> None:
    files = GOOD_FILES.replace("- src/app/cache.py", f"- {workspace}/src/app/cache.py")
    result = check(make_plan(files), workspace)
    assert result.ok, result.problems
    assert result.critical_files[1].path == "src/app/cache.py"


def test_reason_on_the_next_line_and_sub_bullets(workspace: Path) -> None:
    files = (
        "1. `src/app/main.py`\n   wires the cache in\n"
        "   - detail that is not an entry\n"
        "2. `src/app/cache.py` - cache\n3. `tests/test_cache.py` - tests\n"
        "\nThese are the files.\n"
    )
    result = check(make_plan(files), workspace)
    assert result.ok, result.problems
    assert result.critical_files[0].reason == "wires the cache in"
    assert len(result.critical_files) == 3


@pytest.mark.parametrize("count", [2, 6])
def test_too_few_or_too_many_files(workspace: Path, count: int) -> None:
    for index in range(6):
        (workspace / f"f{index}.py").write_text("")
    files = "".join(f"- f{index}.py - reason {index}\n" for index in range(count))
    result = check(make_plan(files), workspace)
    assert result.problems == [
        f"Critical Files for Implementation lists {count} files; 3 to 5 are required"
    ]
    assert len(result.critical_files) == count


def test_one_file_is_singular(workspace: Path) -> None:
    result = check(make_plan("- src/app/main.py - main\n"), workspace)
    assert result.problems == [
        "Critical Files for Implementation lists 1 file; 3 to 5 are required"
    ]


def test_custom_bounds(workspace: Path) -> None:
    result = check(make_plan(), workspace, min_files=1, max_files=2)
    assert result.problems == [
        "Critical Files for Implementation lists 3 files; 1 to 2 are required"
    ]


def test_subsection_entries_belong_to_the_section_until_the_next_same_level_heading(
    workspace: Path,
) -> None:
    files = "### Core\n- src/app/main.py - main\n- src/app/cache.py - cache\n### Tests\n"
    files += "- tests/test_cache.py - tests\n"
    result = check(make_plan(files), workspace)
    assert result.ok, result.problems
    assert check(make_plan(files), workspace).sections_found == SECTIONS


def test_nonexistent_file_is_reported(workspace: Path) -> None:
    result = check(make_plan(GOOD_FILES + "- src/x.py - imagined\n"), workspace)
    assert result.problems == ["critical file does not exist in the repository: src/x.py"]
    assert result.critical_files[-1] == CriticalFile("src/x.py", "imagined", False)


def test_symlink_out_of_the_workspace_does_not_exist(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    os.symlink(secret, workspace / "link.txt")
    os.symlink(tmp_path, workspace / "outside")
    os.symlink("src/app/main.py", workspace / "inside.py")
    entries = "- link.txt - a\n- outside/secret.txt - b\n- inside.py - c\n"
    result = check(make_plan(entries), workspace)
    assert [(f.path, f.exists) for f in result.critical_files] == [
        ("link.txt", False),
        ("outside/secret.txt", False),
        ("inside.py", True),
    ]
    assert "critical file does not exist in the repository: link.txt" in result.problems


@pytest.mark.parametrize("path", ["../etc/passwd", "src/../../etc/passwd", "/etc/passwd", "~/x.py"])
def test_paths_outside_the_repository_are_refused(workspace: Path, path: str) -> None:
    result = check(make_plan(GOOD_FILES + f"- {path} - sneaky\n"), workspace)
    assert result.problems == [f"critical file is outside the repository: {path}"]
    assert all(".." not in f.path for f in result.critical_files)


def test_directories_are_accepted_with_a_note(workspace: Path) -> None:
    files = "- src/app/ - the package\n- src/app/main.py - main\n- tests/test_cache.py - tests\n"
    result = check(make_plan(files), workspace)
    assert result.ok, result.problems
    assert result.critical_files[0] == CriticalFile("src/app", "the package", True)
    assert result.notes == ["critical file is a directory, accepted: src/app/"]


def test_duplicates_are_reported_once(workspace: Path) -> None:
    files = GOOD_FILES + "- /workspace/src/app/main.py:3 - again\n"
    result = check(make_plan(files), workspace)
    assert result.problems == ["critical file listed more than once: src/app/main.py"]
    assert len(result.critical_files) == 3


def test_entries_without_a_path_or_reason(workspace: Path) -> None:
    files = GOOD_FILES + "- The configuration loader\n- `src/app/cache.py:9`\n"
    result = check(make_plan(files.replace(" - new cache lives here", "")), workspace)
    assert result.problems == [
        "critical file without a reason: src/app/cache.py",
        "entry without a path: The configuration loader",
        "critical file listed more than once: src/app/cache.py",
    ]


def test_summary_is_the_first_paragraph_of_the_first_section(workspace: Path) -> None:
    long = " ".join(["word"] * 200)
    text = make_plan().replace(
        "Text about Understanding.", "### Goal\nAdd a cache\nto the app.\n\nSecond paragraph."
    )
    assert check(text, workspace).summary == "Add a cache to the app."
    text = make_plan().replace("Text about Understanding.", long)
    summary = check(text, workspace).summary
    assert summary.endswith("…") and len(summary) <= 401


def test_summary_skips_an_empty_first_section(workspace: Path) -> None:
    text = make_plan().replace("Text about Understanding.", "")
    assert check(text, workspace).summary == "Text about Constraints."


def test_feedback_lists_each_problem_and_the_format(workspace: Path) -> None:
    result = check(make_plan("- src/nope.py - x\n", skip="Risks"), workspace)
    feedback = result.feedback()
    for problem in result.problems:
        assert f"- {problem}\n" in feedback
    assert "missing section: Risks" in feedback
    assert "`- path/relative/to/repo - reason`" in feedback
    assert "keep what is already right" in feedback


def test_extract_section(workspace: Path) -> None:
    text = "# T\n## Approach:\n\nDo it.\n### Detail\nmore\n## Risks\nNone.\n"
    assert extract_section(text, "Approach") == "Do it.\n### Detail\nmore"
    assert extract_section(text, "risks") == "None."
    assert extract_section(text, "Alternatives") is None
    assert extract_section("```\n## Risks\n```", "Risks") is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "```",
        "```\n```\n```",
        "#",
        "# \n## \n- \n",
        "## Critical Files for Implementation\n- \x00\x01 - x\n- ` ` - y\n- [](x) z\n- ** **\n",
        "## Critical Files for Implementation\n" + "- a.py:" + "1:" * 100_000 + "\n",
        "x" * 3_000_000,
        "# " + "#" * 500_000 + "\n" + "- [" * 200_000,
        bytes(range(256)).decode("latin-1") * 1000,
        "\n".join(f"## Critical Files for Implementation {i}\n- f{i}.py - r" for i in range(5000)),
    ],
)
def test_garbage_never_raises(workspace: Path, text: str) -> None:
    result = check(text, workspace)
    assert not result.ok
    assert isinstance(result.feedback(), str)
    extract_section(text, "Critical Files for Implementation")


def test_huge_plans_are_cut_and_say_so(workspace: Path) -> None:
    result = check(make_plan() + "\n" + "filler line\n" * 200_000, workspace)
    assert result.problems == ["the plan is larger than 2 MB; only its first 2 MB were checked"]


def test_missing_workspace_means_no_file_exists(tmp_path: Path) -> None:
    result = check(make_plan(), tmp_path / "missing")
    assert [f.exists for f in result.critical_files] == [False, False, False]


def test_extract_section_does_not_take_a_title_that_starts_like_a_section() -> None:
    plan = "# Approach to caching\n\nIntro.\n\n## Approach\nUse an LRU cache.\n\n## Risks\nStale.\n"
    assert extract_section(plan, "Approach") == "Use an LRU cache."


# A heading satisfies a required section when it carries the
# section's key words, in any case, order, numbering or punctuation, shorter or longer.


def default_plan(replace: dict[str, str] | None = None) -> str:
    """A valid plan with the default sections, some headings renamed as a model may."""
    parts = ["# Plan: add a cache", ""]
    for section in DEFAULT_SECTIONS:
        heading = (replace or {}).get(section, section)
        body = GOOD_FILES if section == CRITICAL_FILES_SECTION else f"Text about {section}."
        parts += [f"## {heading}" if heading else "", body, ""]
    return "\n".join(parts)


def check_default(text: str, workspace: Path) -> PlanCheck:
    return validate_plan(text, sections=list(DEFAULT_SECTIONS), workspace=workspace)


def test_alternatives_and_rollback_headings_are_accepted(workspace: Path) -> None:
    """The issue's report: both sections are there, yet the run failed."""
    text = default_plan(
        {"Alternatives Considered": "Alternatives", "Rollback and Mitigations": "Rollback"}
    )
    result = check_default(text, workspace)
    assert result.ok, result.problems
    assert result.sections_found == list(DEFAULT_SECTIONS)


@pytest.mark.parametrize(
    ("section", "heading"),
    [
        ("Alternatives Considered", "Alternatives"),
        ("Alternatives Considered", "Alternatives considered"),
        ("Alternatives Considered", "5. Alternatives & trade-offs"),
        ("Alternatives Considered", "Considered alternatives"),
        ("Alternatives Considered", "ALTERNATIVE APPROACHES"),
        ("Rollback and Mitigations", "Rollback"),
        ("Rollback and Mitigations", "Mitigations"),
        ("Rollback and Mitigations", "Rollback plan"),
        ("Rollback and Mitigations", "9) Mitigations and rollback:"),
        ("Understanding", "Objectives"),
        ("Understanding", "1. Understanding the problem"),
        ("Approach", "Implementation strategy"),
        ("Approach", "**Approach**"),
        ("Detailed Steps", "Steps"),
        ("Detailed Steps", "Implementation steps"),
        ("Test Plan", "Testing"),
        ("Test Plan", "Tests"),
        ("Risks", "Risk"),
        ("Risks", "Key risks"),
        ("Success Criteria", "Acceptance criteria"),
        ("Next Actions", "Next steps"),
        (CRITICAL_FILES_SECTION, "Critical files"),
    ],
)
def test_generous_headings_satisfy_their_section(
    workspace: Path, section: str, heading: str
) -> None:
    result = check_default(default_plan({section: heading}), workspace)
    assert result.ok, result.problems
    assert section in result.sections_found


@pytest.mark.parametrize(
    ("section", "name"),
    [(section, name) for section, names in SECTION_NAMES.items() for name in names],
)
def test_every_accepted_name_satisfies_its_section(
    workspace: Path, section: str, name: str
) -> None:
    result = check_default(default_plan({section: name}), workspace)
    assert result.ok, result.problems


@pytest.mark.parametrize("section", [s for s in DEFAULT_SECTIONS if s != CRITICAL_FILES_SECTION])
def test_a_section_that_is_really_absent_is_still_missing(workspace: Path, section: str) -> None:
    result = check_default(default_plan({section: ""}), workspace)
    assert not result.ok
    assert result.missing_sections == [section]
    assert result.problems == [f"missing section: {section}"]


@pytest.mark.parametrize(
    ("section", "other_heading"),
    [
        ("Detailed Steps", "Next steps"),
        ("Approach", "Alternative approaches"),
        ("Approach", "Testing strategy"),
        ("Approach", "Rollback strategy"),
    ],
)
def test_another_sections_heading_does_not_stand_in(
    workspace: Path, section: str, other_heading: str
) -> None:
    """A shared word is not enough: "Next steps" is Next Actions, not Detailed Steps."""
    text = default_plan({section: ""}) + f"\n## {other_heading}\nMore.\n"
    assert check_default(text, workspace).missing_sections == [section]


def test_critical_files_still_need_three_to_five_that_exist(workspace: Path) -> None:
    two = "- src/app/main.py - entry\n- src/app/nope.py - missing\n"
    text = default_plan({CRITICAL_FILES_SECTION: "Key files"}).replace(GOOD_FILES, two)
    result = check_default(text, workspace)
    assert not result.ok
    assert any("src/app/nope.py" in problem for problem in result.problems)
    assert any("3" in problem and "5" in problem for problem in result.problems)


def test_an_exact_heading_wins_over_an_earlier_longer_one() -> None:
    plan = "# T\n\n## Alternative approaches\nOther.\n\n## Approach\nThe chosen one.\n"
    assert extract_section(plan, "Approach") == "The chosen one."
    assert extract_section("# T\n\n## Implementation strategy\nLRU.\n", "Approach") == "LRU."


@pytest.mark.parametrize(
    ("template_title", "heading", "ok"),
    [
        ("Risk Register", "3. Risk register and owners", True),
        ("Risk Register", "Register of risks", True),
        ("Risk Register", "Register", False),
        ("Alternatives", "Alternatives considered", True),
        ("Testing", "Test plan", True),
        ("Rollout", "Rollout plan", True),
        ("Rollout", "Rollback", False),
    ],
)
def test_template_sections_match_by_their_own_key_words(
    workspace: Path, template_title: str, heading: str, ok: bool
) -> None:
    text = f"# Plan\n\n## {heading}\nText.\n\n## {CRITICAL_FILES_SECTION}\n{GOOD_FILES}"
    result = validate_plan(
        text, sections=[template_title, CRITICAL_FILES_SECTION], workspace=workspace
    )
    assert result.ok is ok, result.problems


def test_accepted_names_are_defined_once_for_every_default_section() -> None:
    assert list(SECTION_NAMES) == list(DEFAULT_SECTIONS)
    for section, names in SECTION_NAMES.items():
        assert names[0] == section
        assert accepted_names(section) == names


def test_the_plan_guide_lists_the_accepted_names() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "plan.md").read_text()
    assert accepted_names_markdown() in guide
