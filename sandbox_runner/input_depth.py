"""Tool input nested too deeply: found without recursion, and replaced in the model's answer
by a note, so that nothing downstream (the transcript, the next request, a cassette, the
policy) walks it recursively and dies of a RecursionError."""

from __future__ import annotations

from typing import Any

from sandbox_runner.limits import MAX_INPUT_DEPTH

REMOVED_KEY = "planrun_removed"
"""The one key of an input planrun replaced; its value says why."""
TOO_DEEP = f"the tool input is nested more than {MAX_INPUT_DEPTH} levels deep"


def nested_deeper_than(value: object, limit: int) -> bool:
    """Whether VALUE holds objects or arrays more than LIMIT levels deep (a scalar is 0)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def without_deep_inputs(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The content blocks of an answer, each tool input nested more than MAX_INPUT_DEPTH
    levels deep replaced by {REMOVED_KEY: TOO_DEEP} (the call keeps its id and name)."""
    return [
        block | {"input": {REMOVED_KEY: TOO_DEEP}}
        if block.get("type") == "tool_use"
        and nested_deeper_than(block.get("input"), MAX_INPUT_DEPTH)
        else block
        for block in content
    ]


def removed_input(tool_input: object) -> str:
    """Why planrun replaced this tool input ("" when it did not)."""
    if isinstance(tool_input, dict) and set(tool_input) == {REMOVED_KEY}:
        return str(tool_input[REMOVED_KEY])
    return ""
