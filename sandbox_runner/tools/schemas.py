"""The tools offered to the model, shaped like Claude Code's, and a validator for their input.

Names, fields and descriptions follow the Claude Code conventions models are trained on
adapted to the sandbox: the repository is at /workspace and relative paths
resolve against it. The validator understands exactly the JSON-schema subset used here,
so no third-party jsonschema dependency is needed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from sandbox_runner.limits import MAX_TOOL_TIMEOUT_SECONDS, TOOL_TIMEOUT_SECONDS
from sandbox_runner.tools.output import MAX_RESULT_CHARS
from sandbox_runner.tools.schema_parts import JsonSchema, boolean, integer, string, tool
from sandbox_runner.tools.web_schemas import WEB_FETCH, WEB_SEARCH
from sandbox_runner.types import ToolSpec

MAX_BASH_TIMEOUT_MS = int(MAX_TOOL_TIMEOUT_SECONDS * 1000)
DEFAULT_BASH_TIMEOUT_MS = int(TOOL_TIMEOUT_SECONDS * 1000)
# The tool server implements these (it cannot import planrun, so it keeps copies, which a
# unit test holds equal); the descriptions promise them to the model.
READ_DEFAULT_LINES = 2000
"""Lines Read returns when the model gives no limit."""
READ_MAX_LINE_CHARS = 2000
"""Characters of one line Read shows."""
GLOB_MAX_RESULTS = 100
"""Paths Glob returns at most."""
LS_MAX_ENTRIES = 1000
"""Entries after which an LS listing stops."""
GREP_MAX_LINES = 5000
"""Lines (files, listing files) after which a Grep search is stopped."""
GREP_OUTPUT_MODES = ("content", "files_with_matches", "count")
LSP_OPERATIONS = ("document_symbols", "workspace_symbols", "definition", "references")


_PATH_NOTE = "under /workspace, or relative to the repository root"

READ = tool(
    "Read",
    "Reads a file from the repository. The repository is mounted at /workspace; pass an "
    "absolute path under /workspace or a path relative to the repository root. Output is in "
    f"`cat -n` format, with line numbers starting at 1, up to {READ_DEFAULT_LINES} lines by "
    f"default; lines longer than {READ_MAX_LINE_CHARS} characters are cut. For large files, "
    "read a slice with offset and limit. Binary files and directories are refused: use LS for "
    "directories.",
    {
        "file_path": string(f"The file to read, {_PATH_NOTE}."),
        "offset": integer("The line number to start reading from (1-based)."),
        "limit": integer("The number of lines to read.", minimum=1),
    },
    "file_path",
)

GLOB = tool(
    "Glob",
    "Fast file pattern matching that works with any repository size. Supports glob patterns "
    'like "**/*.js" or "src/**/*.ts". Returns matching file paths, newest first; when more '
    f"than {GLOB_MAX_RESULTS} match, the first {GLOB_MAX_RESULTS} by path, so narrow the "
    "pattern or path. The .git directory is skipped. Use it to find files by name; use Grep "
    "to search their contents.",
    {
        "pattern": string("The glob pattern to match files against."),
        "path": string(
            f"The directory to search in, {_PATH_NOTE}. Omit it to search the whole "
            'repository; do not pass "undefined" or "null".'
        ),
    },
    "pattern",
)

GREP = tool(
    "Grep",
    "A powerful search tool built on ripgrep. Supports full regex syntax (e.g. "
    '"log.*Error", "function\\s+\\w+"); filter files with glob (e.g. "*.py") or type '
    '(e.g. "py", "js"). output_mode "files_with_matches" (the default) lists matching '
    'files, "content" shows matching lines, "count" shows match counts. Literal braces '
    'need escaping ("interface\\{\\}"); patterns match within single lines unless '
    f"multiline is true. A search that matches more than {GREP_MAX_LINES:,} lines (or files) "
    "stops there and says so: narrow it with path, glob or type. Always use Grep for "
    "searching rather than grep or rg in Bash.",
    {
        "pattern": string("The regular expression to search for in file contents."),
        "path": string(f"File or directory to search in, {_PATH_NOTE}. Defaults to the root."),
        "glob": string('Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}"), as rg --glob.'),
        "type": string("File type to search, as rg --type: py, js, rust, go, java, etc."),
        "output_mode": {
            "type": "string",
            "enum": list(GREP_OUTPUT_MODES),
            "description": 'Output mode; defaults to "files_with_matches".',
        },
        "-i": boolean("Case-insensitive search (rg -i)."),
        "-n": boolean('Show line numbers (rg -n). Only with output_mode "content".'),
        "-A": integer('Lines to show after each match (rg -A). Only with output_mode "content".'),
        "-B": integer('Lines to show before each match (rg -B). Only with output_mode "content".'),
        "-C": integer('Lines to show around each match (rg -C). Only with output_mode "content".'),
        "head_limit": integer(
            'Limit output to the first N lines or entries, like "| head -N", in every mode.'
        ),
        "multiline": boolean(
            "Multiline mode: . matches newlines and patterns may span lines (rg -U). Default false."
        ),
    },
    "pattern",
)

LS = tool(
    "LS",
    "Lists the files and directories under a path as a tree. The path may be absolute under "
    "/workspace or relative to the repository root; omit it to list the repository root. "
    f"Listings stop after {LS_MAX_ENTRIES} entries, so prefer a deeper path, Glob or Grep in large "
    "repositories. Use ignore to leave out entries matching glob patterns.",
    {
        "path": string(f"The directory to list, {_PATH_NOTE}. Defaults to the root."),
        "ignore": {
            "type": "array",
            "items": {"type": "string"},
            "description": 'Glob patterns of names to leave out (e.g. ["node_modules", "*.log"]).',
        },
    },
)

BASH = tool(
    "Bash",
    "Runs a bash command in the sandbox, with the repository root (/workspace) as working "
    "directory; there is no network. In plan mode only read-only commands are allowed (ls, "
    "cat, head, tail, wc, find without -delete/-exec, grep, rg, tree, stat, git status/log/"
    "diff/show/blame, ...), and anything that could change files is refused: do not retry a "
    "refused command, record it in the plan instead. "
    f"Output is cut at {MAX_RESULT_CHARS} characters. "
    "Prefer Read, Glob, Grep and LS over cat, find and grep.",
    {
        "command": string("The command to run."),
        "timeout": integer(
            f"Optional timeout in milliseconds (max {MAX_BASH_TIMEOUT_MS}); "
            f"default {DEFAULT_BASH_TIMEOUT_MS}.",
            minimum=1,
            maximum=MAX_BASH_TIMEOUT_MS,
        ),
        "description": string(
            "A clear, concise description of what this command does, in 5-10 words."
        ),
    },
    "command",
)

WRITE = tool(
    "Write",
    "Writes a file, replacing it if it exists. Read an existing file before overwriting it, "
    "and prefer Edit for changing part of a file. In plan mode the only file you may write "
    "is your plan file (under /plan); every other path is refused.",
    {
        "file_path": string("The absolute path of the file to write."),
        "content": string("The complete content to write to the file."),
    },
    "file_path",
    "content",
)

EDIT = tool(
    "Edit",
    "Replaces exact text in a file. old_string must match the file exactly, indentation "
    "included, and must be unique in the file unless replace_all is true; include more "
    "surrounding lines to make it unique. In plan mode the only file you may edit is your "
    "plan file (under /plan).",
    {
        "file_path": string("The absolute path of the file to modify."),
        "old_string": string("The text to replace."),
        "new_string": string("The text to replace it with (must differ from old_string)."),
        "replace_all": boolean("Replace every occurrence of old_string (default false)."),
    },
    "file_path",
    "old_string",
    "new_string",
)

LSP = tool(
    "LSP",
    "Code intelligence from a language server. document_symbols lists the symbols defined "
    "in file_path; workspace_symbols finds symbols named like symbol across the repository; "
    "definition and references take a position (file_path, line and character, 1-based as "
    "shown by Read) and find where the symbol there is defined or used. A definition asked "
    "from a file is looked for near that file first; pass symbol without file_path to search "
    "the whole repository. Prefer it over Grep for navigating code when it answers.",
    {
        "operation": {
            "type": "string",
            "enum": list(LSP_OPERATIONS),
            "description": "The operation to perform.",
        },
        "file_path": string(f"The file to query, {_PATH_NOTE}."),
        "symbol": string("The symbol name to look for (workspace_symbols)."),
        "line": integer("The line number, 1-based.", minimum=1),
        "character": integer("The character offset in the line, 1-based.", minimum=1),
    },
    "operation",
)

TASK = tool(
    "Task",
    "Launches a subagent to handle a task on its own, in a container of its own, and returns "
    "its final answer as text. Several Task calls in one turn run in parallel. The agents "
    "you may launch, and when to use each, are listed below.",
    {
        "description": string("A short (3-5 word) description of the task."),
        "prompt": string("The task for the subagent: everything it needs to know."),
        "subagent_type": string("The agent to launch (its name)."),
    },
    "description",
    "prompt",
    "subagent_type",
)

EXIT_PLAN_MODE = tool(
    "ExitPlanMode",
    "Call this when the plan in the plan file is complete and you are ready for the user to "
    "review it. The user then accepts it (and implementation starts) or asks for changes. "
    "Do not call it for research or questions: only when a plan is ready.",
    {"summary": string("Optional: one or two sentences on what the plan does.")},
)

TODO_STATUSES = ("pending", "in_progress", "completed")
TODO_WRITE = tool(
    "TodoWrite",
    "Creates and updates your checklist for the current work; the user sees it above the "
    "prompt. Send the whole list each time (it replaces the last one). Use it for work of "
    "three steps or more: mark a step in_progress before you start it (one at a time) and "
    "completed as soon as it is done, add steps you discover, remove ones that no longer "
    "apply.",
    {
        "todos": {
            "type": "array",
            "description": "The whole checklist, in order.",
            "items": {
                "type": "object",
                "properties": {
                    "content": string("The step, in the imperative: 'Run the tests'."),
                    "status": {
                        "type": "string",
                        "enum": list(TODO_STATUSES),
                        "description": "Where the step stands.",
                    },
                    "activeForm": string("The step as under way: 'Running the tests'."),
                },
                "required": ["content", "status"],
                "additionalProperties": False,
            },
        }
    },
    "todos",
)

ALL_TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        READ,
        GLOB,
        GREP,
        LS,
        BASH,
        WRITE,
        EDIT,
        LSP,
        TASK,
        EXIT_PLAN_MODE,
        TODO_WRITE,
        WEB_FETCH,
        WEB_SEARCH,
    )
}
HOST_TOOLS = frozenset(
    {TASK.name, EXIT_PLAN_MODE.name, TODO_WRITE.name, WEB_FETCH.name, WEB_SEARCH.name}
)
"""Tools the host answers itself: nothing of theirs runs in a sandbox (the web tools read
only what the user's web grant allows)."""


def tools_for(names: Iterable[str]) -> list[ToolSpec]:
    """The specs of the named tools, in the given order, each once.

    Raises:
        KeyError: a name is not a known tool.
    """
    specs: dict[str, ToolSpec] = {}
    for name in names:
        if name not in ALL_TOOLS:
            known = ", ".join(sorted(ALL_TOOLS))
            raise KeyError(f"unknown tool {name!r}; known tools: {known}")
        specs.setdefault(name, ALL_TOOLS[name])
    return list(specs.values())


def validate_input(spec: ToolSpec, value: object) -> list[str]:
    """The problems with a tool call's input, as one-line messages for the model.

    An empty list means the input matches the spec's schema.
    """
    if not isinstance(value, dict):
        return ["input must be a JSON object"]
    return _object_problems(spec.input_schema, value, prefix="")


_TYPE_NAMES = {
    "object": "a JSON object",
    "string": "a string",
    "integer": "an integer",
    "boolean": "true or false",
    "array": "an array",
}


def _object_problems(schema: JsonSchema, value: dict[Any, Any], prefix: str) -> list[str]:
    properties: JsonSchema = schema.get("properties", {})
    problems = [
        f"missing required field {prefix + name!r}"
        for name in schema.get("required", [])
        if name not in value
    ]
    for name, item in value.items():
        field_schema = properties.get(name) if isinstance(name, str) else None
        if field_schema is not None:
            problems += _value_problems(field_schema, item, f"{prefix}{name}")
        elif schema.get("additionalProperties", True) is False:
            problems.append(f"unexpected field {prefix + str(name)!r}")
    return problems


def _value_problems(schema: JsonSchema, value: object, where: str) -> list[str]:
    expected = schema.get("type")
    if not _has_type(value, expected):
        return [f"field {where!r} must be {_TYPE_NAMES[str(expected)]}"]
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        return [f"field {where!r} must be one of: {', '.join(map(str, enum))}"]
    if expected == "integer" and isinstance(value, int | float):
        if "minimum" in schema and value < schema["minimum"]:
            return [f"field {where!r} must be at least {schema['minimum']}"]
        if "maximum" in schema and value > schema["maximum"]:
            return [f"field {where!r} must be at most {schema['maximum']}"]
    if expected == "array" and isinstance(value, list) and "items" in schema:
        problems: list[str] = []
        for index, item in enumerate(value):
            problems += _value_problems(schema["items"], item, f"{where}[{index}]")
        return problems
    if expected == "object" and isinstance(value, dict):
        return _object_problems(schema, value, prefix=f"{where}.")
    return []


_PYTHON_TYPES: dict[str, type] = {"object": dict, "string": str, "array": list}


def _has_type(value: object, expected: object) -> bool:
    if expected not in _TYPE_NAMES:
        # A schema outside the subset is a programming error, not a bad tool call.
        raise ValueError(f"unsupported JSON schema type: {expected!r}")
    if isinstance(value, bool) or expected == "boolean":
        # bool is an int subclass in Python, but never an integer in JSON.
        return isinstance(value, bool) and expected == "boolean"
    if expected == "integer":
        # JSON has one number type: 5.0 is an integer to JSON Schema, and models send it.
        return isinstance(value, int) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        )
    return isinstance(value, _PYTHON_TYPES[str(expected)])
