"""Real agent files from public repositories (tests/corpus/agents) load as verdicts.yaml
says: the agent, its tools and model, whether it can plan, and each warning."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox_runner.agents.registry import Registry
from sandbox_runner.errors import ConfigError
from sandbox_runner.runs.prepare import plan_agent

CORPUS = Path(__file__).parent.parent / "corpus" / "agents"
VERDICTS: dict[str, dict[str, Any]] = yaml.safe_load((CORPUS / "verdicts.yaml").read_text())


def test_every_file_has_a_verdict_and_a_source() -> None:
    files = {str(path.relative_to(CORPUS)) for path in CORPUS.glob("*/*.md")}
    assert files == set(VERDICTS)
    sources = (CORPUS / "SOURCES.md").read_text()
    assert all(f"`{name}`" in sources for name in files)
    assert all((CORPUS / name).parent.joinpath("LICENSE").is_file() for name in files)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_a_real_agent_file_loads_as_expected(name: str, tmp_path: Path) -> None:
    verdict = VERDICTS[name]
    workspace = tmp_path / "repo"
    (workspace / ".claude" / "agents").mkdir(parents=True)
    copy = workspace / ".claude" / "agents" / Path(name).name
    shutil.copyfile(CORPUS / name, copy)
    registry = Registry.load(workspace, trust_project=True)
    messages = [warning.message for warning in registry.warnings]
    assert all(
        warning.path == copy and "\n" not in warning.message for warning in registry.warnings
    )
    if "skipped" in verdict:
        assert messages == [verdict["skipped"]]
        assert all(definition.scope == "builtin" for definition in registry.all())
        return
    assert len(messages) == len(verdict["warnings"]), messages
    for message, part in zip(messages, verdict["warnings"], strict=True):
        assert part in message
    definition = registry.get(verdict["agent"])
    assert definition.file_path == str(copy)
    assert list(definition.effective_tools()) == verdict["tools"]
    assert definition.model == verdict["model"]
    assert definition.task_agents == (
        tuple(verdict["task_agents"]) if "task_agents" in verdict else None
    )
    if verdict["can_plan"]:
        assert "Task" not in plan_agent(registry, definition.name).effective_tools()
    else:
        with pytest.raises(ConfigError, match="cannot plan"):
            plan_agent(registry, definition.name)
