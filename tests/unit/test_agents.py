"""Subagent definitions, the agent directories and the Plan prompt, on a fake file system."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest
from pyfakefs.fake_filesystem import FakeFilesystem

from sandbox_runner.agents.definitions import (
    GENERAL_PURPOSE,
    PLAN,
    AgentDefinition,
    check_read_only,
    resolve_model,
)
from sandbox_runner.agents.prompt import (
    CRITICAL_FILES_HEADING,
    DEFAULT_SECTIONS,
    render_plan_prompt,
)
from sandbox_runner.agents.registry import Registry
from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.sections import SECTION_NAMES

WORKSPACE = Path("/repo")
HOME = Path("/home/dev/.planrun")
PROJECT_AGENTS = WORKSPACE / ".planrun" / "agents"
CLAUDE_AGENTS = WORKSPACE / ".claude" / "agents"
USER_AGENTS = HOME / "agents"
READ_ONLY = ["Glob", "Grep", "Read", "Bash", "LS", "LSP", "WebFetch", "WebSearch"]
"""What Plan and Explore may use; the web tools are offered only with a web grant."""


def agent_file(fs: FakeFilesystem, path: Path, front_matter: str, body: str = "") -> Path:
    fs.create_file(path, contents=f"---\n{front_matter.strip()}\n---\n{body}")
    return path


def load() -> Registry:
    return Registry.load(WORKSPACE, home=HOME)


# Built-ins


def test_plan_builtin_has_the_seed_fields(fs: FakeFilesystem) -> None:
    plan = load().get("Plan").to_dict()
    assert plan["name"] == "Plan"
    assert plan["tools"] == READ_ONLY
    assert plan["disallowedTools"] == []
    assert plan["model"] == "inherit"
    assert plan["filePath"] == "<builtin:Plan>"
    assert plan["scope"] == "builtin"
    assert plan["priority"] == 3
    assert plan["readOnly"] is True
    assert "software architect" in plan["systemPrompt"]
    assert plan["description"] and plan["whenToUse"]


def test_explore_is_read_only_search_and_general_purpose_can_write(fs: FakeFilesystem) -> None:
    registry = load()
    explore = registry.get("Explore")
    assert list(explore.effective_tools()) == READ_ONLY
    assert explore.read_only
    assert "line numbers" in explore.system_prompt
    general = registry.get("general-purpose")
    assert {"Write", "Edit", "Task"} <= set(general.effective_tools())
    assert not general.read_only
    assert [definition.name for definition in registry.all()] == [
        "Explore",
        "general-purpose",
        "Plan",
        "Synthesis",
    ]
    assert registry.warnings == []


# Overrides


def test_project_overrides_user_which_overrides_builtin(fs: FakeFilesystem) -> None:
    agent_file(fs, USER_AGENTS / "plan.md", "name: Plan\nmodel: opus", "User planning prompt.")
    agent_file(fs, PROJECT_AGENTS / "plan.md", "name: Plan\nmodel: haiku")
    agent_file(fs, USER_AGENTS / "reviewer.md", "name: reviewer\ndescription: Reviews", "Review.")

    registry = Registry.load(WORKSPACE, home=HOME, trust_project=True)
    plan = registry.get("Plan")
    assert plan.model == "haiku"
    assert plan.system_prompt == "User planning prompt."  # the project file set no body
    assert (plan.scope, plan.priority) == ("project", 1)
    assert plan.file_path == str(PROJECT_AGENTS / "plan.md")
    reviewer = registry.get("reviewer")
    assert (reviewer.scope, reviewer.priority) == ("user", 2)
    assert registry.warnings == []


def test_an_untrusted_project_agent_cannot_choose_the_model(fs: FakeFilesystem) -> None:
    agent_file(fs, PROJECT_AGENTS / "plan.md", "name: Plan\nmodel: opus", "Repo prompt.")
    plan = load().get("Plan")
    assert (plan.model, plan.ignored_model) == ("inherit", "opus")
    assert resolve_model(plan, "claude-sonnet-4-6") == "claude-sonnet-4-6"
    assert plan.overrides_builtin and plan.system_prompt == "Repo prompt."
    assert not PLAN.overrides_builtin


def test_partial_override_keeps_the_builtin_prompt_and_tools(fs: FakeFilesystem) -> None:
    agent_file(fs, USER_AGENTS / "plan.md", "name: Plan\nmodel: sonnet")
    plan = load().get("Plan")
    assert plan.model == "sonnet"
    assert plan.system_prompt == PLAN.system_prompt
    assert plan.tools == PLAN.tools
    assert plan.description == PLAN.description
    assert plan.read_only


def test_claude_code_agent_files_load_as_they_are(fs: FakeFilesystem) -> None:
    agent_file(
        fs,
        CLAUDE_AGENTS / "code-reviewer.md",
        "name: code-reviewer\ndescription: Reviews diffs\ntools: Read, Grep, Glob, Bash\n"
        "disallowedTools: [NotebookEdit]\nmodel: claude-sonnet-4-5-20250929\ncolor: blue",
        "You are a senior reviewer.\n",
    )
    reviewer = Registry.load(WORKSPACE, home=HOME, trust_project=True).get("code-reviewer")
    assert reviewer.tools == ("Read", "Grep", "Glob", "Bash")
    assert reviewer.model == "claude-sonnet-4-5-20250929"
    assert reviewer.system_prompt == "You are a senior reviewer."
    assert reviewer.when_to_use == ""
    assert reviewer.scope == "project"


def test_planrun_directory_wins_over_claude_directory(fs: FakeFilesystem) -> None:
    agent_file(fs, CLAUDE_AGENTS / "x.md", "name: helper\ndescription: Claude one", "Claude.")
    agent_file(fs, PROJECT_AGENTS / "x.md", "name: helper\ndescription: planrun one", "planrun.")
    helper = load().get("helper")
    assert helper.description == "planrun one"
    assert helper.file_path == str(PROJECT_AGENTS / "x.md")


def test_new_agent_without_tools_gets_every_tool(fs: FakeFilesystem) -> None:
    agent_file(fs, USER_AGENTS / "fixer.md", "name: fixer\ndescription: Fixes", "Fix it.")
    assert load().get("fixer").tools == GENERAL_PURPOSE.tools


# Invalid files


@pytest.mark.parametrize(
    ("contents", "problem"),
    [
        (b"---\nname: [unclosed\n---\nBody", "invalid YAML front matter"),
        (b"Just a prompt, no front matter.", "no YAML front matter"),
        (b"---\nname: broken\ndescription: d\n", "no closing '---'"),
        (b"---\nname: w\ndescription: 42\n---\nBody", "'description' must be a string"),
        (b"---\nname: w\ndescription: d\ntools: {Read: 1}\n---\nB", "'tools' must be a comma"),
        (b"---\n- name\n- description\n---\nBody", "must be a mapping"),
        (b"---\ndescription: no name\n---\nBody", "'name' is missing"),
        (b"---\nname: lonely\n---\nBody", "'description' is missing"),
        (b"---\nname: bad name!\ndescription: d\n---\nBody", "invalid name"),
        (b"---\nname: w\ndescription: caf\xe9\n---\nBody", "not UTF-8"),
    ],
)
def test_invalid_file_is_a_warning_and_others_still_load(
    fs: FakeFilesystem, contents: bytes, problem: str
) -> None:
    bad = PROJECT_AGENTS / "a-bad.md"
    fs.create_file(bad, contents=contents)
    agent_file(fs, PROJECT_AGENTS / "b-good.md", "name: good\ndescription: Works", "Prompt.")

    registry = load()
    assert registry.get("good").description == "Works"
    assert [warning.path for warning in registry.warnings] == [bad]
    assert problem in registry.warnings[0].message
    assert str(bad) in str(registry.warnings[0])
    assert {definition.name for definition in registry.all()} == {
        "Explore",
        "general-purpose",
        "good",
        "Plan",
        "Synthesis",
    }


def test_unreadable_file_is_a_warning(fs: FakeFilesystem) -> None:
    dangling = USER_AGENTS / "gone.md"
    fs.create_symlink(dangling, "/nowhere/gone.md")
    registry = load()
    assert [warning.path for warning in registry.warnings] == [dangling]
    assert "cannot read" in registry.warnings[0].message


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail, instead of hanging the test run, if the block blocks for `seconds`."""

    def give_up(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_fifo_or_dev_zero_agent_file_is_a_warning_and_others_still_load(
    tmp_path: Path,
) -> None:
    # Real files: a FIFO and /dev/zero behave as they would in a hostile repository.
    agents = tmp_path / "repo" / ".planrun" / "agents"
    agents.mkdir(parents=True)
    zero = agents / "a-zero.md"
    zero.symlink_to("/dev/zero")
    fifo = agents / "b-fifo.md"
    os.mkfifo(fifo)
    (agents / "c-good.md").write_text("---\nname: good\ndescription: Works\n---\nPrompt.\n")

    with deadline(5):
        registry = Registry.load(tmp_path / "repo", home=tmp_path / "home")

    assert registry.get("good").description == "Works"
    assert [(warning.path, warning.message) for warning in registry.warnings] == [
        (
            zero,
            f"cannot read the file: it leads outside {tmp_path / 'repo'} (to /dev/zero); "
            "planrun does not follow it",
        ),
        (fifo, "cannot read the file: it is not a regular file"),
    ]


def test_project_agent_files_linking_to_host_files_are_not_read(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    agents = repo / ".planrun" / "agents"
    agents.mkdir(parents=True)
    host = tmp_path / "host-agent.md"
    host.write_text("---\nname: Plan\nmodel: opus\n---\nHost prompt.\n")
    (agents / "plan.md").symlink_to(host)
    (tmp_path / "host-dir").mkdir()
    (tmp_path / "host-dir" / "x.md").write_text("---\nname: x\ndescription: d\n---\nX.\n")
    (repo / ".claude").mkdir()
    (repo / ".claude" / "agents").symlink_to(tmp_path / "host-dir")
    registry = Registry.load(repo, home=tmp_path / "home")
    assert registry.get("Plan").scope == "builtin"
    assert "Host prompt." not in registry.get("Plan").system_prompt
    assert [name.name for name in registry.all()] == [
        "Explore",
        "general-purpose",
        "Plan",
        "Synthesis",
    ]
    messages = [str(warning) for warning in registry.warnings]
    assert len(messages) == 2 and all("leads outside" in message for message in messages)


def test_an_agent_file_over_one_mib_is_a_warning(fs: FakeFilesystem) -> None:
    big = PROJECT_AGENTS / "big.md"
    fs.create_file(big, contents="---\nname: big\ndescription: d\n---\n" + "x" * 1024 * 1024)
    registry = load()
    assert [warning.path for warning in registry.warnings] == [big]
    assert registry.warnings[0].message.endswith("; the limit is 1048576")
    assert "big" not in {definition.name for definition in registry.all()}


def test_empty_body_loads_with_a_warning(fs: FakeFilesystem) -> None:
    path = agent_file(fs, USER_AGENTS / "empty.md", "name: empty\ndescription: Nothing")
    registry = load()
    assert registry.get("empty").system_prompt == ""
    assert [(w.path, "no system prompt" in w.message) for w in registry.warnings] == [(path, True)]


def test_same_name_twice_in_one_directory_keeps_the_first(fs: FakeFilesystem) -> None:
    agent_file(fs, USER_AGENTS / "a.md", "name: twin\ndescription: first", "One.")
    second = agent_file(fs, USER_AGENTS / "b.md", "name: Twin\ndescription: second", "Two.")
    registry = load()
    assert registry.get("twin").description == "first"
    assert [warning.path for warning in registry.warnings] == [second]
    assert "already defined" in registry.warnings[0].message


# Lookup


def test_unknown_agent_error_lists_the_known_names(fs: FakeFilesystem) -> None:
    with pytest.raises(ConfigError, match="unknown agent 'Planner'") as raised:
        load().get("Planner")
    assert "Explore, general-purpose, Plan, Synthesis" in str(raised.value)


def test_lookup_prefers_an_exact_name_then_ignores_case(fs: FakeFilesystem) -> None:
    registry = load()
    assert registry.get("plan") is registry.get("Plan")
    assert registry.get("EXPLORE").name == "Explore"


def test_load_without_workspace_reads_only_the_user_directory(fs: FakeFilesystem) -> None:
    agent_file(fs, PROJECT_AGENTS / "p.md", "name: project-only\ndescription: d", "P.")
    agent_file(fs, USER_AGENTS / "u.md", "name: user-only\ndescription: d", "U.")
    names = {definition.name for definition in Registry.load(None, home=HOME).all()}
    assert "user-only" in names
    assert "project-only" not in names


def test_home_defaults_to_planrun_home(fs: FakeFilesystem, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANRUN_HOME", "/elsewhere")
    agent_file(fs, Path("/elsewhere/agents/e.md"), "name: from-env\ndescription: d", "E.")
    assert Registry.load(None).get("from-env").scope == "user"


# Models and read-only checks


@pytest.mark.parametrize(
    ("model", "parent", "expected"),
    [
        ("inherit", "claude-opus-4-1", "claude-opus-4-1"),
        ("inherit", "sonnet", "claude-sonnet-4-6"),
        ("sonnet", "claude-opus-4-1", "claude-sonnet-4-6"),
        ("Opus", "x", "claude-opus-4-8"),
        ("haiku", "x", "claude-haiku-4-5"),
        ("claude-3-7-sonnet-latest", "x", "claude-3-7-sonnet-latest"),
    ],
)
def test_resolve_model(model: str, parent: str, expected: str) -> None:
    definition = AgentDefinition(name="a", description="d", system_prompt="", tools=(), model=model)
    assert resolve_model(definition, parent) == expected


def test_plan_override_that_adds_write_is_refused_naming_the_file(fs: FakeFilesystem) -> None:
    # Only the user's own directory may change a built-in's tools (a project file's are
    # ignored: test_agent_files.py); even there Plan stays read-only.
    path = agent_file(fs, USER_AGENTS / "plan.md", "name: Plan\ntools: [Read, Write]")
    registry = load()
    plan = registry.get("Plan")
    assert plan.read_only
    assert [warning.path for warning in registry.warnings] == [path]
    with pytest.raises(ConfigError, match="read-only") as raised:
        check_read_only(plan)
    assert str(path) in str(raised.value)
    assert "Write" in str(raised.value)


def test_read_only_check_passes_builtins_and_disallowed_writes(fs: FakeFilesystem) -> None:
    agent_file(
        fs, USER_AGENTS / "explore.md", "name: Explore\ntools: Read, Edit\ndisallowedTools: Edit"
    )
    registry = load()
    for definition in registry.all():
        check_read_only(definition)
    assert registry.get("Explore").effective_tools() == ("Read",)
    assert registry.warnings == []


# The Plan prompt

FILE_INFO_RULE = (
    "You should build your plan incrementally by writing to or editing this file. NOTE that "
    "this is the only file you are allowed to edit - other than this you are only allowed to "
    "take READ-ONLY actions."
)


def plan_prompt(
    *,
    perspective: str | None = None,
    plan_exists: bool = False,
    sections: list[str] | None = None,
    requirements_context: str = "",
) -> str:
    return render_plan_prompt(
        PLAN,
        perspective=perspective,
        plan_file="/plan/gentle-breeze.md",
        plan_exists=plan_exists,
        sections=sections,
        requirements_context=requirements_context,
    )


def test_plan_prompt_has_the_reminder_sections_and_critical_files() -> None:
    prompt = plan_prompt()
    assert "CRITICAL: READ-ONLY MODE" in prompt
    for step in ("Understand the requirements", "Explore thoroughly", "Design the solution"):
        assert step in prompt
    headings = [line for line in prompt.splitlines() if line.startswith("## ")]
    expected = [f"## {section}" for section in DEFAULT_SECTIONS[:-1]]
    found = [heading for heading in headings if heading in expected]
    assert found == expected
    assert "# <Title" in prompt
    format_part = prompt[prompt.index("## Required Output Format") :]
    assert format_part.index(CRITICAL_FILES_HEADING) > format_part.index("## Next Actions")
    assert "3-5 files" in prompt
    assert "- path - reason" in prompt


def test_plan_file_info_when_the_plan_does_not_exist() -> None:
    assert plan_prompt().endswith(
        "## Plan File Info:\n"
        "No plan file exists yet. You should create your plan at /plan/gentle-breeze.md "
        "using the Write tool if you need to.\n" + FILE_INFO_RULE
    )


def test_plan_file_info_when_the_plan_exists() -> None:
    assert plan_prompt(plan_exists=True).endswith(
        "## Plan File Info:\n"
        "A plan file already exists at /plan/gentle-breeze.md. You can read it and make "
        "incremental edits using the Edit tool if you need to.\n" + FILE_INFO_RULE
    )


def test_plan_prompt_perspectives() -> None:
    assert "Plan from the perspective of performance: optimise for speed" in plan_prompt(
        perspective="performance"
    )
    assert "perspective of Minimal Change: touch as few files" in plan_prompt(
        perspective="Minimal Change"
    )
    assert "Plan from the perspective of an SRE on call." in plan_prompt(
        perspective="an SRE on call"
    )
    assert "## Perspective" not in plan_prompt()


def test_template_sections_replace_the_defaults_but_critical_files_stay() -> None:
    prompt = plan_prompt(sections=["## Summary", "Rollout"], requirements_context="Issue #7")
    assert "## Summary\n## Rollout\n" + CRITICAL_FILES_HEADING in prompt
    assert "## Detailed Steps" not in prompt
    assert "## Requirements Context\n\nIssue #7" in prompt


def test_overridden_plan_prompt_still_gets_the_format_and_file_info() -> None:
    custom = AgentDefinition(name="Plan", description="d", system_prompt="Be brief.", tools=())
    prompt = render_plan_prompt(custom, perspective=None, plan_file="/plan/p.md", plan_exists=True)
    assert prompt.startswith("Be brief.")
    assert CRITICAL_FILES_HEADING in prompt
    assert prompt.endswith(FILE_INFO_RULE)


def test_claude_code_tools_planrun_lacks_are_left_out_with_a_warning(fs: FakeFilesystem) -> None:
    agent_file(
        fs,
        Path("/repo/.claude/agents/web.md"),
        "name: researcher\ndescription: Reads the web\n"
        "tools: Read, WebFetch, WebSearch, Teleport, mcp__github__search",
        "Research.",
    )
    registry = load()
    assert registry.get("researcher").tools == (
        "Read",
        "WebFetch",
        "WebSearch",
        "mcp__github__search",
    )
    [warning] = registry.warnings
    assert "Teleport" in warning.message and "mcp__github__search" not in warning.message
    assert "WebFetch" not in warning.message.split("left out:")[1].split("(")[0]


def test_the_format_lists_the_accepted_heading_names() -> None:
    """The names validation accepts are the ones the prompt tells the model."""
    format_part = plan_prompt().split("## Required Output Format", 1)[1]
    for section, names in SECTION_NAMES.items():
        line = next(line for line in format_part.splitlines() if line.startswith(f"- {section}:"))
        assert all(name in line for name in names[1:]), line
