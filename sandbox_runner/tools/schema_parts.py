"""The pieces tool schemas are built of: typed fields and a tool whose input is an object."""

from __future__ import annotations

from typing import Any

from sandbox_runner.types import ToolSpec

JsonSchema = dict[str, Any]


def string(description: str) -> JsonSchema:
    """A string field."""
    return {"type": "string", "description": description}


def boolean(description: str) -> JsonSchema:
    """A true/false field."""
    return {"type": "boolean", "description": description}


def integer(description: str, minimum: int = 0, maximum: int | None = None) -> JsonSchema:
    """An integer field, at least MINIMUM (and at most MAXIMUM when given)."""
    schema: JsonSchema = {"type": "integer", "description": description, "minimum": minimum}
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def tool(name: str, description: str, properties: JsonSchema, *required: str) -> ToolSpec:
    """A tool whose input is an object of PROPERTIES, REQUIRED ones named, nothing else."""
    schema: JsonSchema = {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }
    return ToolSpec(name=name, description=description, input_schema=schema)
