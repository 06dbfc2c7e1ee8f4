"""What each planrun setting accepts: key names, value rules and environment-variable text."""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox_runner.catalog import INHERIT, MODEL_ALIASES, READ_ONLY_TOOLS
from sandbox_runner.errors import ConfigError
from sandbox_runner.safe_text import MAX_NAME_CHARS, name_problem
from sandbox_runner.spend import cost_cap
from sandbox_runner.web_grant import GrantError, parse_entries

__all__ = [
    "CHECKS",
    "PLAN_COMMANDS",
    "SCRATCH",
    "checked",
    "field_name",
    "from_text",
    "normalise",
    "parse_config_text",
]


class _Invalid(Exception):
    """A value broke its rule; `expected` completes "must be ...", `got` overrides the value."""

    def __init__(self, expected: str, got: object = None) -> None:
        super().__init__(expected)
        self.expected = expected
        self.got = got


def _at_least(minimum: float, expected: str, *, integer: bool) -> Callable[[object], Any]:
    def check(value: object) -> int | float:
        kinds = int if integer else int | float
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise _Invalid(expected)
        if not math.isfinite(value):
            raise _Invalid(f"{expected} (a finite number)")
        if value < minimum:
            raise _Invalid(expected)
        return value if integer else float(value)

    return check


def _optional_usd(value: object) -> float | None:
    try:
        return cost_cap(value)
    except ValueError:
        raise _Invalid("an amount in US dollars above 0") from None


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("true or false")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("a non-empty string")
    return value.strip()


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _model(value: object) -> str:
    model = _text(value)
    if model.casefold() == INHERIT:
        raise _Invalid(f"a model id or alias ({', '.join(MODEL_ALIASES)}), not 'inherit'")
    return model


def _texts(value: object) -> list[str]:
    if not isinstance(value, list | tuple):
        raise _Invalid("a list of strings")
    items: list[str] = []
    for item in value:
        text = _text(os.fspath(item) if isinstance(item, os.PathLike) else item)
        if text not in items:
            items.append(text)
    return items


def _read_only_tools(value: object) -> list[str]:
    tools = _texts(value)
    for tool in tools:
        if tool not in READ_ONLY_TOOLS:
            raise _Invalid(f"a list of read-only tools ({', '.join(READ_ONLY_TOOLS)})", tool)
    return tools


def _presets(value: object) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise _Invalid("a mapping of preset names to lists of perspectives")
    presets: dict[str, list[str]] = {}
    for name, members in value.items():
        try:
            presets[_text(name)] = _texts(members)
        except _Invalid:
            raise _Invalid(f"a list of perspectives for preset {name!r}", members) from None
        for member in [name, *members]:
            problem = name_problem(str(member))
            if problem:
                raise _Invalid(f"printable names of at most {MAX_NAME_CHARS} characters", member)
    return presets


def _web(value: object) -> list[str]:
    """`web: {allow: [hosts]}` in a file, or the hosts alone (PLANRUN_WEB=a.org,b.org)."""
    if isinstance(value, dict):
        unknown = [str(key) for key in value if key != "allow"]
        if unknown:
            raise _Invalid("a mapping with one key, allow (a list of hosts)", unknown[0])
        value = value.get("allow") or []
    try:
        return list(parse_entries(_texts(value)))
    except GrantError as error:
        raise _Invalid(f"hosts, wildcards (*.example.com) or addresses: {error}") from None


def _mcp_servers(value: object) -> dict[str, Any]:
    """The shape only: each entry's fields are read where servers are loaded."""
    if not isinstance(value, dict) or not all(
        isinstance(name, str) and isinstance(entry, dict) for name, entry in value.items()
    ):
        raise _Invalid("a mapping of server names to mappings (command/args/env, url, grants)")
    return value


DEFAULT_VERIFY_IGNORE = ("*.lock", "package-lock.json", "pnpm-lock.yaml", "go.sum")
"""Changed files `planrun verify` expects no plan to name: lockfiles."""


def _verify(value: object) -> list[str]:
    """`verify: {ignore: [globs]}` in a file, or the globs alone (PLANRUN_VERIFY=*.lock,gen/*)."""
    if isinstance(value, dict):
        unknown = [str(key) for key in value if key != "ignore"]
        if unknown:
            raise _Invalid("a mapping with one key, ignore (a list of globs)", unknown[0])
        value = value.get("ignore") or []
    globs = _texts(value)
    if any(not glob.strip() or "\0" in glob for glob in globs):
        raise _Invalid("non-empty globs", value)
    return globs


