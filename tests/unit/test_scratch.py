"""Scratch runs without Docker: what their commands may do, the settings that turn them
on, the container options of their layer, the engines that cannot have one, and the
commands a plan records."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.config import load_settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import Limits
from sandbox_runner.paths import WORKSPACE_MOUNT
from sandbox_runner.plans.report import build_report
from sandbox_runner.plans.results import CommandRun, PlanResult
from sandbox_runner.sandbox.container_options import container_options
from sandbox_runner.sandbox.scratch import capacity_mb, engine_problem, path_problem
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.tools.permissions import PermissionMode, Rules
from tests.unit.test_policy import allowed, call, decide, denied
from tests.unit.test_report import make_record, make_result

SCRATCH_RULES = Rules(plan_file="/plan/speed.md", scratch=True)


@pytest.mark.parametrize("command", ["mkdir x", "touch x", "rm -rf build"])
def test_without_scratch_a_write_is_still_refused_with_guidance(command: str) -> None:
    message = denied(decide(call("Bash", command=command)))
    assert message.startswith("Plan mode is read-only") and "Leave plan mode" in message


@pytest.mark.parametrize(
    "command",
    [
        "mkdir build && echo x > build/out",
        "python3 -m unittest -v",
        "make test",
        "go list ./...",
        "cargo metadata --format-version 1 > /tmp/meta.json",
        "npm test 2>&1 | tail -20",
        "$(printf rm) -rf build",
        "git status && git stash",
        "pip list",
        "npm test",
        "go vet ./...",
    ],
)
def test_in_scratch_commands_that_write_run(command: str) -> None:
    request = allowed(decide(call("Bash", command=command), rules=SCRATCH_RULES))
    assert request.args["command"] == command


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("curl https://example.com", "network"),
        ("env HTTPS_PROXY=x wget -q https://example.com", "network"),
        ("timeout 5 ssh host true", "network"),
        ("git -C . push origin main", "remote"),
        ("git fetch", "remote"),
        ("sudo make install", "privileges"),
        ("mount -t tmpfs none /workspace", "privileges"),
        ("docker run alpine", "container engine"),
        ("vim README.md", "interactive"),
        ("cat < /dev/tcp/10.0.0.1/80", "network connection"),
        ("pip install requests", "downloads packages"),
        ("python3 -m pip install -e .", "downloads packages"),
        ("npm ci", "downloads packages"),
    ],
)
def test_in_scratch_what_would_leave_the_sandbox_is_refused(command: str, why: str) -> None:
    message = denied(decide(call("Bash", command=command), rules=SCRATCH_RULES))
    assert why in message and "scratch sandbox" in message


def test_in_scratch_write_and_edit_still_reach_only_the_plan_file() -> None:
    refused = denied(
        decide(call("Write", file_path="src/app.py", content="x"), rules=SCRATCH_RULES)
    )
    assert "only allowed on the plan file" in refused
    allowed(
        decide(call("Write", file_path="/plan/speed.md", content="# plan"), rules=SCRATCH_RULES)
    )


def test_scratch_rules_change_nothing_outside_plan_mode() -> None:
    decision = decide(call("Bash", command="mkdir x"), mode=PermissionMode.DEFAULT,
                      rules=SCRATCH_RULES)  # fmt: skip
    assert type(decision).__name__ == "Ask"


def test_the_setting_from_flag_environment_and_files(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".planrun").mkdir(parents=True)
    home.mkdir()
    assert not load_settings(project, env={}, home=home).scratch
    assert load_settings(project, flags={"plan_commands": "scratch"}, env={}, home=home).scratch
    env = {"PLANRUN_PLAN_COMMANDS": "scratch", "PLANRUN_SCRATCH_MB": "64"}
    loaded = load_settings(project, env=env, home=home)
    assert loaded.scratch and loaded.limits().scratch_mb == 64
    with pytest.raises(ConfigError, match="must be read-only or scratch"):
        load_settings(project, flags={"plan_commands": "yes"}, env={}, home=home)


def test_a_project_may_turn_scratch_off_and_lower_its_size_only(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".planrun").mkdir(parents=True)
    (home).mkdir()
    config = project / ".planrun" / "config.yaml"
    config.write_text("plan_commands: scratch\n")
    with pytest.raises(ConfigError, match="cannot turn scratch runs on"):
        load_settings(project, env={}, home=home)
    (home / "config.yaml").write_text("plan_commands: scratch\n")
    assert load_settings(project, env={}, home=home).scratch  # the user chose it
    config.write_text("plan_commands: read-only\nscratch_mb: 128\n")
    loaded = load_settings(project, env={}, home=home)
    assert not loaded.scratch and loaded.limits().scratch_mb == 128
    config.write_text("scratch_mb: 4096\n")
    with pytest.raises(ConfigError, match="may only lower 'scratch_mb'"):
        load_settings(project, env={}, home=home)


def test_the_layer_takes_at_most_half_the_memory() -> None:
    assert capacity_mb(Limits(memory_mb=1024, scratch_mb=512)) == 512
    assert capacity_mb(Limits(memory_mb=1024, scratch_mb=4096)) == 512
    assert capacity_mb(Limits(memory_mb=256, scratch_mb=8)) == 8


def test_the_workspace_is_the_layer_and_the_clean_git_config_lies_over_it(
    tmp_path: Path,
) -> None:
    repo, plan_dir = tmp_path / "repo", tmp_path / "plan"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[http]\n\textraheader = AUTHORIZATION: basic x\n")
    plan_dir.mkdir()
    spec = SandboxSpec.plan(repo, plan_dir, "image:1", scratch=True)
    options = container_options(spec, (1000, 1000), workspace_volume="planrun-scratch-x-overlay")
    by_target = {mount["Target"]: mount for mount in options["mounts"]}
    workspace = by_target[WORKSPACE_MOUNT]
    assert workspace["Type"] == "volume" and workspace["Source"] == "planrun-scratch-x-overlay"
    assert workspace["VolumeOptions"] == {"NoCopy": True}
    config = by_target[f"{WORKSPACE_MOUNT}/.git/config"]
    assert config["Type"] == "bind" and config["ReadOnly"]
    assert "extraheader" not in Path(config["Source"]).read_text()
    assert "--scratch-layer" in options["command"] and "--writable" not in options["command"]
    assert options["network_mode"] == "none" and options["read_only"]
    plain = container_options(SandboxSpec.plan(repo, plan_dir, "image:1"), (1000, 1000))
    assert {m["Type"] for m in plain["mounts"]} == {"bind"}
    assert "--scratch-layer" not in plain["command"]


def test_only_a_plan_sandbox_has_a_layer(tmp_path: Path) -> None:
    probe = SandboxSpec.probe(tmp_path, "image:1")
    with pytest.raises(ValueError, match="only a plan sandbox"):
        replace(probe, scratch=True)


class FakeEngine:
    """What `docker info` and `docker version` say, and nothing else."""

    def __init__(self, security: list[str], components: list[str] | None = None) -> None:
        self.security = security
        self.components = components or ["Engine"]

    def info(self) -> dict[str, Any]:
        return {"SecurityOptions": self.security}

    def version(self) -> dict[str, Any]:
        return {"Components": [{"Name": name} for name in self.components]}


@pytest.mark.parametrize(
    ("engine", "named"),
    [
        (FakeEngine(["name=seccomp,profile=default", "name=rootless"]), "rootless Docker"),
        (FakeEngine([], ["Podman Engine"]), "Podman"),
        (FakeEngine(["name=userns"]), "user namespace remapping"),
    ],
)
def test_engines_that_cannot_mount_the_layer_are_refused_in_one_line(
    engine: FakeEngine, named: str
) -> None:
    problem = engine_problem(engine)
    assert problem is not None and named in problem and "\n" not in problem
    assert "without --scratch" in problem
    assert engine_problem(FakeEngine(["name=seccomp,profile=default"])) is None


@pytest.mark.parametrize("name", ["a,b", "a:b", "a\\b"])
def test_a_path_the_overlay_options_cannot_carry_is_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.mkdir()
    if os.geteuid() == 0:
        os.chown(path, 4321, 4321)  # a root-owned one is refused for its owner first
    problem = path_problem(path)
    assert problem is not None and "overlay options" in problem


def test_commands_run_survive_front_matter_that_was_edited() -> None:
    runs = [CommandRun("make", 2), CommandRun("sleep 999", 137, timed_out=True)]
    assert [run.to_dict() for run in runs] == [
        {"command": "make", "exit_code": 2},
        {"command": "sleep 999", "exit_code": 137, "timed_out": True},
    ]
    data = {"commands_run": [runs[0].to_dict(), {"command": 3}, "x", {"command": "ls"}]}
    assert PlanResult.from_dict(data).commands_run == [runs[0], CommandRun("ls", None)]


def test_the_reports_list_a_scratch_runs_commands(tmp_path: Path) -> None:
    result = make_result("speed", tmp_path, tmp_path)
    result.commands_run = [CommandRun("python3 -m unittest", 1), CommandRun("make | x", 0)]
    scratch = build_report(make_record(tmp_path, [result], ["speed"], scratch=True))
    data = json.loads(scratch.to_json())
    assert data["plan_commands"] == "scratch"
    assert data["plans"][0]["commands_run"][0] == {"command": "python3 -m unittest", "exit_code": 1}
    markdown = scratch.to_markdown()
    assert "## Commands run" in markdown and "`python3 -m unittest` (exit 1)" in markdown
    assert "Commands run" in scratch.to_html() and "make | x" in scratch.to_html()
    plain = build_report(make_record(tmp_path, [result], ["speed"]))
    assert json.loads(plain.to_json())["plan_commands"] == "read-only"
    assert "## Commands run" not in plain.to_markdown()


def test_a_scratch_session_lets_plan_mode_commands_write_and_says_so(tmp_path: Path) -> None:
    from sandbox_runner.agents.registry import Registry
    from sandbox_runner.limits import RunLimits
    from sandbox_runner.session.session import Session
    from sandbox_runner.session.state import SessionStore
    from tests.unit.test_session import FakeUI, LocalSandboxes, Models

    workspace = tmp_path / "repo"
    (workspace / "src").mkdir(parents=True)
    sessions = []
    for scratch in (True, False):
        store, state = SessionStore.create(workspace, "claude-test")
        session = Session(
            store,
            state,
            workspace=workspace,
            registry=Registry.load(workspace),
            sandboxes=LocalSandboxes(workspace, tmp_path),
            model=Models({}),
            ui=FakeUI(),
            limits=RunLimits(max_turns=5),
            scratch=scratch,
        )
        session.set_mode(PermissionMode.PLAN)
        sessions.append(session)
    try:
        on, off = (session.conversations.loop("plan").config for session in sessions)
        assert on.rules().scratch and not off.rules().scratch
        prompts = [c.system_prompt if isinstance(c.system_prompt, str) else c.system_prompt()
                   for c in (on, off)]  # fmt: skip
        assert "Scratch Sandbox" in prompts[0] and "Scratch Sandbox" not in prompts[1]
    finally:
        for session in sessions:
            session.close()
