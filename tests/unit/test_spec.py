"""Mount configuration, limits and path handling of a sandbox, without Docker."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.errors import WorkspaceError
from sandbox_runner.limits import Limits
from sandbox_runner.sandbox.spec import (
    SandboxSpec,
    container_options,
    extra_mount_points,
    prepare_plan_dir,
    resolve_workspace,
    sandbox_user,
    submounts,
)


def make_spec(tmp_path: Path, **overrides: Any) -> SandboxSpec:
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    spec = SandboxSpec(workspace, tmp_path / "plans", "planrun-sandbox:test")
    return replace(spec, **overrides)


def test_no_host_directory_is_writable_and_plan_is_a_capped_tmpfs(tmp_path: Path) -> None:
    extra = tmp_path / "docs"
    options = container_options(make_spec(tmp_path, extra_dirs=(extra,)), user=(1000, 1000))
    assert [m["Target"] for m in options["mounts"] if not m["ReadOnly"]] == []
    plan = options["tmpfs"]["/plan"].split(",")
    for option in ("noexec", "nosuid", "nodev", "size=64m", "nr_inodes=10000", "uid=1000"):
        assert option in plan
    targets = {m["Target"]: m["Source"] for m in options["mounts"]}
    assert Path(targets["/etc/resolv.conf"]).read_text().startswith("#")
    assert targets["/workspace"] == str(tmp_path / "repo")
    assert targets["/ro/docs"] == str(extra)
    assert targets["/opt/planrun/toolserver.py"].endswith("toolserver.py")


def test_hardening_options(tmp_path: Path) -> None:
    options = container_options(make_spec(tmp_path), user=(1000, 1000))
    assert options["read_only"] is True
    assert options["network_mode"] == "none"
    assert options["cap_drop"] == ["ALL"]
    assert options["security_opt"][0] == "no-new-privileges:true"
    profile = json.loads(options["security_opt"][1].removeprefix("seccomp="))
    denied = profile["syscalls"][0]["names"]
    assert {"ptrace", "io_uring_setup", "userfaultfd", "process_vm_readv"} <= set(denied)
    assert options["ipc_mode"] == "none"
    assert options["log_config"]["Type"] == "none"
    # A container whose planrun is gone reads end-of-file, stops and removes itself.
    assert options["detach"] is False and options["auto_remove"] is True  # StdinOnce
    assert options["environment"] == {}
    assert options["init"] is False  # the tool server is PID 1 (see container_options)
    assert options["user"] == "1000:1000"
    assert "privileged" not in options and "ports" not in options
    assert "noexec" in options["tmpfs"]["/tmp"] and "size=64m" in options["tmpfs"]["/tmp"]
    assert not any("docker.sock" in m["Source"] for m in options["mounts"])


def test_limits_reach_the_container(tmp_path: Path) -> None:
    limits = Limits(memory_mb=256, cpus=0.5, pids=64, tmp_mb=16, plan_dir_mb=8)
    options = container_options(make_spec(tmp_path, limits=limits), user=(1000, 1000))
    assert options["mem_limit"] == options["memswap_limit"] == "256m"
    assert options["nano_cpus"] == 500_000_000
    assert options["pids_limit"] == 64
    assert "size=16m" in options["tmpfs"]["/tmp"]
    fsize = next(u for u in options["ulimits"] if u["Name"] == "fsize")
    assert fsize["Hard"] == 8 * 1024 * 1024
    assert "--max-plan-bytes" in options["command"]
    assert "size=8m" in options["tmpfs"]["/plan"]


def test_a_probe_sandbox_gets_a_tiny_plan_directory(tmp_path: Path) -> None:
    options = container_options(make_spec(tmp_path, plan_dir=None), user=(1000, 1000))
    assert "size=1m" in options["tmpfs"]["/plan"] and "nr_inodes=16" in options["tmpfs"]["/plan"]


@pytest.mark.parametrize(
    "field, value",
    [("memory_mb", 0), ("memory_mb", 8), ("pids", 0), ("cpus", 0.0), ("cpus", 4096.0)],
)
def test_nonsense_limits_are_refused(field: str, value: float) -> None:
    change: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=field.split("_")[0]):
        replace(Limits(), **change)


def test_labels_identify_session_agent_and_owner(tmp_path: Path) -> None:
    labels = container_options(make_spec(tmp_path, session="s1", agent="Plan"), (1, 1))["labels"]
    assert labels["io.planrun.managed"] == "1"
    assert labels["io.planrun.session"] == "s1"
    assert labels["io.planrun.agent"] == "Plan"
    assert labels["io.planrun.pid"] == str(os.getpid())


def test_never_root_inside() -> None:
    uid, gid = sandbox_user()
    assert uid != 0 and gid != 0


def test_extra_mount_points_are_unique() -> None:
    pairs = extra_mount_points((Path("/a/docs"), Path("/b/docs"), Path("/c/my dir")))
    assert [target for _, target in pairs] == ["/ro/docs", "/ro/docs-2", "/ro/my_dir"]


def test_missing_workspace(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="does not exist"):
        resolve_workspace(tmp_path / "nope")


def test_workspace_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(WorkspaceError, match="not a directory"):
        resolve_workspace(tmp_path / "file")


def test_workspace_is_resolved_through_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert resolve_workspace(tmp_path / "link") == (tmp_path / "real").resolve()


def test_plan_dir_is_created(tmp_path: Path) -> None:
    plan_dir = prepare_plan_dir(tmp_path / "a" / "b")
    assert plan_dir.is_dir()


def test_plan_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(WorkspaceError, match="not a directory"):
        prepare_plan_dir(tmp_path / "f")


def test_plan_dir_under_a_file_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(WorkspaceError, match="cannot create plan directory"):
        prepare_plan_dir(tmp_path / "f" / "plans")


def test_plan_dir_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="inside the workspace"):
        prepare_plan_dir(tmp_path / "plans", workspace=tmp_path)


def test_plan_dir_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "plans").symlink_to(tmp_path / "target")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        prepare_plan_dir(tmp_path / "plans")


def test_submounts_below_a_directory_are_found(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "22 1 8:1 / / rw - ext4 /dev/vda rw\n"
        "30 22 0:40 / /srv/repo/cache rw - tmpfs tmpfs rw\n"
        "31 22 0:41 / /srv/repo\\040two/x rw - tmpfs tmpfs rw\n"
        "32 22 0:42 / /srv/repository rw - tmpfs tmpfs rw\n"
        "33 22 0:43 / /srv/repo rw - tmpfs tmpfs rw\n"
    )
    assert submounts(Path("/srv/repo"), mountinfo) == ["/srv/repo/cache"]
    assert submounts(Path("/srv/repo two"), mountinfo) == ["/srv/repo two/x"]
    assert submounts(Path("/elsewhere"), mountinfo) == []


def test_recursive_read_only_binds_when_the_engine_supports_it(tmp_path: Path) -> None:
    options = container_options(make_spec(tmp_path), (1, 1), recursive_read_only=True)
    by_target = {m["Target"]: m["BindOptions"] for m in options["mounts"]}
    assert by_target["/workspace"]["ReadOnlyForceRecursive"] is True
    assert "ReadOnlyForceRecursive" not in by_target["/opt/planrun/toolserver.py"]
