"""What a repository's own config file may set: it may only tighten what the defaults and
the user file allow (check_project_value), and it may not choose what costs the user
money or runs as their toolchain (unless trusted_projects names the repository), nor
what only the user grants (drop_untrusted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox_runner.config_values import SCRATCH
from sandbox_runner.errors import ConfigError
from sandbox_runner.web_grant import WebGrant

TRUSTED_ONLY = ("model", "planning_model", "image")
"""What costs the user money or runs as their toolchain: only the user (their file,
environment, flags) sets these, unless trusted_projects names the repository."""
USER_ONLY = ("work_network",)
"""What a project file never sets, trusted or not."""
UNTRUSTED_MODEL_HINT = (
    "only your config, PLANRUN_* variables and flags choose the model, unless "
    "trusted_projects in ~/.planrun/config.yaml names this repository"
)
UNTRUSTED_IMAGE_HINT = (
    "only your config, PLANRUN_IMAGE and --image choose the sandbox image, unless "
    "trusted_projects in ~/.planrun/config.yaml names this repository"
)


def drop_untrusted(
    values: dict[str, Any], sources: dict[str, str], keys: dict[str, str], *, trusted: bool
) -> list[str]:
    """Take out of a project file's settings what it may not set; say what was ignored.

    Args:
        values, sources, keys: the project layer's settings, where and under which key
            each was set (changed in place).
        trusted: whether trusted_projects names the repository.
    """
    dropped = [name for name in USER_ONLY if name in values]
    dropped += [name for name in TRUSTED_ONLY if name in values and not trusted]
    warnings = []
    for name in dropped:
        value, where, key = values.pop(name), sources.pop(name), keys.pop(name)
        if name in USER_ONLY:
            reason = f"only ~/.planrun/config.yaml, PLANRUN_{name.upper()} and flags grant it"
            warnings.append(f"{where}: key {key!r} is ignored: {reason}")
        elif name == "image":
            warnings.append(
                f"{where}: key {key!r} asks for image {value!r}; ignored: {UNTRUSTED_IMAGE_HINT}"
            )
        else:
            warnings.append(
                f"{where}: key {key!r} asks for model {value!r}; ignored: {UNTRUSTED_MODEL_HINT}"
            )
    return warnings


LOWER_ONLY = (
    "max_plans",
    "parallel",
    "max_turns",
    "timeout",
    "max_output_tokens",
    "max_total_tokens",
    "api_timeout",
    "api_retries",
    "memory_mb",
    "cpus",
    "pids",
    "work_disk_mb",
    "scratch_mb",
)
"""Limits a project file may lower but never raise."""
COST_CAPS = ("max_cost_usd", "max_cost_usd_per_plan")
"""Cost caps, unset meaning none: a project file may set or lower one, never raise or unset it."""
SWITCHES = {"planning_enabled": "planning", "synthesis": "the synthesis"}
"""What a project file may turn off but never on, when the user's side turned it off."""


def check_project_value(
    name: str, value: Any, where: str, key: str, *, limit: Any, limit_source: str, root: Path
) -> None:
    """Refuse a project file's value that loosens what the defaults and the user file allow.

    Whoever wrote a repository writes its `.planrun/config.yaml`, so that file may only
    tighten: lower a limit, remove tools or web hosts, disable planning, point extra_dirs
    at its own sub-trees. It cannot trust itself (trusted_projects). Its model, planning_model and
    image are dropped later, with a warning, unless the user trusts the project, and its
    work_network always is (drop_untrusted).

    Args:
        name: the setting, value its checked value, set by `key` in the file `where`.
        limit: the value below the project (the user file's, else the default).
        limit_source: where the limit came from, for the message.
        root: the project root, which the project's extra_dirs must stay inside.

    Raises:
        ConfigError: the value loosens a setting, naming the file, the key and the limit.
    """
    if name == "trusted_projects":
        raise ConfigError(
            f"{where}: a project config cannot set 'trusted_projects'; only "
            "~/.planrun/config.yaml can trust a repository"
        )
    if name in ("mcp_servers", "mcp_image"):
        raise ConfigError(
            f"{where}: a project config cannot set {name!r}; a repository defines its MCP "
            "servers in .mcp.json, and you approve them (planrun mcp approve NAME)"
        )
    if name in COST_CAPS and limit is not None and (value is None or value > limit):
        cap = "no cap" if limit is None else f"at most {limit!r}"
        raise ConfigError(
            f"{where}: key {key!r} is {value!r}, but a project config may only lower "
            f"{name!r} ({cap} from {limit_source})"
        )
    if name in LOWER_ONLY and value > limit:
        raise ConfigError(
            f"{where}: key {key!r} is {value!r}, but a project config may only lower "
            f"{name!r} (at most {limit!r} from {limit_source})"
        )
    if name in SWITCHES and value and not limit:
        raise ConfigError(
            f"{where}: key {key!r}: a project config cannot enable {SWITCHES[name]}; "
            f"{limit_source} disables it"
        )
    if name == "plan_commands" and value == SCRATCH and limit != SCRATCH:
        raise ConfigError(
            f"{where}: key {key!r}: a project config cannot turn scratch runs on (they run "
            "the repository's code); set plan_commands in ~/.planrun/config.yaml or pass "
            "--scratch"
        )
    if name == "allowed_tools":
        added = [tool for tool in value if tool not in limit]
        if added:
            raise ConfigError(
                f"{where}: key {key!r} adds {', '.join(added)}, but a project config may only "
                f"remove tools (allowed by {limit_source}: {', '.join(limit) or 'none'})"
            )
    if name == "web":
        added = [entry for entry in value if not WebGrant(tuple(limit)).covers(entry)]
        if added:
            raise ConfigError(
                f"{where}: key {key!r} grants {', '.join(added)}, but a project config may "
                f"only narrow the web grant (granted by {limit_source}: "
                f"{', '.join(limit) or 'none'})"
            )
    if name == "extra_dirs":
        for entry in value:
            _check_project_dir(entry, root, where, key)


def _check_project_dir(entry: str, root: Path, where: str, key: str) -> None:
    # The project is already mounted as the workspace, so a project may only narrow to
    # its own sub-trees; anything else could mount the user's home or keys.
    if entry.startswith("~"):
        problem = "starts with '~'"
    elif Path(entry).is_absolute():
        problem = "is an absolute path"
    else:
        try:
            real_root = root.resolve()
            inside = (root / entry).resolve().is_relative_to(real_root)
        except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte
            inside = False
        problem = "" if inside else "leads outside the project (through '..' or a symlink)"
    if problem:
        raise ConfigError(
            f"{where}: key {key!r} names {entry!r}, which {problem}; a project config may "
            f"only name directories inside the project {root}"
        )
