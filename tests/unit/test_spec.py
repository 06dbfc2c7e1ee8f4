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
from sandbox_runner.sandbox.container_options import container_options, toolserver_command
from sandbox_runner.sandbox.host_paths import (
    prepare_plan_dir,
    resolve_workspace,
    sandbox_user,
    submounts,
)
from sandbox_runner.sandbox.spec import Mount, Profile, SandboxSpec, extra_mount_points


def make_spec(
    tmp_path: Path,
    plan_dir: Path | str | None = "default",
    extra_dirs: tuple[Path, ...] = (),
    **overrides: Any,
) -> SandboxSpec:
    """A plan sandbox's spec on tmp_path/repo (plan_dir=None: a probe's)."""
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    image = "planrun-sandbox:test"
    if plan_dir is None:
        return SandboxSpec.probe(workspace, image, extra_dirs, **overrides)
    plans = tmp_path / "plans" if plan_dir == "default" else Path(plan_dir)
    return SandboxSpec.plan(workspace, plans, image, extra_dirs, **overrides)


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
    assert targets["/opt/planrun/toolserver"].endswith("sandbox/toolserver")


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
    assert options["cpu_shares"] == 1024
    probe = SandboxSpec.probe(tmp_path / "repo", "planrun-sandbox:test", limits=limits)
    # The check before a run yields the CPU to the plans' first tool calls.
    assert container_options(probe, user=(1000, 1000))["cpu_shares"] == 128
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
    assert "ReadOnlyForceRecursive" not in by_target["/opt/planrun/toolserver"]


# ------------------------------------------------------------------------------ profiles

# What makes a sandbox hard to escape; a work sandbox must not differ from a plan one here.
HARDENING = (
    "user",
    "environment",
    "read_only",
    "network_mode",
    "cap_drop",
    "security_opt",
    "pids_limit",
    "mem_limit",
    "memswap_limit",
    "nano_cpus",
    "cpu_shares",
    "ulimits",
    "init",
    "detach",
    "auto_remove",
    "ipc_mode",
    "log_config",
)


def work_spec(tmp_path: Path, **overrides: Any) -> SandboxSpec:
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    return SandboxSpec.work(workspace, "planrun-sandbox:test", **overrides)


