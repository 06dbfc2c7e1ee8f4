"""Claude Code agent files as they are found in the wild: where they are read from, what a
repository may override, their tools, models and fields (fake file system and the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pyfakefs.fake_filesystem import FakeFilesystem

from sandbox_runner.agents.definitions import GENERAL_PURPOSE, PLAN
from sandbox_runner.agents.registry import Registry
from sandbox_runner.cli.app import cli
from sandbox_runner.errors import ConfigError
from sandbox_runner.runs.prepare import plan_agent

WORKSPACE = Path("/repo")
HOME = Path("/home/dev/.planrun")
CLAUDE_HOME = Path("/home/dev/.claude")
PROJECT_AGENTS = WORKSPACE / ".planrun" / "agents"
CLAUDE_AGENTS = WORKSPACE / ".claude" / "agents"
USER_AGENTS = HOME / "agents"
CLAUDE_USER_AGENTS = CLAUDE_HOME / "agents"
READ_ONLY = ("Glob", "Grep", "Read", "Bash", "LS", "LSP", "WebFetch", "WebSearch")


def agent_file(fs: FakeFilesystem, path: Path, front_matter: str, body: str = "Do it.") -> Path:
    fs.create_file(path, contents=f"---\n{front_matter.strip()}\n---\n{body}")
    return path


def load(trust_project: bool = False) -> Registry:
    return Registry.load(WORKSPACE, home=HOME, claude_home=CLAUDE_HOME, trust_project=trust_project)


def messages(registry: Registry) -> list[str]:
    return [warning.message for warning in registry.warnings]


# Where agent files are read from


def test_claude_codes_user_directory_is_read_as_user_scope(fs: FakeFilesystem) -> None:
    path = agent_file(fs, CLAUDE_USER_AGENTS / "r.md", "name: reviewer\ndescription: Reviews")
    reviewer = load().get("reviewer")
    assert (reviewer.scope, reviewer.file_path) == ("user", str(path))


def test_planruns_user_directory_wins_over_claude_codes_and_the_project_over_both(
    fs: FakeFilesystem,
) -> None:
    agent_file(fs, CLAUDE_USER_AGENTS / "a.md", "name: helper\ndescription: Claude user")
    agent_file(fs, USER_AGENTS / "a.md", "name: helper\ndescription: planrun user")
    agent_file(fs, CLAUDE_USER_AGENTS / "b.md", "name: other\ndescription: Claude user")
    agent_file(fs, CLAUDE_AGENTS / "b.md", "name: other\ndescription: Claude project")
    registry = load()
    assert registry.get("helper").description == "planrun user"
    assert registry.get("other").description == "Claude project"
    assert registry.directories == [
        CLAUDE_USER_AGENTS,
        USER_AGENTS,
        CLAUDE_AGENTS,
        PROJECT_AGENTS,
    ]


def test_claude_home_defaults_to_claude_config_dir(
    fs: FakeFilesystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/elsewhere/claude")
    agent_file(fs, Path("/elsewhere/claude/agents/x.md"), "name: from-claude\ndescription: d")
    assert Registry.load(None, home=HOME).get("from-claude").scope == "user"


def test_agents_list_says_which_directories_it_read(tmp_path: Path) -> None:
    claude_home = Path(str(tmp_path / "claude"))
    (claude_home / "agents").mkdir(parents=True)
    (claude_home / "agents" / "r.md").write_text("---\nname: reviewer\ndescription: R\n---\nR.\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"CLAUDE_CONFIG_DIR": str(claude_home)}
    result = CliRunner().invoke(cli, ["agents", "list", "--repo", str(repo)], env=env)
    assert result.exit_code == 0, result.output
    assert str(claude_home / "agents" / "r.md") in result.stdout
    assert f"agent files are read from {claude_home / 'agents'}" in result.stderr
    assert str(repo / ".claude" / "agents") in result.stderr


# What a repository may override


@pytest.mark.parametrize(
    "tools", ['tools: ""', "tools: []", "tools: Read, Write, Task", "disallowedTools: Read, Grep"]
)
def test_a_repository_cannot_change_the_tools_of_a_builtin(fs: FakeFilesystem, tools: str) -> None:
    path = agent_file(fs, CLAUDE_AGENTS / "plan.md", f"name: plan\n{tools}", "Repo plan prompt.")
    registry = load()
    plan = registry.get("Plan")
    assert plan.effective_tools() == READ_ONLY
    assert plan.system_prompt == "Repo plan prompt."
    assert plan.overrides_builtin
    [warning] = registry.warnings
    assert warning.path == path
    assert "cannot change the tools of the built-in Plan" in warning.message
    assert "\n" not in warning.message
    assert plan_agent(registry, "Plan").effective_tools() == READ_ONLY


def test_claude_codes_user_directory_cannot_change_builtin_tools_either(
    fs: FakeFilesystem,
) -> None:
    agent_file(fs, CLAUDE_USER_AGENTS / "gp.md", "name: general-purpose\ntools: Read")
    registry = load()
    assert registry.get("general-purpose").tools == GENERAL_PURPOSE.tools
    assert any("cannot change the tools" in message for message in messages(registry))


def test_planruns_user_directory_may_narrow_a_builtins_tools(fs: FakeFilesystem) -> None:
    agent_file(fs, USER_AGENTS / "plan.md", "name: Plan\ntools: Read, Grep, Task")
    registry = load()
    assert registry.get("Plan").tools == ("Read", "Grep", "Task")
    assert registry.warnings == []
    # Task is inert in a subagent: planning goes on, without it.
    assert plan_agent(registry, "Plan").effective_tools() == ("Read", "Grep")


def test_plan_and_agents_show_print_the_limited_override(tmp_path: Path) -> None:
    from sandbox_runner.cli.services import Services

    repo = tmp_path / "repo"
    (repo / ".claude" / "agents").mkdir(parents=True)
    (repo / ".claude" / "agents" / "plan.md").write_text(
        "---\nname: plan\ndescription: d\ntools: Task\n---\nPlan with Task.\n"
    )
    result = CliRunner().invoke(cli, ["agents", "show", "Plan", "--repo", str(repo)])
    assert result.exit_code == 0, result.output
    assert "cannot change the tools of the built-in Plan" in result.stderr
    assert "tools:       Glob, Grep, Read, Bash, LS, LSP" in result.stdout

    class Reached(Exception):
        """Docker is asked for: every check before it passed."""

    def docker() -> object:
        raise Reached

    args = ["plan", "x", "--repo", str(repo), "--no-synthesis"]
    env = {"ANTHROPIC_API_KEY": "test-key"}
    result = CliRunner().invoke(cli, args, obj=Services(docker=docker), env=env)
    assert isinstance(result.exception, Reached), result.output
    [line] = [line for line in result.stderr.splitlines() if "cannot change the tools" in line]
    assert str(repo / ".claude" / "agents" / "plan.md") in line


# Custom agents that plan


def test_a_read_only_custom_agent_can_plan(fs: FakeFilesystem) -> None:
    agent_file(
        fs,
        CLAUDE_AGENTS / "s.md",
        "name: security-auditor\ndescription: Audits\ntools: Read, Grep, Glob",
    )
    definition = plan_agent(load(), "security-auditor")
    assert definition.effective_tools() == ("Read", "Grep", "Glob")
    assert definition.reads_only


def test_a_custom_agent_that_can_write_or_has_no_tools_cannot_plan(fs: FakeFilesystem) -> None:
    agent_file(fs, CLAUDE_AGENTS / "w.md", "name: writer\ndescription: W\ntools: Read, Edit")
    agent_file(fs, CLAUDE_AGENTS / "n.md", "name: mute\ndescription: N\ntools: []")
    registry = load()
    with pytest.raises(ConfigError, match=r"'writer' can change files \(Edit\), so it cannot plan"):
        plan_agent(registry, "writer")
    with pytest.raises(ConfigError, match="'mute' has no tools, so it cannot plan"):
        plan_agent(registry, "mute")


# Tools


@pytest.mark.parametrize("tools", ['tools: ""', "tools: []"])
def test_an_empty_tools_list_means_no_tools_with_a_warning(fs: FakeFilesystem, tools: str) -> None:
    agent_file(fs, CLAUDE_AGENTS / "e.md", f"name: empty\ndescription: E\n{tools}")
    registry = load()
    assert registry.get("empty").tools == ()
    [message] = messages(registry)
    assert "'tools' is empty, so the agent has no tools" in message


def test_omitted_tools_mean_every_tool(fs: FakeFilesystem) -> None:
    agent_file(fs, CLAUDE_AGENTS / "o.md", "name: omitted\ndescription: O\ntools:")
    registry = load()
    assert registry.get("omitted").tools == GENERAL_PURPOSE.tools
    assert registry.warnings == []


def test_a_file_whose_tools_are_all_unknown_is_skipped_naming_them(fs: FakeFilesystem) -> None:
    path = agent_file(
        fs, CLAUDE_AGENTS / "u.md", "name: web\ndescription: W\ntools: Teleport, Frobnicate"
    )
    registry = load()
    with pytest.raises(ConfigError, match="unknown agent 'web'"):
        registry.get("web")
    [warning] = registry.warnings
    assert warning.path == path
    assert "Teleport, Frobnicate" in warning.message and "skipped" in warning.message
    assert "\n" not in warning.message


def test_agent_is_task_and_its_allowed_types_are_kept(fs: FakeFilesystem) -> None:
    agent_file(
        fs,
        CLAUDE_AGENTS / "c.md",
        "name: coordinator\ndescription: C\ntools: Agent(worker, researcher), Read, Bash",
    )
    agent_file(fs, CLAUDE_AGENTS / "d.md", "name: delegator\ndescription: D\ntools: Agent, Read")
    registry = load()
    coordinator = registry.get("coordinator")
    assert coordinator.tools == ("Task", "Read", "Bash")
    assert coordinator.task_agents == ("worker", "researcher")
    delegator = registry.get("delegator")
    assert (delegator.tools, delegator.task_agents) == (("Task", "Read"), None)
    assert registry.warnings == []


def test_a_tool_list_is_never_split_inside_parentheses(fs: FakeFilesystem) -> None:
    agent_file(
        fs,
        CLAUDE_AGENTS / "g.md",
        "name: gitter\ndescription: G\ntools: Read, Bash(git diff:*, git log:*), Task(a, b)",
    )
    registry = load()
    gitter = registry.get("gitter")
    assert gitter.tools == ("Read", "Task")
    assert gitter.task_agents == ("a", "b")
    [message] = messages(registry)
    assert "Bash(git diff:*, git log:*)" in message


def test_a_general_purpose_override_restricts_what_the_session_may_launch(
    fs: FakeFilesystem,
) -> None:
    from sandbox_runner.session.conversations import allowed_task_agents

    agent_file(fs, USER_AGENTS / "gp.md", "name: general-purpose\ntools: Read, Agent(Explore)")
    registry = load()
    general = registry.get("general-purpose")
    launchable = allowed_task_agents(general, registry.all())
    assert [agent.name for agent in launchable] == ["Explore"]


# Models


@pytest.mark.parametrize("model", ["fable", "gpt-4o", "sonnet-4"])
def test_a_model_that_is_neither_an_alias_nor_an_id_inherits_with_a_warning(
    fs: FakeFilesystem, model: str
) -> None:
    agent_file(fs, USER_AGENTS / "m.md", f"name: m\ndescription: M\nmodel: {model}")
    registry = load()
    assert registry.get("m").model == "inherit"
    [message] = messages(registry)
    assert f"model {model!r} is neither an alias" in message and "inherits" in message


@pytest.mark.parametrize("model", ["Sonnet", "haiku", "inherit", "claude-sonnet-4-20250514"])
def test_aliases_and_model_ids_are_used_silently(fs: FakeFilesystem, model: str) -> None:
    agent_file(fs, USER_AGENTS / "m.md", f"name: m\ndescription: M\nmodel: {model}")
    registry = load()
    assert registry.get("m").model == model
    assert registry.warnings == []


def test_inherit_needs_no_trust(fs: FakeFilesystem) -> None:
    agent_file(fs, CLAUDE_AGENTS / "i.md", "name: i\ndescription: I\nmodel: inherit")
    agent_file(fs, CLAUDE_AGENTS / "o.md", "name: o\ndescription: O\nmodel: opus")
    registry = load(trust_project=False)
    assert (registry.get("i").model, registry.get("i").ignored_model) == ("inherit", "")
    assert registry.get("o").ignored_model == "opus"


# Fields


def test_fields_planrun_does_not_use_are_named_in_one_warning(fs: FakeFilesystem) -> None:
    agent_file(
        fs,
        CLAUDE_AGENTS / "f.md",
        "name: fancy\ndescription: F\ntools: Read\ncolor: blue\npermissionMode: plan\n"
        "memory: project\nskills: [a, b]\nhooks: {Stop: []}\nmcpServers: [github]\n"
        "isolation: worktree\nversion: 2",
    )
    registry = load()
    [message] = messages(registry)
    for name in ("permissionMode", "memory", "skills", "hooks", "mcpServers", "isolation"):
        assert name in message
    assert "version" in message and "color" not in message


def test_a_file_with_only_used_fields_and_color_loads_silently(fs: FakeFilesystem) -> None:
    agent_file(
        fs,
        CLAUDE_AGENTS / "c.md",
        "name: plain\ndescription: P\ntools: Read\nmodel: sonnet\ncolor: green",
    )
    assert load().warnings == []


def test_plan_builtin_is_unchanged_without_files(fs: FakeFilesystem) -> None:
    assert load().get("Plan") == PLAN
