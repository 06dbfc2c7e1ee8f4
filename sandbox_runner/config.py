"""planrun's settings: defaults < user file < project file < PLANRUN_* environment < flags."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_runner.catalog import CUSTOM_PERSPECTIVE, INHERIT, MODEL_ALIASES
from sandbox_runner.config_settings import Settings
from sandbox_runner.config_trust import check_project_value, drop_untrusted
from sandbox_runner.config_values import (
    CHECKS,
    SCRATCH,
    checked,
    field_name,
    from_text,
    normalise,
    parse_config_text,
)
from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import (
    LimitError,
    Limits,
    RunLimits,
)
from sandbox_runner.paths import planrun_home
from sandbox_runner.safe_io import UnsafeFileError, read_beneath, read_untrusted_bytes
from sandbox_runner.safe_text import name_problem
from sandbox_runner.spend import Spend

CONFIG_DIR = ".planrun"
"""The project's planrun directory, holding its config file."""
CONFIG_NAMES = ("config.yaml", "config.json")
MAX_CONFIG_BYTES = 1024 * 1024
"""A config file is read only up to this size; a larger one is refused."""
ENV_PREFIX = "PLANRUN_"
DEFAULT_SOURCE = "default"
BUILTIN_PERSPECTIVES: dict[str, list[str]] = {"default": []}
"""Presets every configuration has; "default" is one plan without a perspective."""
FLAG_NAMES = {
    "planning_model": "--model",
    "synthesis": "--no-synthesis",
    "work_network": "--network",
    "plan_commands": "--scratch",
}
"""Flags whose name differs from the setting they set."""


_DEFAULTS = Settings()


@dataclass
class _Layer:
    """The settings one source sets, validated, with where each came from."""

    base: Path
    """The directory relative extra_dirs set here resolve against."""
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: object, where: str, key: str) -> None:
        if name in self.keys:
            raise ConfigError(
                f"{where}: keys {self.keys[name]!r} and {key!r} both set {name!r}; keep one"
            )
        self.values[name] = checked(name, value, where, key)
        self.sources[name] = where
        self.keys[name] = key


def _find_file(directory: Path) -> Path | None:
    # lexists: a link that leads out of the repository is found, so that it is refused.
    found = [directory / name for name in CONFIG_NAMES if os.path.lexists(directory / name)]
    if len(found) > 1:
        raise ConfigError(f"both {found[0]} and {found[1]} exist; keep only one of them")
    return found[0] if found else None


def _file_layer(path: Path, base: Path, *, beneath: Path | None = None) -> _Layer:
    # The project file is the repository author's: a FIFO must not hang planrun, a link
    # to /dev/zero exhaust its memory, nor a link to a host file (beneath) be read.
    try:
        if beneath is None:
            raw = read_untrusted_bytes(path, MAX_CONFIG_BYTES)
        else:
            raw = read_beneath(beneath, path, MAX_CONFIG_BYTES)
        if raw is None:
            raise ConfigError(f"{path}: cannot read the config file: it no longer exists")
        text = raw.decode("utf-8")
    except UnsafeFileError as error:
        reason = str(error).replace(str(path), "it")
        raise ConfigError(f"{path}: cannot read the config file: {reason}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: cannot read the config file: {error}") from None
    data = parse_config_text(path, text)
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ConfigError(f"{path}: the top level must be a mapping of settings, got a {kind}")
    layer = _Layer(base)
    for key, value in data.items():
        layer.set(field_name(key, str(path)), value, str(path), str(key))
    return layer


def _check_project(project: _Layer, below: list[_Layer]) -> None:
    """Refuse project values that loosen what the defaults and the user file allow."""
    for name, value in project.values.items():
        limit, limit_source = getattr(_DEFAULTS, name), "the default config"
        for layer in below:
            if name in layer.values:
                limit, limit_source = layer.values[name], f"the user config {layer.sources[name]}"
        check_project_value(
            name,
            value,
            project.sources[name],
            project.keys[name],
            limit=limit,
            limit_source=limit_source,
            root=project.base,
        )


def _env_layer(env: Mapping[str, str], base: Path) -> _Layer:
    layer = _Layer(base)
    for name in CHECKS:
        variable = ENV_PREFIX + name.upper()
        if variable not in env:
            continue
        where = f"environment variable {variable}"
        default = getattr(_DEFAULTS, name)
        if isinstance(default, dict):
            raise ConfigError(
                f"{where}: key {name!r} cannot be set from the environment; set it in a config file"
            )
        layer.set(name, from_text(default, env[variable]), where, name)
    return layer


def _flag_layer(flags: Mapping[str, Any], base: Path) -> _Layer:
    layer = _Layer(base)
    for key, value in flags.items():
        if value is None:
            continue
        name = normalise(key)
        where = f"flag {FLAG_NAMES.get(name, '--' + name.replace('_', '-'))}"
        layer.set(field_name(key, where), value, where, key)
    return layer


