"""Settings: discovery, precedence, validation and `planrun config show`, on a fake file system."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from click.testing import CliRunner
from pyfakefs.fake_filesystem import FakeFilesystem

import sandbox_runner.cli.config_cmd  # noqa: F401 - registers `planrun config`
from sandbox_runner.catalog import READ_ONLY_TOOLS
from sandbox_runner.cli.app import cli
from sandbox_runner.config import LoadedSettings, load_settings
from sandbox_runner.config_settings import Settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import Limits, RunLimits

REPO = Path("/repo")
HOME = Path("/home/dev/.planrun")
USER_YAML = HOME / "config.yaml"
USER_JSON = HOME / "config.json"
PROJECT_YAML = REPO / ".planrun" / "config.yaml"
PROJECT_JSON = REPO / ".planrun" / "config.json"


def load(env: dict[str, str] | None = None, flags: dict[str, Any] | None = None) -> LoadedSettings:
    return load_settings(REPO, env=env or {}, flags=flags, home=HOME)


def config_error(env: dict[str, str] | None = None, flags: dict[str, Any] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load(env, flags)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.fixture
def repo(fs: FakeFilesystem) -> Path:
    fs.create_dir(REPO)
    return REPO


# Discovery and precedence


def test_without_files_every_setting_is_its_default(repo: Path) -> None:
    loaded = load()
    assert loaded.settings == Settings()
    assert loaded.settings.allowed_tools == list(READ_ONLY_TOOLS)
    assert set(loaded.sources.values()) == {"default"}
    assert set(loaded.sources) == set(vars(Settings()))
    assert loaded.files == []


def test_user_then_project_then_env_then_flags(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(
        USER_YAML,
        contents="model: opus\nparallel: 8\nmax_turns: 30\npids: 300\nmemory_mb: 512\n",
    )
    fs.create_file(PROJECT_YAML, contents="parallel: 3\nmax_turns: 20\npids: 200\n")
    # The environment and flags are the user's own: they may go above any file.
    env = {"PLANRUN_MAX_TURNS": "50", "PLANRUN_PIDS": "600", "OTHER": "x"}
    loaded = load(env, flags={"pids": 1000, "parallel": None})

    settings = loaded.settings
    assert (settings.model, settings.memory_mb) == ("opus", 512)
    assert (settings.parallel, settings.max_turns, settings.pids) == (3, 50, 1000)
    assert settings.timeout == 1800
    assert loaded.sources["model"] == str(USER_YAML)
    assert loaded.sources["memory_mb"] == str(USER_YAML)
    assert loaded.sources["parallel"] == str(PROJECT_YAML)
    assert loaded.sources["max_turns"] == "environment variable PLANRUN_MAX_TURNS"
    assert loaded.sources["pids"] == "flag --pids"
    assert loaded.sources["timeout"] == "default"
    assert loaded.files == [USER_YAML, PROJECT_YAML]


def test_json_files_are_read_like_yaml(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(
        USER_JSON, contents=json.dumps({"timeout": 60, "planningEnabled": False, "cpus": 2})
    )
    fs.create_file(PROJECT_JSON, contents=json.dumps({"cpus": 1.5, "maxTurns": 5}))
    loaded = load()
    assert loaded.settings.timeout == 60.0
    assert loaded.settings.planning_enabled is False
    assert loaded.settings.cpus == 1.5
    assert loaded.settings.max_turns == 5
    assert loaded.files == [USER_JSON, PROJECT_JSON]


def test_without_a_project_only_the_user_file_is_read(fs: FakeFilesystem) -> None:
    fs.create_file(USER_YAML, contents="parallel: 2\n")
    fs.create_file(PROJECT_YAML, contents="parallel: 3\n")
    loaded = load_settings(None, env={}, home=HOME)
    assert loaded.settings.parallel == 2
    assert loaded.files == [USER_YAML]


def test_a_file_of_comments_is_an_empty_config(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="# nothing yet\n")
    assert load().settings == Settings()


@pytest.mark.parametrize("directory", [HOME, REPO / ".planrun"])
def test_yaml_and_json_in_one_place_is_an_error(
    fs: FakeFilesystem, repo: Path, directory: Path
) -> None:
    fs.create_file(directory / "config.yaml", contents="parallel: 2\n")
    fs.create_file(directory / "config.json", contents='{"parallel": 3}')
    message = config_error()
    assert str(directory / "config.yaml") in message
    assert str(directory / "config.json") in message


# One-line errors naming the file and the key


def test_a_wrong_type_names_file_key_and_value(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="parallel: four\n")
    assert config_error() == (
        f"{PROJECT_YAML}: key 'parallel' must be a positive integer, got 'four'"
    )


@pytest.mark.parametrize(
    ("line", "key", "expected"),
    [
        ("parallel: 0", "parallel", "positive integer, got 0"),
        ("max_turns: 0", "max_turns", "positive integer, got 0"),
        ("max_turns: 2.5", "max_turns", "positive integer, got 2.5"),
        ("parallel: true", "parallel", "positive integer, got True"),
        ("cpus: -1", "cpus", "at least 0.01, got -1"),
        ("memory_mb: 16", "memory_mb", "at least 32 (MiB), got 16"),
        ("timeout: 0", "timeout", "at least 1, got 0"),
        ("allowed_tools: [Read, Write]", "allowed_tools", "read-only tools"),
        ("allowed_tools: Read", "allowed_tools", "a list of strings, got 'Read'"),
        ("planning_enabled: maybe", "planning_enabled", "true or false, got 'maybe'"),
        ("model: inherit", "model", "not 'inherit'"),
        ("model: 5", "model", "a non-empty string, got 5"),
        ("extra_dirs: docs", "extra_dirs", "a list of strings, got 'docs'"),
        ("perspectives: {quick: speed}", "perspectives", "preset 'quick', got 'speed'"),
    ],
)
def test_invalid_values_are_one_line_errors(
    fs: FakeFilesystem, repo: Path, line: str, key: str, expected: str
) -> None:
    fs.create_file(PROJECT_YAML, contents=line + "\n")
    message = config_error()
    assert message.startswith(f"{PROJECT_YAML}: key '{key}' must be ")
    assert expected in message


def test_write_in_allowed_tools_is_named(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="allowed_tools: [Read, Grep, Write]\n")
    message = config_error()
    assert message.startswith(f"{USER_YAML}: key 'allowed_tools' must be a list of read-only")
    assert message.endswith("got 'Write'")


def test_unknown_key_suggests_the_closest(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="paralel: 2\n")
    assert config_error() == f"{PROJECT_YAML}: unknown key 'paralel'; did you mean 'parallel'?"


def test_unknown_key_without_a_close_one_lists_the_keys(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="colour: blue\n")
    message = config_error()
    assert message.startswith(f"{PROJECT_YAML}: unknown key 'colour'; known keys: model,")


def test_yaml_syntax_error_is_one_line_with_its_position(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="parallel: 2\nallowed_tools: [Read, Grep\n")
    message = config_error()
    assert message.startswith(f"{PROJECT_YAML}: invalid YAML at line ")


def test_json_syntax_error_is_one_line_with_its_position(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_JSON, contents='{"parallel": 2,}')
    message = config_error()
    assert message.startswith(f"{USER_JSON}: invalid JSON at line 1, column 16")


@pytest.mark.parametrize(("contents", "kind"), [("- parallel\n", "list"), ("4\n", "int")])
def test_top_level_must_be_a_mapping(
    fs: FakeFilesystem, repo: Path, contents: str, kind: str
) -> None:
    fs.create_file(PROJECT_YAML, contents=contents)
    assert config_error() == (
        f"{PROJECT_YAML}: the top level must be a mapping of settings, got a {kind}"
    )


def test_env_values_are_parsed_then_checked_by_the_same_rules(repo: Path) -> None:
    env = {
        "PLANRUN_CPUS": "2.5",
        "PLANRUN_TIMEOUT": "90",
        "PLANRUN_PLANNING_ENABLED": "no",
        "PLANRUN_ALLOWED_TOOLS": "Read, Grep,",
        "PLANRUN_PLANNING_MODEL": "",
        "PLANRUN_MODEL": " haiku ",
    }
    settings = load(env).settings
    assert (settings.cpus, settings.timeout) == (2.5, 90.0)
    assert settings.planning_enabled is False
    assert settings.allowed_tools == ["Read", "Grep"]
    assert settings.planning_model is None
    assert settings.model == "haiku"


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("PLANRUN_PARALLEL", "four", "key 'parallel' must be a positive integer, got 'four'"),
        ("PLANRUN_MAX_TURNS", "0", "key 'max_turns' must be a positive integer, got 0"),
        ("PLANRUN_ALLOWED_TOOLS", "Read,Write", "read-only tools"),
        ("PLANRUN_PLANNING_ENABLED", "sometimes", "true or false, got 'sometimes'"),
        ("PLANRUN_PERSPECTIVES", "a,b", "cannot be set from the environment"),
    ],
)
def test_env_errors_name_the_variable(repo: Path, variable: str, value: str, expected: str) -> None:
    message = config_error(env={variable: value})
    assert message.startswith(f"environment variable {variable}: ")
    assert expected in message


def test_flag_errors_name_the_flag(repo: Path) -> None:
    assert config_error(flags={"max_turns": 0}) == (
        "flag --max-turns: key 'max_turns' must be a positive integer, got 0"
    )
    assert (
        config_error(flags={"paralel": 2})
        == "flag --paralel: unknown key 'paralel'; did you mean 'parallel'?"
    )


# Key spellings


@pytest.mark.parametrize("key", ["planning_model", "planningModel", "planning-model"])
def test_key_spellings_are_normalised(fs: FakeFilesystem, repo: Path, key: str) -> None:
    fs.create_file(USER_YAML, contents=f"trusted_projects: [{REPO}]\n")
    fs.create_file(PROJECT_YAML, contents=f"{key}: opus\nmaxTurns: 7\nmax-output-tokens: 900\n")
    loaded = load()
    assert loaded.settings.planning_model == "opus"
    assert (loaded.settings.max_turns, loaded.settings.max_output_tokens) == (7, 900)
    assert loaded.sources["planning_model"] == str(PROJECT_YAML)


def test_one_setting_spelled_twice_in_a_file_is_an_error(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="maxTurns: 7\nmax_turns: 8\n")
    assert config_error() == (
        f"{PROJECT_YAML}: keys 'maxTurns' and 'max_turns' both set 'max_turns'; keep one"
    )


def test_flags_accept_any_spelling(repo: Path) -> None:
    loaded = load(flags={"max-turns": 3, "planningModel": "haiku"})
    assert loaded.settings.max_turns == 3
    assert loaded.sources["max_turns"] == "flag --max-turns"
    # The flag is --model, whatever the setting is called.
    assert loaded.sources["planning_model"] == "flag --model"


# Models


def test_planning_model_falls_back_to_model_and_resolves_aliases(repo: Path) -> None:
    assert load().planning_model_id() == "claude-sonnet-4-6"
    assert load({"PLANRUN_MODEL": "opus"}).planning_model_id() == "claude-opus-4-8"
    env = {"PLANRUN_MODEL": "opus", "PLANRUN_PLANNING_MODEL": "haiku"}
    assert load(env).planning_model_id() == "claude-haiku-4-5"
    env["PLANRUN_PLANNING_MODEL"] = "inherit"
    assert load(env).planning_model_id() == "claude-opus-4-8"


# Extra directories


def extra_dirs(loaded: LoadedSettings) -> list[str]:
    # Compared as text: paths made before and after pyfakefs patched pathlib are never equal.
    return [str(path) for path in loaded.resolved_extra_dirs()]


def test_relative_extra_dirs_resolve_against_where_they_were_set(
    fs: FakeFilesystem, repo: Path
) -> None:
    for directory in (HOME / "notes", REPO / "docs", Path("/shared/specs"), Path("/work/ref")):
        fs.create_dir(directory)
    fs.create_file(USER_YAML, contents="extra_dirs: [notes, /shared/specs]\n")
    assert extra_dirs(load()) == [f"{HOME}/notes", "/shared/specs"]

    fs.create_file(PROJECT_YAML, contents="extra_dirs: [docs, ./docs]\n")
    assert extra_dirs(load()) == ["/repo/docs"]

    os.chdir("/work")
    assert extra_dirs(load({"PLANRUN_EXTRA_DIRS": "ref"})) == ["/work/ref"]
    assert extra_dirs(load(flags={"extra_dirs": ["ref"]})) == ["/work/ref"]


def test_a_missing_extra_dir_names_where_it_was_set(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="extra_dirs: [missing]\n")
    loaded = load()
    with pytest.raises(ConfigError) as caught:
        loaded.resolved_extra_dirs()
    assert str(caught.value) == (
        f"{PROJECT_YAML}: key 'extra_dirs' names {REPO / 'missing'}, which does not exist"
    )


# Perspective presets


def test_presets_expand_and_other_names_are_taken_as_is(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(
        PROJECT_YAML,
        contents="perspectives:\n  thorough: [simplicity, performance, security]\n",
    )
    loaded = load()
    assert loaded.expand_perspectives(["thorough", "security", "cost"]) == [
        "simplicity",
        "performance",
        "security",
        "cost",
    ]
    assert loaded.expand_perspectives(["cost", "cost"]) == ["cost"]


def test_no_perspectives_or_the_default_preset_is_one_plain_plan(repo: Path) -> None:
    loaded = load()
    assert loaded.expand_perspectives([]) == [None]
    assert loaded.expand_perspectives(["default"]) == [None]
    assert loaded.presets() == {"default": []}


def test_a_config_can_redefine_the_default_preset(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="perspectives:\n  default: [security]\n")
    assert load().expand_perspectives(["default"]) == ["security"]


# Limits


def test_limits_and_run_limits_carry_the_settings(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(
        USER_YAML,
        contents=(
            "memory_mb: 2048\ncpus: 0.5\npids: 64\nmax_turns: 12\n"
            "max_output_tokens: 8000\nmax_total_tokens: 500000\ntimeout: 600\n"
        ),
    )
    loaded = load()
    assert loaded.limits() == Limits(memory_mb=2048, cpus=0.5, pids=64)
    assert loaded.run_limits() == RunLimits(
        max_turns=12, max_output_tokens=8000, max_total_tokens=500_000, timeout_seconds=600.0
    )


def test_more_cpus_than_the_machine_has_names_the_file(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents=f"cpus: {(os.cpu_count() or 1) + 1}\n")
    loaded = load()
    with pytest.raises(ConfigError) as caught:
        loaded.limits()
    assert str(caught.value).startswith(f"{USER_YAML}: limit cpus must be between 0.01 and ")


# A project config may only tighten: the repository may be someone else's

LIMITS_ABOVE_DEFAULTS = [
    ("memory_mb", "100000000", "1024"),
    ("cpus", "64", "1.0"),
    ("pids", "100000000", "256"),
    ("parallel", "500", "4"),
    ("max_turns", "1000", "40"),
    ("timeout", "86400", "1800.0"),
    ("max_output_tokens", "128000", "16000"),
    ("max_total_tokens", "999999999", "3000000"),
]


@pytest.mark.parametrize(("key", "value", "limit"), LIMITS_ABOVE_DEFAULTS)
def test_a_project_cannot_raise_a_limit_above_the_default(
    fs: FakeFilesystem, repo: Path, key: str, value: str, limit: str
) -> None:
    fs.create_file(PROJECT_YAML, contents=f"{key}: {value}\n")
    shown = value if key not in ("cpus", "timeout") else str(float(value))
    assert config_error() == (
        f"{PROJECT_YAML}: key {key!r} is {shown}, but a project config may only lower "
        f"{key!r} (at most {limit} from the default config)"
    )


def test_a_project_cannot_raise_a_limit_above_the_user_file(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="pids: 100\n")
    fs.create_file(PROJECT_YAML, contents="pids: 200\n")
    assert config_error() == (
        f"{PROJECT_YAML}: key 'pids' is 200, but a project config may only lower 'pids' "
        f"(at most 100 from the user config {USER_YAML})"
    )


def test_the_limit_names_the_key_as_the_project_spelled_it(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="maxTotalTokens: 4000000\n")
    assert config_error().startswith(f"{PROJECT_YAML}: key 'maxTotalTokens' is 4000000, but ")


def test_a_project_may_lower_every_limit(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="pids: 1000\nmemory_mb: 4096\nparallel: 16\ntimeout: 7200\n")
    fs.create_file(
        PROJECT_YAML,
        contents=(
            "memory_mb: 4096\ncpus: 0.5\npids: 512\nparallel: 2\nmax_turns: 10\n"
            "timeout: 3600\nmax_output_tokens: 4000\nmax_total_tokens: 100000\n"
        ),
    )
    settings = load().settings
    assert (settings.memory_mb, settings.cpus, settings.pids) == (4096, 0.5, 512)
    assert (settings.parallel, settings.max_turns, settings.timeout) == (2, 10, 3600.0)
    assert (settings.max_output_tokens, settings.max_total_tokens) == (4000, 100_000)


def test_the_user_file_may_raise_limits_and_choose_the_image(
    fs: FakeFilesystem, repo: Path
) -> None:
    fs.create_file(
        USER_YAML,
        contents=(
            "memory_mb: 65536\ncpus: 8\npids: 100000\nparallel: 64\nmax_turns: 500\n"
            "timeout: 86400\nmax_output_tokens: 128000\nmax_total_tokens: 99000000\n"
            "image: mine:1\n"
        ),
    )
    settings = load().settings
    assert (settings.memory_mb, settings.cpus, settings.pids) == (65536, 8.0, 100_000)
    assert (settings.parallel, settings.max_turns, settings.timeout) == (64, 500, 86400.0)
    assert (settings.max_output_tokens, settings.max_total_tokens) == (128_000, 99_000_000)
    assert settings.image == "mine:1"


def test_an_untrusted_project_image_is_ignored_with_a_notice(
    fs: FakeFilesystem, repo: Path
) -> None:
    fs.create_file(USER_YAML, contents="image: mine:1\n")
    fs.create_file(PROJECT_YAML, contents="image: attacker/tools:latest\n")
    loaded = load()
    assert loaded.settings.image == "mine:1"
    assert loaded.sources["image"] == str(USER_YAML)
    assert loaded.warnings == [
        f"{PROJECT_YAML}: key 'image' asks for image 'attacker/tools:latest'; ignored: only "
        "your config, PLANRUN_IMAGE and --image choose the sandbox image, unless "
        "trusted_projects in ~/.planrun/config.yaml names this repository"
    ]


def test_a_trusted_project_may_choose_the_image(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="image: mine:1\ntrusted_projects: [/repo]\n")
    fs.create_file(PROJECT_YAML, contents="image: team/toolchain:3\n")
    loaded = load()
    assert loaded.settings.image == "team/toolchain:3" and not loaded.warnings
    assert load({"PLANRUN_IMAGE": "mine:2"}).settings.image == "mine:2"


def test_no_project_grants_the_work_network(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="trusted_projects: [/repo]\n")
    fs.create_file(PROJECT_YAML, contents="work_network: true\n")
    loaded = load()
    assert loaded.settings.work_network is False
    assert loaded.warnings == [
        f"{PROJECT_YAML}: key 'work_network' is ignored: only ~/.planrun/config.yaml, "
        "PLANRUN_WORK_NETWORK and flags grant it"
    ]
    assert load({"PLANRUN_WORK_NETWORK": "yes"}).settings.work_network is True


def test_the_environment_may_choose_the_image(repo: Path) -> None:
    assert load({"PLANRUN_IMAGE": "mine:2"}).settings.image == "mine:2"


def test_an_untrusted_project_cannot_choose_the_models(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="model: haiku\n")
    fs.create_file(PROJECT_YAML, contents="model: opus\nplanning_model: opus\n")
    loaded = load()
    assert loaded.planning_model_id() == "claude-haiku-4-5"
    assert loaded.sources["model"] == str(USER_YAML)
    assert loaded.sources["planning_model"] == "default"
    assert not loaded.project_trusted
    assert loaded.warnings == [
        f"{PROJECT_YAML}: key '{key}' asks for model 'opus'; ignored: only your config, "
        "PLANRUN_* variables and flags choose the model, unless trusted_projects in "
        "~/.planrun/config.yaml names this repository"
        for key in ("model", "planning_model")
    ]


def test_a_trusted_project_may_choose_the_models(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="trusted_projects: [/repo/../repo]\n")
    fs.create_file(PROJECT_YAML, contents="model: opus\nplanning_model: haiku\n")
    loaded = load()
    assert loaded.project_trusted and not loaded.warnings
    assert loaded.planning_model_id() == "claude-haiku-4-5"
    assert loaded.settings.model == "opus"


def test_a_project_cannot_trust_itself_or_raise_max_plans(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="trusted_projects: [/repo]\n")
    assert "a project config cannot set 'trusted_projects'" in config_error()
    fs.remove_object(str(PROJECT_YAML))
    fs.create_file(PROJECT_YAML, contents="max_plans: 16\n")
    assert "may only lower 'max_plans' (at most 8 from the default config)" in config_error()


def test_a_preset_cannot_expand_past_max_plans(fs: FakeFilesystem, repo: Path) -> None:
    names = ", ".join(f"p{number}" for number in range(16))
    fs.create_file(PROJECT_YAML, contents=f"perspectives:\n  all: [{names}]\n")
    with pytest.raises(ConfigError) as caught:
        load().expand_perspectives(["all"])
    assert str(caught.value) == (
        f"16 plans asked for (preset 'all' from {PROJECT_YAML}), but max_plans is 8 "
        "(default); ask for fewer perspectives or raise max_plans in ~/.planrun/config.yaml"
    )
    fs.create_file(USER_YAML, contents="max_plans: 16\n")
    assert len(load().expand_perspectives(["all"])) == 16


@pytest.mark.parametrize("name", ["a\nb", "x\x1b]0;title\x07", "<img>" * 20, ""])
def test_perspective_names_must_be_printable_and_short(repo: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="--perspective"):
        load().expand_perspectives([name])


def test_preset_members_must_be_printable(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents='perspectives:\n  x: ["a\\u001b[2Jb"]\n')
    assert "must be printable names of at most 64 characters" in config_error()


def test_an_infinite_timeout_says_it_must_be_finite(repo: Path) -> None:
    assert config_error(flags={"timeout": float("inf")}) == (
        "flag --timeout: key 'timeout' must be a number of seconds, at least 1 "
        "(a finite number), got inf"
    )


def test_a_project_may_only_remove_tools(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="allowed_tools: [Read, Grep, Glob]\n")
    fs.create_file(PROJECT_YAML, contents="allowed_tools: [Read, Bash]\n")
    assert config_error() == (
        f"{PROJECT_YAML}: key 'allowed_tools' adds Bash, but a project config may only "
        f"remove tools (allowed by the user config {USER_YAML}: Read, Grep, Glob)"
    )
    PROJECT_YAML.unlink()
    fs.create_file(PROJECT_YAML, contents="allowed_tools: [Grep]\n")
    assert load().settings.allowed_tools == ["Grep"]


def test_a_project_cannot_enable_planning_the_user_disabled(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(USER_YAML, contents="planning_enabled: false\n")
    fs.create_file(PROJECT_YAML, contents="planning_enabled: true\n")
    assert config_error() == (
        f"{PROJECT_YAML}: key 'planning_enabled': a project config cannot enable planning; "
        f"the user config {USER_YAML} disables it"
    )


OUTSIDE = "leads outside the project (through '..' or a symlink)"


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("~", "starts with '~'"),
        ("~/.ssh", "starts with '~'"),
        ("/etc", "is an absolute path"),
        ("/repo/docs", "is an absolute path"),
        ("../../../root", OUTSIDE),
        ("docs/../../home", OUTSIDE),
        ("escape", OUTSIDE),
        ("escape/.ssh", OUTSIDE),
        ("loop", OUTSIDE),
    ],
)
def test_a_project_extra_dir_must_stay_inside_the_project(
    fs: FakeFilesystem, repo: Path, entry: str, problem: str
) -> None:
    fs.create_dir(REPO / "docs")
    fs.create_dir("/home/dev/.ssh")
    fs.create_symlink(REPO / "escape", "/home/dev")
    fs.create_symlink(REPO / "loop", REPO / "loop")
    fs.create_file(PROJECT_YAML, contents=f"extra_dirs: [docs, {json.dumps(entry)}]\n")
    assert config_error() == (
        f"{PROJECT_YAML}: key 'extra_dirs' names {entry!r}, which {problem}; "
        f"a project config may only name directories inside the project {REPO}"
    )


def test_a_project_extra_dir_may_name_any_sub_tree(fs: FakeFilesystem, repo: Path) -> None:
    for directory in ("docs/api", "src", "vendor/lib"):
        fs.create_dir(REPO / directory)
    fs.create_symlink(REPO / "lib", REPO / "vendor" / "lib")
    fs.create_file(PROJECT_YAML, contents="extra_dirs: [docs/api, docs/../src, lib, .]\n")
    assert extra_dirs(load()) == ["/repo/docs/api", "/repo/src", "/repo/vendor/lib", "/repo"]


def test_the_user_may_name_extra_dirs_anywhere(
    fs: FakeFilesystem, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs.create_dir("/home/dev/notes")
    fs.create_dir("/etc")
    fs.create_file(USER_YAML, contents="extra_dirs: ['~/notes', /etc, ../../..]\n")
    monkeypatch.setenv("HOME", "/home/dev")
    assert extra_dirs(load()) == ["/home/dev/notes", "/etc", "/"]
    os.chdir("/repo")
    assert extra_dirs(load(flags={"extra_dirs": ["/etc", ".."]})) == ["/etc", "/"]


# Config files planrun must not hang on or read without bound


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


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_config_that_is_not_a_regular_file_is_refused_without_hanging(
    tmp_path: Path, kind: str
) -> None:
    config = tmp_path / "repo" / ".planrun" / "config.yaml"
    config.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(config)
    else:
        config.symlink_to("/dev/zero")
    with deadline(5), pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "repo", env={}, home=tmp_path / "home")
    problem = (
        "it is not a regular file"
        if kind == "fifo"
        else f"it leads outside {tmp_path / 'repo'} (to /dev/zero); planrun does not follow it"
    )
    assert str(caught.value) == f"{config}: cannot read the config file: {problem}"


def test_a_project_config_linking_to_a_host_file_is_refused(tmp_path: Path) -> None:
    host = tmp_path / "host.yaml"
    host.write_text("parallel: 1\n")
    config = tmp_path / "repo" / ".planrun" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.symlink_to(host)
    with pytest.raises(ConfigError, match=r"leads outside .* planrun does not follow it"):
        load_settings(tmp_path / "repo", env={}, home=tmp_path / "home")


def test_a_config_over_one_mib_is_refused(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="#" * (1024 * 1024 + 1))
    assert config_error() == (
        f"{PROJECT_YAML}: cannot read the config file: it is 1048577 bytes; the limit is 1048576"
    )


# planrun config show


def test_config_show_prints_values_and_sources(
    fs: FakeFilesystem, repo: Path, planrun_home: Path
) -> None:
    fs.create_file(planrun_home / "config.yaml", contents="model: opus\n")
    fs.create_file(PROJECT_YAML, contents="parallel: 2\nextraDirs: [docs, specs]\n")
    result = CliRunner().invoke(
        cli, ["config", "show", "--repo", str(REPO)], env={"PLANRUN_MAX_TURNS": "9"}
    )
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines() if line}
    assert rows["model"].split() == ["model", "opus", str(planrun_home / "config.yaml")]
    assert rows["parallel"].split() == ["parallel", "2", str(PROJECT_YAML)]
    assert rows["extra_dirs"].split("  ")[0] == "extra_dirs"
    assert "docs, specs" in rows["extra_dirs"]
    assert rows["max_turns"].endswith("environment variable PLANRUN_MAX_TURNS")
    assert rows["timeout"].split() == ["timeout", "1800.0", "default"]
    # Aligned columns: every source starts in the same column.
    starts = {line.index("default") for line in result.output.splitlines() if "default" in line}
    assert len(starts) == 1
    assert rows["files"] == f"files read: {planrun_home / 'config.yaml'}, {PROJECT_YAML}"


def test_config_show_json(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="planning_enabled: false\n")
    result = CliRunner().invoke(cli, ["config", "show", "--repo", str(REPO), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["settings"]["planning_enabled"] is False
    assert document["settings"]["allowed_tools"] == list(READ_ONLY_TOOLS)
    assert document["sources"]["planning_enabled"] == str(PROJECT_YAML)
    assert document["sources"]["model"] == "default"
    assert document["files"] == [str(PROJECT_YAML)]


def test_config_show_hides_the_tokens_of_mcp_servers(
    fs: FakeFilesystem, repo: Path, planrun_home: Path
) -> None:
    fs.create_file(
        planrun_home / "config.yaml",
        contents=(
            "mcp_servers:\n"
            "  docs: {url: 'https://mcp.example.com', headers: {Authorization: 'Bearer s3cr3t'}}\n"
            "  gh: {command: gh-mcp, env: {GITHUB_TOKEN: '${GITHUB_TOKEN}', LEVEL: ghp_abc}}\n"
        ),
    )
    for args in (["config", "show", "--repo", str(REPO)], ["config", "show", "--json"]):
        result = CliRunner().invoke(cli, [*args, "--repo", str(REPO)] if "--json" in args else args)
        assert result.exit_code == 0, result.output
        assert "s3cr3t" not in result.output and "ghp_abc" not in result.output
        assert "${GITHUB_TOKEN}" in result.output and "mcp.example.com" in result.output


def test_config_show_reports_a_bad_config_in_one_line(fs: FakeFilesystem, repo: Path) -> None:
    fs.create_file(PROJECT_YAML, contents="parallel: four\n")
    result = CliRunner().invoke(cli, ["config", "show", "--repo", str(REPO)])
    # A ConfigError is one of the CLI's USAGE_ERRORS: the user fixes the setup, exit status 2.
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"Error: {PROJECT_YAML}: key 'parallel' must be a positive integer, got 'four'\n"
    )
    assert "Traceback" not in result.output


def test_every_setting_has_exactly_one_rule() -> None:
    from dataclasses import fields

    from sandbox_runner.config_settings import Settings
    from sandbox_runner.config_values import CHECKS

    assert set(CHECKS) == {field.name for field in fields(Settings)}


def test_the_api_timeout_and_retries_are_settings(tmp_path: Path) -> None:
    """The API timeout and the retry count were fixed."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("api_timeout: 90\napi_retries: 2\n")
    loaded = load_settings(None, home=home, env={"PLANRUN_API_RETRIES": "0"})
    assert (loaded.settings.api_timeout, loaded.settings.api_retries) == (90.0, 0)
    assert loaded.sources["api_retries"] == "environment variable PLANRUN_API_RETRIES"
    with pytest.raises(ConfigError, match="'api_retries' must be a whole number, 0 or more"):
        load_settings(None, home=home, env={"PLANRUN_API_RETRIES": "-1"})


def test_synthesis_is_on_by_default_and_each_source_can_turn_it_off(
    fs: FakeFilesystem, repo: Path
) -> None:
    loaded = load()
    assert loaded.settings.synthesis is True and loaded.sources["synthesis"] == "default"
    off = load(env={"PLANRUN_SYNTHESIS": "no"})
    assert off.settings.synthesis is False
    assert off.sources["synthesis"] == "environment variable PLANRUN_SYNTHESIS"
    assert load(flags={"synthesis": False}).sources["synthesis"] == "flag --no-synthesis"
    fs.create_file(PROJECT_YAML, contents="synthesis: false\n")
    assert load().settings.synthesis is False


def test_a_project_cannot_turn_on_a_synthesis_the_user_turned_off(
    fs: FakeFilesystem, repo: Path
) -> None:
    fs.create_file(USER_YAML, contents="synthesis: false\n")
    fs.create_file(PROJECT_YAML, contents="synthesis: true\n")
    assert config_error() == (
        f"{PROJECT_YAML}: key 'synthesis': a project config cannot enable the synthesis; "
        f"the user config {USER_YAML} disables it"
    )