def mounts_by_target(options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {mount["Target"]: mount for mount in options["mounts"]}


def test_a_work_sandbox_writes_the_workspace_and_is_otherwise_a_plan_sandbox(
    tmp_path: Path,
) -> None:
    extra = tmp_path / "docs"
    plan = container_options(make_spec(tmp_path, extra_dirs=(extra,)), user=(1000, 1000))
    work = container_options(work_spec(tmp_path, extra_dirs=(extra,)), user=(1000, 1000))
    assert {key: work[key] for key in HARDENING} == {key: plan[key] for key in HARDENING}
    assert work["network_mode"] == "none" and work["cap_drop"] == ["ALL"]
    mounts = mounts_by_target(work)
    assert [target for target, mount in mounts.items() if not mount["ReadOnly"]] == ["/workspace"]
    assert mounts["/ro/docs"]["ReadOnly"] is True
    assert "/etc/resolv.conf" in mounts
    # Its /tmp runs what a build put there; nothing else about /tmp changes.
    assert work["tmpfs"]["/tmp"].split(",") == [
        "exec" if option == "noexec" else option for option in plan["tmpfs"]["/tmp"].split(",")
    ]
    # Its /plan is only the tool server's scratch place, never copied out.
    assert "size=1m" in work["tmpfs"]["/plan"] and "nr_inodes=16" in work["tmpfs"]["/plan"]


def test_a_probe_mounts_nothing_writable_and_keeps_tmp_noexec(tmp_path: Path) -> None:
    options = container_options(make_spec(tmp_path, plan_dir=None), user=(1000, 1000))
    assert all(mount["ReadOnly"] for mount in options["mounts"])
    assert "noexec" in options["tmpfs"]["/tmp"]
    assert options["network_mode"] == "none"


def test_only_a_work_sandbox_can_be_granted_the_network(tmp_path: Path) -> None:
    options = container_options(work_spec(tmp_path, network=True), user=(1000, 1000))
    assert options["network_mode"] == "bridge"
    # Docker's copy of the host's resolver configuration is what lets it resolve names.
    assert "/etc/resolv.conf" not in mounts_by_target(options)
    assert options["cap_drop"] == ["ALL"]
    plan = make_spec(tmp_path)
    with pytest.raises(ValueError, match="plan sandbox has no network"):
        SandboxSpec(plan.mounts, plan.image, Profile.PLAN, plan.plan_dir, network=True)


def test_a_writable_bind_is_never_forced_recursive(tmp_path: Path) -> None:
    """Docker refuses ReadOnlyForceRecursive on a writable bind."""
    options = container_options(work_spec(tmp_path), (1, 1), recursive_read_only=True)
    assert "ReadOnlyForceRecursive" not in mounts_by_target(options)["/workspace"]["BindOptions"]


def test_the_workspace_and_extra_dirs_are_read_from_the_mounts(tmp_path: Path) -> None:
    extra = tmp_path / "docs"
    spec = make_spec(tmp_path, extra_dirs=(extra,))
    assert spec.profile is Profile.PLAN
    assert spec.workspace == tmp_path / "repo"
    assert spec.extra_dirs == (extra,)
    assert spec.mounts == (
        Mount(tmp_path / "repo", "/workspace"),
        Mount(extra, "/ro/docs"),
    )
    assert "--extra-dir" in toolserver_command(spec) and "/ro/docs" in toolserver_command(spec)


@pytest.mark.parametrize(
    ("profile", "mounts", "plan_dir", "message"),
    [
        (Profile.PLAN, [("/workspace", True)], "plans", "mounts nothing writable"),
        (Profile.PROBE, [("/workspace", False), ("/ro/x", True)], None, "nothing writable"),
        (Profile.PLAN, [("/workspace", False)], None, "plan directory belongs"),
        (Profile.WORK, [("/workspace", True)], "plans", "plan directory belongs"),
        (Profile.PROBE, [("/ro/x", False)], None, "exactly one mount at /workspace"),
        (Profile.WORK, [("/workspace", True), ("/workspace", False)], None, "exactly one"),
        (Profile.WORK, [("/workspace", True), ("/ro/a", False), ("/ro/a", False)], None, "share"),
        (Profile.WORK, [("/workspace", True), ("/plan", False)], None, "cannot go to /plan"),
        (Profile.WORK, [("/workspace", True), ("relative", False)], None, "cannot go to"),
    ],
)
def test_a_spec_that_breaks_its_profile_is_refused(
    tmp_path: Path,
    profile: Profile,
    mounts: list[tuple[str, bool]],
    plan_dir: str | None,
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        SandboxSpec(
            tuple(Mount(tmp_path, target, writable) for target, writable in mounts),
            "planrun-sandbox:test",
            profile,
            tmp_path / plan_dir if plan_dir else None,
        )


def test_every_profile_mounts_clean_git_configs_over_the_real_ones(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git" / "modules" / "lib").mkdir(parents=True)
    token = "ghs_" + "x" * 36
    dirty = f'[remote "origin"]\n\turl = https://x:{token}@github.com/o/r.git\n'
    (repo / ".git" / "config").write_text(dirty)
    (repo / ".git" / "modules" / "lib" / "config").write_text(
        f'[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic {token}\n'
    )
    plans = tmp_path / "plans"
    for spec in (
        SandboxSpec.plan(repo, plans, "img"),
        SandboxSpec.probe(repo, "img"),
        SandboxSpec.work(repo, "img", protected=(".git",)),
    ):
        configs = {m.target: m for m in spec.mounts if m.target.endswith("config")}
        assert set(configs) == {"/workspace/.git/config", "/workspace/.git/modules/lib/config"}
        for mount in configs.values():
            assert not mount.writable and token not in mount.source.read_text()
        assert "github.com/o/r.git" in configs["/workspace/.git/config"].source.read_text()
        assert spec.extra_mounts == ()


def test_git_config_copies_never_follow_a_link_out_of_the_repository(tmp_path: Path) -> None:
    repo, elsewhere = tmp_path / "repo", tmp_path / "home"
    (repo / ".git").mkdir(parents=True)
    (elsewhere / "project").mkdir(parents=True)
    (elsewhere / "project" / "config").write_text('[remote "o"]\n\turl = https://secret.example\n')
    (repo / ".git" / "worktrees").symlink_to(elsewhere)
    spec = SandboxSpec.probe(repo, "img")
    assert [m.target for m in spec.mounts] == ["/workspace"]


@pytest.mark.parametrize("plan_dir", ["default", None])
def test_a_git_seed_is_mounted_read_only_and_named_to_the_tool_server(
    tmp_path: Path, plan_dir: str | None
) -> None:
    seed = tmp_path / "seed-dir"
    seed.mkdir()
    options = container_options(make_spec(tmp_path, plan_dir, git_seed=seed), user=(1000, 1000))
    mounts = [m for m in options["mounts"] if m["Target"] == "/opt/planrun/git-seed"]
    assert [(m["Source"], m["ReadOnly"]) for m in mounts] == [(str(seed), True)]
    command = options["command"]
    assert command[command.index("--git-seed") + 1] == "/opt/planrun/git-seed/seed.json"
    unseeded = container_options(make_spec(tmp_path, plan_dir), user=(1000, 1000))
    assert "--git-seed" not in unseeded["command"]
    assert "/opt/planrun/git-seed" not in {m["Target"] for m in unseeded["mounts"]}
    with pytest.raises(ValueError, match="cannot go to"):
        SandboxSpec(
            (Mount(tmp_path / "repo", "/workspace"), Mount(tmp_path, "/opt/planrun/git-seed")),
            "planrun-sandbox:test",
            Profile.PROBE,
        )


def test_the_git_guard_walks_every_writable_tmpfs_besides_the_workspace(tmp_path: Path) -> None:
    """A command can lay a repository out in /tmp or an image's VOLUME (a tmpfs here), and
    the next command can run git in it: the tool server's guard walks them (and /plan)."""
    spec = make_spec(tmp_path)
    options = container_options(spec, user=(1000, 1000), image_volumes=("/var/cache",))
    command = options["command"]
    guarded = [command[n + 1] for n, word in enumerate(command) if word == "--guard-dir"]
    assert sorted(guarded) == ["/tmp", "/var/cache"]
    assert set(guarded) | {"/plan"} == set(options["tmpfs"])