@dataclass
class LoadedSettings:
    """The merged settings, where each value came from, and the config files read."""

    settings: Settings
    sources: dict[str, str]
    """Setting -> "default", a file path, "environment variable PLANRUN_X" or "flag --x"."""
    files: list[Path]
    """The config files read, lowest priority first."""
    extra_dirs_base: Path
    """The directory relative extra_dirs resolve against: that of the source that set them."""
    project_trusted: bool = False
    """Whether trusted_projects names the repository: its files may then choose the model
    and the image."""
    warnings: list[str] = field(default_factory=list)
    """Project settings that were ignored, and why."""

    def limits(self) -> Limits:
        """The sandbox resource limits; raises ConfigError if this machine cannot grant them."""
        values = self.settings
        try:
            return Limits(
                memory_mb=values.memory_mb,
                cpus=values.cpus,
                pids=values.pids,
                scratch_mb=values.scratch_mb,
            )
        except LimitError as error:
            raise ConfigError(f"{self.sources[error.field]}: {error}") from None

    @property
    def scratch(self) -> bool:
        """Whether plan agents' commands run in a scratch layer (plan_commands: scratch)."""
        return self.settings.plan_commands == SCRATCH

    def run_limits(self) -> RunLimits:
        """The limits of one subagent run."""
        values = self.settings
        return RunLimits(
            max_turns=values.max_turns,
            max_output_tokens=values.max_output_tokens,
            max_total_tokens=values.max_total_tokens,
            timeout_seconds=values.timeout,
            max_cost_usd=values.max_cost_usd_per_plan,
            spend=Spend(values.max_cost_usd),
        )

    def model_id(self, flag: str | None = None) -> str:
        """The model of a session: the flag, else `model`, with aliases resolved."""
        model = flag or self.settings.model
        return MODEL_ALIASES.get(model.casefold(), model)

    def planning_model_id(self) -> str:
        """The model id of plan runs: planning_model, else model, with aliases resolved."""
        model = self.settings.planning_model
        if model is None or model.casefold() == INHERIT:
            model = self.settings.model
        return MODEL_ALIASES.get(model.casefold(), model)

    def presets(self) -> dict[str, list[str]]:
        """The built-in perspective presets, overridden and extended by the configured ones."""
        return {**BUILTIN_PERSPECTIVES, **self.settings.perspectives}

    def expand_perspectives(self, names: Sequence[str]) -> list[str | None]:
        """Expand preset names; other names (custom:X too) are perspectives. [None]: one plan.

        Raises:
            ConfigError: a name is not printable, has a line break or is too long, or
                the run would have more than max_plans plans.
        """
        presets = self.presets()
        expanded: list[str | None] = []
        for name in names:
            problem = name_problem(name)
            if problem:
                raise ConfigError(f"--perspective {name!r} {problem}")
            custom = name.removeprefix(CUSTOM_PERSPECTIVE)  # meant as written: no preset
            for perspective in [custom] if custom != name else presets.get(name, [name]):
                if perspective.strip() and perspective not in expanded:
                    expanded.append(perspective)
        limit = self.settings.max_plans
        if len(expanded) > limit:
            used = [name for name in names if name in self.settings.perspectives]
            via = f" (preset {', '.join(map(repr, used))} from {self.sources['perspectives']})"
            raise ConfigError(
                f"{len(expanded)} plans asked for{via if used else ''}, but max_plans is "
                f"{limit} ({self.sources['max_plans']}); ask for fewer perspectives or raise "
                "max_plans in ~/.planrun/config.yaml"
            )
        return expanded or [None]

    def resolved_extra_dirs(self) -> list[Path]:
        """The extra read-only directories as absolute paths.

        Raises:
            ConfigError: a directory does not exist, naming where it was configured.
        """
        resolved: list[Path] = []
        for entry in self.settings.extra_dirs:
            path = (self.extra_dirs_base / Path(entry).expanduser()).resolve()
            if not path.is_dir():
                problem = "is not a directory" if path.exists() else "does not exist"
                raise ConfigError(
                    f"{self.sources['extra_dirs']}: key 'extra_dirs' names {path}, which {problem}"
                )
            if path not in resolved:
                resolved.append(path)
        return resolved


def load_settings(
    project_root: Path | None,
    *,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> LoadedSettings:
    """Merge defaults < user file < project file < PLANRUN_* environment < flags.

    Each source replaces whole values (a project's extra_dirs replace the user's).
    The repository's own file may only tighten (config_trust.check_project_value says
    how); the user file, the environment and flags are the user's and may set anything.

    Args:
        project_root: the repository; its `.planrun/config.yaml` (or `.json`) is read.
        flags: settings given on the command line; None values are ignored.
        env: the environment (default: os.environ).
        home: planrun's user directory (default: planrun_home()).

    Raises:
        ConfigError: a file cannot be read or parsed, a key or value is invalid, or the
            project file loosens a setting.
    """
    cwd = Path.cwd()
    home = (planrun_home() if home is None else home).expanduser().absolute()
    user_path = _find_file(home)
    user = [_file_layer(user_path, home)] if user_path is not None else []
    files = [user_path] if user_path is not None else []
    env_layer = _env_layer(os.environ if env is None else env, cwd)
    project: list[_Layer] = []
    trusted, warnings = False, []
    if project_root is not None:
        root = project_root.expanduser().absolute()
        trusted = _trusts(root, [*user, env_layer])
        project_path = _find_file(root / CONFIG_DIR)
        if project_path is not None:
            layer = _file_layer(project_path, root, beneath=root)
            _check_project(layer, below=user)
            warnings = drop_untrusted(layer.values, layer.sources, layer.keys, trusted=trusted)
            project, files = [layer], [*files, project_path]
    layers = [*user, *project, env_layer, _flag_layer(flags or {}, cwd)]
    values: dict[str, Any] = {}
    sources = dict.fromkeys(CHECKS, DEFAULT_SOURCE)
    extra_dirs_base = cwd
    for layer in layers:
        values |= layer.values
        sources |= layer.sources
        if "extra_dirs" in layer.values:
            extra_dirs_base = layer.base
    return LoadedSettings(Settings(**values), sources, files, extra_dirs_base, trusted, warnings)


def _trusts(root: Path, user_layers: list[_Layer]) -> bool:
    """Whether the user's trusted_projects names the repository at root."""
    entries: list[str] = []
    for layer in user_layers:
        entries = layer.values.get("trusted_projects", entries)
    real_root = str(root.resolve())
    return any(str(Path(entry).expanduser().resolve()) == real_root for entry in entries)
