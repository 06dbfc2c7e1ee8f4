"""The tool definitions offered to the model, and the validator of their input."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sandbox_runner.tools.schemas import ALL_TOOLS, tools_for, validate_input

SUBSET_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "description",
    "enum",
    "minimum",
    "maximum",
    "items",
}
SUBSET_TYPES = {"object", "string", "integer", "boolean", "array"}

EXPECTED_FIELDS = {
    "Read": {"file_path", "offset", "limit"},
    "Glob": {"pattern", "path"},
    "Grep": {
        "pattern",
        "path",
        "glob",
        "type",
        "output_mode",
        "-i",
        "-n",
        "-A",
        "-B",
        "-C",
        "head_limit",
        "multiline",
    },
    "LS": {"path", "ignore"},
    "Bash": {"command", "timeout", "description"},
    "Write": {"file_path", "content"},
    "Edit": {"file_path", "old_string", "new_string", "replace_all"},
    "LSP": {"operation", "file_path", "symbol", "line", "character"},
    "Task": {"description", "prompt", "subagent_type"},
    "ExitPlanMode": {"summary"},
    "WebFetch": {"url", "prompt"},
    "WebSearch": {"query", "allowed_domains", "blocked_domains"},
    "TodoWrite": {"todos"},
}


def schema_problems(schema: dict[str, Any], where: str) -> list[str]:
    """Everything in a schema that validate_input's subset would not understand."""
    problems = [f"{where}: keyword {key}" for key in set(schema) - SUBSET_KEYWORDS]
    if schema.get("type") not in SUBSET_TYPES:
        problems.append(f"{where}: type {schema.get('type')!r}")
    if schema.get("type") == "object":
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            problems.append(f"{where}: additionalProperties is not false")
        problems += [
            f"{where}: required {n} unknown" for n in schema["required"] if n not in properties
        ]
        for name, sub in properties.items():
            if not sub.get("description"):
                problems.append(f"{where}.{name}: no description")
            problems += schema_problems(sub, f"{where}.{name}")
    if schema.get("type") == "array":
        problems += schema_problems(schema["items"], f"{where}[]")
    return problems


def test_tools_have_the_claude_code_names_and_fields() -> None:
    assert set(ALL_TOOLS) == set(EXPECTED_FIELDS)
    for name, spec in ALL_TOOLS.items():
        assert spec.name == name
        assert set(spec.input_schema["properties"]) == EXPECTED_FIELDS[name], name


@pytest.mark.parametrize("name", sorted(EXPECTED_FIELDS))
def test_every_schema_stays_within_the_validated_subset(name: str) -> None:
    assert schema_problems(ALL_TOOLS[name].input_schema, name) == []


@pytest.mark.parametrize("name", sorted(EXPECTED_FIELDS))
def test_descriptions_are_useful_sentences(name: str) -> None:
    description = ALL_TOOLS[name].description
    assert len(re.findall(r"[a-z)][.!?](?:\s|$)", description)) >= 2, description
    assert 150 <= len(description) <= 900, description
    assert ALL_TOOLS[name].to_param()["input_schema"]["additionalProperties"] is False


def test_descriptions_carry_the_sandbox_conventions() -> None:
    assert "/workspace" in ALL_TOOLS["Read"].description
    assert "relative to the repository root" in ALL_TOOLS["Read"].description
    assert "offset" in ALL_TOOLS["Read"].description
    assert "plan mode only read-only commands" in ALL_TOOLS["Bash"].description


def test_required_fields() -> None:
    required = {name: spec.input_schema["required"] for name, spec in ALL_TOOLS.items()}
    assert required["Read"] == ["file_path"]
    assert required["Bash"] == ["command"]
    assert required["LS"] == []
    assert required["Edit"] == ["file_path", "old_string", "new_string"]
    assert required["LSP"] == ["operation"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("Read", {"file_path": "src/a.py"}),
        ("Read", {"file_path": "/workspace/a.py", "offset": 10, "limit": 50}),
        ("Read", {"file_path": "a.py", "limit": 50.0}),
        ("Grep", {"pattern": "x", "output_mode": "content", "-i": True, "-C": 2}),
        ("LS", {}),
        ("LS", {"path": "src", "ignore": ["*.pyc", "node_modules"]}),
        ("Bash", {"command": "git log -3", "timeout": 600000, "description": "Show log"}),
        ("Edit", {"file_path": "/plan/p.md", "old_string": "a", "new_string": "b"}),
        ("LSP", {"operation": "references", "file_path": "a.py", "line": 3, "character": 1}),
    ],
)
def test_valid_inputs_pass(name: str, value: dict[str, Any]) -> None:
    assert validate_input(ALL_TOOLS[name], value) == []


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("Read", {}, "missing required field 'file_path'"),
        ("Read", {"file_path": "a", "limit": "10"}, "field 'limit' must be an integer"),
        ("Read", {"file_path": "a", "limit": 1.5}, "field 'limit' must be an integer"),
        ("Read", {"file_path": "a", "limit": True}, "field 'limit' must be an integer"),
        ("Read", {"file_path": "a", "limit": 0}, "field 'limit' must be at least 1"),
        ("Read", {"file_path": 7}, "field 'file_path' must be a string"),
        ("Read", {"file_path": None}, "field 'file_path' must be a string"),
        ("Read", {"file_path": "a", "foo": 1}, "unexpected field 'foo'"),
        ("Grep", {"pattern": "x", "-i": "yes"}, "field '-i' must be true or false"),
        ("Grep", {"pattern": "x", "-i": 1}, "field '-i' must be true or false"),
        (
            "Grep",
            {"pattern": "x", "output_mode": "lines"},
            "field 'output_mode' must be one of: content, files_with_matches, count",
        ),
        ("LS", {"ignore": "*.pyc"}, "field 'ignore' must be an array"),
        ("LS", {"ignore": ["ok", 3]}, "field 'ignore[1]' must be a string"),
        ("Bash", {"command": "ls", "timeout": 600001}, "field 'timeout' must be at most 600000"),
        ("Bash", {"command": "ls", "timeout": 0}, "field 'timeout' must be at least 1"),
    ],
)
def test_each_kind_of_problem_is_reported(name: str, value: dict[str, Any], problem: str) -> None:
    assert validate_input(ALL_TOOLS[name], value) == [problem]


@pytest.mark.parametrize("value", [None, "file_path=a", ["a"], 3])
def test_input_must_be_an_object(value: object) -> None:
    assert validate_input(ALL_TOOLS["Read"], value) == ["input must be a JSON object"]


def test_several_problems_are_all_reported() -> None:
    problems = validate_input(ALL_TOOLS["Edit"], {"file_path": 1, "extra": 2})
    assert sorted(problems) == [
        "field 'file_path' must be a string",
        "missing required field 'new_string'",
        "missing required field 'old_string'",
        "unexpected field 'extra'",
    ]


def test_tools_for_keeps_order_and_drops_repeats() -> None:
    specs = tools_for(["Read", "Grep", "Read", "Bash"])
    assert [spec.name for spec in specs] == ["Read", "Grep", "Bash"]
    assert specs[0] is ALL_TOOLS["Read"]


def test_tools_for_unknown_name() -> None:
    with pytest.raises(KeyError, match=r"unknown tool 'NotebookEdit'; known tools: Bash, Edit, "):
        tools_for(["Read", "NotebookEdit"])
