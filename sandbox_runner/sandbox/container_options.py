"""The options a sandbox's container is created with: its mounts, tmpfs, limits,
hardening and labels, and the tool server it runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sandbox_runner import __version__
from sandbox_runner.paths import PLAN_MOUNT, WORKSPACE_MOUNT
from sandbox_runner.sandbox.host_paths import sandbox_user
from sandbox_runner.sandbox.seccomp import seccomp_profile
from sandbox_runner.sandbox.spec import (
    GIT_SEED_FILE,
    GIT_SEED_MOUNT,
    RESOLV_CONF_MOUNT,
    TOOLSERVER_MOUNT,
    Profile,
    SandboxSpec,
)

TOOLSERVER_SOURCE = Path(__file__).with_name("toolserver")
# Mounted over Docker's copy of the host's resolver configuration: nothing to resolve with.
EMPTY_RESOLV_CONF = Path(__file__).with_name("empty_resolv.conf")
# The /plan of a probe sandbox: enough for the tool server, too small to matter.
PROBE_PLAN_MB = 1
PROBE_PLAN_ENTRIES = 16
DEFAULT_CPU_SHARES = 1024
PROBE_CPU_SHARES = 128
"""A probe's weight against the plans' sandboxes (Docker's default is 1024) when the CPU
is short: `git status` before a run waits, the model's first tool calls do not."""
LABEL_PREFIX = "io.planrun"
MANAGED_LABEL = f"{LABEL_PREFIX}.managed"


def labels(spec: SandboxSpec) -> dict[str, str]:
    """Labels that identify planrun's containers and their owner process."""
    return {
        MANAGED_LABEL: "1",
        f"{LABEL_PREFIX}.session": spec.session,
        f"{LABEL_PREFIX}.agent": spec.agent,
        f"{LABEL_PREFIX}.version": __version__,
        f"{LABEL_PREFIX}.pid": str(os.getpid()),
        f"{LABEL_PREFIX}.host": os.uname().nodename,
    }


def toolserver_command(spec: SandboxSpec, guarded: tuple[str, ...] = ("/tmp",)) -> list[str]:
    """The container's main process: the tool server, under the image's python3 (or
    planrun's runtime, in an image derived from the user's). GUARDED are the writable
    tmpfs mounts besides /plan, which the git guard walks too."""
    command = [spec.python, "-I", "-S", TOOLSERVER_MOUNT, "--workspace", WORKSPACE_MOUNT]
    command += ["--plan-dir", PLAN_MOUNT]
    megabytes, entries = plan_capacity(spec)
    command += ["--max-plan-bytes", str(megabytes * 1024 * 1024)]
    command += ["--max-plan-entries", str(entries)]
    for mount in spec.extra_mounts:
        command += ["--extra-dir", mount.target]
    if spec.profile is Profile.WORK:
        command += ["--writable", WORKSPACE_MOUNT]
    if spec.scratch:
        command += ["--scratch-layer"]
    if spec.git_seed is not None:
        command += ["--git-seed", GIT_SEED_FILE]
    for place in guarded:
        command += ["--guard-dir", place]
    return command


def plan_capacity(spec: SandboxSpec) -> tuple[int, int]:
    """Size in MiB and entries of the sandbox's /plan (tiny unless it is copied out)."""
    if spec.profile is not Profile.PLAN:
        return PROBE_PLAN_MB, PROBE_PLAN_ENTRIES
    return spec.limits.plan_dir_mb, spec.limits.plan_dir_entries


def plan_tmpfs(spec: SandboxSpec, uid: int, gid: int) -> str:
    """Mount options of /plan: a tmpfs the kernel caps in bytes and entries, no exec."""
    size, entries = plan_capacity(spec)
    return f"rw,noexec,nosuid,nodev,size={size}m,nr_inodes={entries},mode=0700,uid={uid},gid={gid}"


def container_options(
    spec: SandboxSpec,
    user: tuple[int, int] | None = None,
    *,
    recursive_read_only: bool = False,
    workspace_volume: str | None = None,
    image_volumes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The keyword arguments for docker's `containers.create`, as plain data.

    Every relaxation of these options is a security bug: read-only root and mounts (a
    work sandbox's workspace alone is writable; /plan and /tmp are size-capped tmpfs
    mounts), no network (unless a work sandbox was granted it), no capabilities, no
    privilege escalation, planrun's seccomp profile, no shared IPC, no log copy, bounded
    memory, processes, CPU and file size. A VOLUME the image declares (IMAGE_VOLUMES)
    gets a tmpfs capped like /tmp instead of Docker's uncapped volume on the host's disk.

    A scratch sandbox mounts workspace_volume (its copy-on-write layer, sandbox/scratch.py)
    at /workspace instead of the repository; every other mount is the same, the clean git
    configs included, read-only over the layer.
    """
    uid, gid = user or sandbox_user(spec.workspace)
    limits = spec.limits
    mounts = [
        _bind(m.source, m.target, read_only=not m.writable, recursive=recursive_read_only)
        for m in spec.mounts
    ]
    if workspace_volume is not None:
        mounts = [
            _scratch_mount(workspace_volume) if mount["Target"] == WORKSPACE_MOUNT else mount
            for mount in mounts
        ]
    mounts.append(_bind(TOOLSERVER_SOURCE, TOOLSERVER_MOUNT, read_only=True))
    if spec.git_seed is not None:
        mounts.append(_bind(spec.git_seed, GIT_SEED_MOUNT, read_only=True))
    if not spec.network:
        mounts.append(_bind(EMPTY_RESOLV_CONF, RESOLV_CONF_MOUNT, read_only=True))
    # A work session builds and runs tests, which may execute what they put in /tmp.
    tmp_exec = "exec" if spec.profile is Profile.WORK or spec.scratch else "noexec"
    file_bytes = limits.plan_dir_mb * 1024 * 1024
    tmpfs = {
        "/tmp": f"rw,{tmp_exec},nosuid,nodev,size={limits.tmp_mb}m,mode=1777",
        PLAN_MOUNT: plan_tmpfs(spec, uid, gid),
    }
    targets = {mount["Target"] for mount in mounts}
    for volume in image_volumes:
        if volume not in targets and volume not in tmpfs:
            tmpfs[volume] = f"rw,noexec,nosuid,nodev,size={limits.tmp_mb}m,mode=1777"
    return {
        "image": spec.image,
        "command": toolserver_command(spec, tuple(name for name in tmpfs if name != PLAN_MOUNT)),
        "user": f"{uid}:{gid}",
        "working_dir": WORKSPACE_MOUNT,
        "environment": {},
        "hostname": "planrun-sandbox",
        "labels": labels(spec),
        "mounts": mounts,
        "read_only": True,
        "tmpfs": tmpfs,
        "network_mode": "bridge" if spec.network else "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true", f"seccomp={seccomp_profile()}"],
        "pids_limit": limits.pids,
        "mem_limit": f"{limits.memory_mb}m",
        "memswap_limit": f"{limits.memory_mb}m",
        "nano_cpus": int(limits.cpus * 1e9),
        # The before/after checks run beside the plans' tool calls: they yield the CPU.
        "cpu_shares": PROBE_CPU_SHARES if spec.profile is Profile.PROBE else DEFAULT_CPU_SHARES,
        "ulimits": [
            {"Name": "fsize", "Soft": file_bytes, "Hard": file_bytes},
            {"Name": "nofile", "Soft": limits.open_files, "Hard": limits.open_files},
            {"Name": "core", "Soft": 0, "Hard": 0},
        ],
        # No init process: the tool server is PID 1. The kernel then shields it from
        # signals sent inside, and no other process shares its stdin and stdout, so no
        # command can read requests or forge replies. The server reaps orphans itself.
        "init": False,
        "stdin_open": True,
        # Not detached: docker-py then sets StdinOnce, so when planrun's attach connection
        # closes (planrun exited or was killed) the server reads end-of-file, kills every
        # command and exits, and Docker removes the container: nothing outlives planrun.
        "detach": False,
        "auto_remove": True,
        "tty": False,
        # Its own IPC namespace without /dev/shm: commands need no shared memory.
        "ipc_mode": "none",
        # Tool output is not copied into a log file on the host.
        "log_config": {"Type": "none", "Config": {}},
    }


def _scratch_mount(volume: str) -> dict[str, Any]:
    # NoCopy: Docker would otherwise copy what the image holds at /workspace into it.
    return {"Type": "volume", "Source": volume, "Target": WORKSPACE_MOUNT, "ReadOnly": False,
            "VolumeOptions": {"NoCopy": True}}  # fmt: skip


def _bind(source: Path, target: str, *, read_only: bool, recursive: bool = False) -> dict[str, Any]:
    options: dict[str, Any] = {"Propagation": "rprivate"}
    if read_only and recursive:
        options["ReadOnlyForceRecursive"] = True
    return {
        "Type": "bind",
        "Source": str(source),
        "Target": target,
        "ReadOnly": read_only,
        "BindOptions": options,
    }