SCRATCH = "scratch"
PLAN_COMMANDS = ("read-only", SCRATCH)


def _plan_commands(value: object) -> str:
    if value not in PLAN_COMMANDS:
        raise _Invalid(" or ".join(PLAN_COMMANDS))
    return str(value)


_POSITIVE = "a positive integer"
CHECKS: dict[str, Callable[[object], Any]] = {
    "model": _model,
    "planning_model": _optional_text,
    "perspectives": _presets,
    "allowed_tools": _read_only_tools,
    "extra_dirs": _texts,
    "parallel": _at_least(1, _POSITIVE, integer=True),
    "max_turns": _at_least(1, _POSITIVE, integer=True),
    "timeout": _at_least(1, "a number of seconds, at least 1", integer=False),
    "max_output_tokens": _at_least(1, _POSITIVE, integer=True),
    "max_total_tokens": _at_least(1, _POSITIVE, integer=True),
    "max_cost_usd": _optional_usd,
    "max_cost_usd_per_plan": _optional_usd,
    "api_timeout": _at_least(1, "a number of seconds, at least 1", integer=False),
    "api_retries": _at_least(0, "a whole number, 0 or more", integer=True),
    "memory_mb": _at_least(32, "an integer of at least 32 (MiB)", integer=True),
    "cpus": _at_least(0.01, "a number of cores, at least 0.01", integer=False),
    "pids": _at_least(1, _POSITIVE, integer=True),
    "image": _optional_text,
    "work_network": _boolean,
    "planning_enabled": _boolean,
    "synthesis": _boolean,
    "max_plans": _at_least(1, _POSITIVE, integer=True),
    "work_disk_mb": _at_least(1, "a positive integer (MiB)", integer=True),
    "plan_commands": _plan_commands,
    "scratch_mb": _at_least(1, "a positive integer (MiB)", integer=True),
    "trusted_projects": _texts,
    "web": _web,
    "mcp_servers": _mcp_servers,
    "mcp_image": _optional_text,
    "verify": _verify,
}
"""Each setting's rule, the same whatever the source: returns the value or raises _Invalid."""
_BOOL_WORDS = dict.fromkeys(("1", "true", "yes", "on"), True) | dict.fromkeys(
    ("0", "false", "no", "off"), False
)


def from_text(default: object, text: str) -> object:
    """An environment variable as the value a file would hold, read like the setting's default;
    CHECKS then judges it."""
    if isinstance(default, list):
        return [part.strip() for part in text.split(",") if part.strip()]
    if default is None:
        return text.strip() or None
    if isinstance(default, str):
        return text.strip()
    if isinstance(default, bool):
        return _BOOL_WORDS.get(text.strip().lower(), text)
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


def checked(name: str, value: object, where: str, key: str) -> Any:
    """The value of setting `name` after its rule, as set by `key` in `where`.

    Raises:
        ConfigError: the value breaks the setting's rule.
    """
    try:
        return CHECKS[name](value)
    except _Invalid as invalid:
        got = value if invalid.got is None else invalid.got
        raise ConfigError(
            f"{where}: key {key!r} must be {invalid.expected}, got {_shown(got)}"
        ) from None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def normalise(key: str) -> str:
    """planningModel, planning-model and PLANNING_MODEL all become planning_model."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).replace("-", "_").lower()


def field_name(key: object, where: str) -> str:
    """The setting a key in `where` names; raises ConfigError, with a suggestion, if none."""
    name = normalise(str(key))
    if name in CHECKS:
        return name
    close = difflib.get_close_matches(name, list(CHECKS), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(CHECKS)}"
    raise ConfigError(f"{where}: unknown key {key!r}; {hint}")


def parse_config_text(path: Path, text: str) -> object:
    """The data of a config file (JSON by its suffix, else YAML); {} for an empty one."""
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(
                f"{path}: invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
            ) from None
    import yaml  # only when there is a YAML file: most starts read none

    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: invalid YAML{at}: {error.problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML: {' '.join(str(error).split())}") from None
    # A file of nothing but comments is an empty configuration, not an error.
    return {} if data is None else data
