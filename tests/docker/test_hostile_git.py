"""A hostile repository's content never makes git run a program, nor hang, in a real sandbox.

Every repository here is built for real with the host's git, isolated from what it builds
(see `host_git`). The programs its content names would leave a marker in /plan, the one
place inside the sandbox where they can write, so a test fails if any of them runs. The
commands go straight to the tool server, past the Bash policy: the guard must hold for
whatever git is asked, as for `planrun sandbox run`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox_runner.runs.multi import git_in_sandbox
from sandbox_runner.runs.workspace import GIT_STATUS_COMMAND, workspace_git_status
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.types import ExecResult, ToolRequest

SandboxFactory = Callable[..., DockerSandbox]

# Git commands that look into nested repositories or run filters, diff drivers or textconv:
# read-only ones the Bash policy allows, the same with the options it refuses (which
# `planrun sandbox run` lets through), and planrun's own before/after `git status`.
READ_ONLY_GIT = (
    "git status",
    "git status --ignore-submodules=none",
    "git status --porcelain=v2 -uall --ignore-submodules=none",
    "git diff",
    "git diff --stat",
    "git diff HEAD",
    "git diff --ignore-submodules=none --submodule=diff",
    "git diff-files",
    "git diff-files -p --ignore-submodules=none",
    "git diff-index HEAD",
    "git diff-index -p HEAD --ignore-submodules=none",
    "git describe --dirty --always",
    "git log -p --submodule=diff -3",
    "git log -p --textconv --ext-diff --submodule=diff -3",
    "git show --submodule=diff",
    "git submodule",
    "git submodule status --recursive",
    "git grep --recurse-submodules -n two",
    "git ls-files --recurse-submodules",
    "git ls-files -m",
    "git stash list",
    GIT_STATUS_COMMAND,
)

LAYOUTS = (
    "nested repository not in .gitmodules",
    "git directory elsewhere, through a gitdir file",
    "submodule with ignore=none and its git directory in .git/modules",
    "nested twice, drivers only in the inner repository",
    "drivers in a file the nested config includes",
    "linked worktree with its own config.worktree",
)


DISABLED = "git is disabled in this sandbox"
# git inside the sandbox without planrun's settings: shows that a layout is live.
BARE_GIT = "env -i PATH=/usr/bin:/bin HOME=/tmp git -c 'safe.directory=*'"
HOST_GIT_SETTINGS = (
    "user.name=t",
    "user.email=t@t",
    "init.defaultBranch=main",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "protocol.file.allow=always",
)


def host_git(cwd: Path, *args: str) -> str:
    """The host's git, for building repositories, with no system, user or hostile setting:
    the hostile parts of a repository are written after its last host git command."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    options = [arg for setting in HOST_GIT_SETTINGS for arg in ("-c", setting)]
    done = subprocess.run(
        ["git", *options, *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout


def markers(plan_dir: Path | None) -> list[str]:
    """The markers the repository's programs left in a sandbox's plan directory, as copied
    out to the host when the sandbox stopped."""
    assert plan_dir is not None
    return sorted(path.name for path in plan_dir.iterdir() if path.name.startswith("ran-"))


def live_markers(sandbox: DockerSandbox) -> list[str]:
    """The markers in a running sandbox's /plan (a tmpfs, copied out only when it stops)."""
    listing = bash(sandbox, "ls /plan").output.split()
    return sorted(name for name in listing if name.startswith("ran-"))


def mark(what: str) -> str:
    """A program for git's config that leaves a marker, then passes its input through."""
    return f'"touch /plan/ran-{what}; cat"'


# The files of each nested repository, and the driver their attributes name.
NESTED_FILES = {"a.txt": "filter=evil", "b.txt": "filter=proc", "c.txt": "diff=conv"}
NESTED_ATTRIBUTES = "".join(f"{name} {driver}\n" for name, driver in NESTED_FILES.items())
HOSTILE_CONFIG = f"""\
[core]
\tfsmonitor = {mark("fsmonitor")}
[filter "evil"]
\tclean = {mark("clean")}
\tsmudge = {mark("smudge")}
[filter "proc"]
\tprocess = {mark("process")}
[diff "conv"]
\ttextconv = {mark("textconv")}
[diff]
\texternal = {mark("external")}
"""
STALE = 978307200  # 2001-01-01: stat data that no longer matches the index


def commit_files(worktree: Path, text: str) -> None:
    for name in NESTED_FILES:
        (worktree / name).write_text(text)
    host_git(worktree, "add", ".")
    host_git(worktree, "commit", "-qm", text.strip().replace("\n", " "))


def make_nested(worktree: Path, git_dir: Path | None = None) -> None:
    worktree.mkdir(parents=True, exist_ok=True)
    init_options: list[str] = []
    if git_dir is not None:
        git_dir.parent.mkdir(parents=True, exist_ok=True)
        init_options.append(f"--separate-git-dir={git_dir}")
    host_git(worktree, "init", "-q", *init_options)
    commit_files(worktree, "one\n")


def record(repo: Path, *paths: str) -> None:
    host_git(repo, "add", *paths)
    host_git(repo, "commit", "-qm", "record " + " ".join(paths))


def arm(worktree: Path, config: Path) -> None:
    """Make a nested repository hostile: attributes naming its drivers, the drivers in
    CONFIG, and stale stat data so that git must run the clean filter to compare."""
    (worktree / ".gitattributes").write_text(NESTED_ATTRIBUTES)
    with config.open("a") as file:
        file.write(HOSTILE_CONFIG)
    for name in NESTED_FILES:
        os.utime(worktree / name, (STALE, STALE))


def relative_gitfile(worktree: Path, git_dir: str) -> None:
    """Point a .git file at its git directory by a path that holds inside the container."""
    (worktree / ".git").write_text(f"gitdir: {git_dir}\n")


def build_layout(repo: Path, layout: str) -> None:
    """Commit REPO with a nested repository `sub` in the shape LAYOUT names, then arm it."""
    host_git(repo, "init", "-q")
    record(repo, ".")
    sub = repo / "sub"
    if layout == LAYOUTS[0]:
        make_nested(sub)
        record(repo, "sub")
        commit_files(sub, "one\ntwo\n")
        record(repo, "sub")
        arm(sub, sub / ".git" / "config")
    elif layout == LAYOUTS[1]:
        make_nested(sub, repo / ".store" / "sub.git")
        relative_gitfile(sub, "../.store/sub.git")
        record(repo, "sub")
        arm(sub, repo / ".store" / "sub.git" / "config")
    elif layout == LAYOUTS[2]:
        make_nested(sub, repo / ".git" / "modules" / "sub")
        relative_gitfile(sub, "../.git/modules/sub")
        host_git(sub, "config", "core.worktree", "../../../sub")
        (repo / ".gitmodules").write_text(
            '[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n\tignore = none\n'
        )
        record(repo, ".gitmodules", "sub")
        commit_files(sub, "one\ntwo\n")
        record(repo, "sub")
        arm(sub, repo / ".git" / "modules" / "sub" / "config")
    elif layout == LAYOUTS[3]:
        inner = sub / "inner"
        make_nested(sub)
        make_nested(inner)
        record(sub, "inner")
        record(repo, "sub")
        arm(inner, inner / ".git" / "config")
    elif layout == LAYOUTS[4]:
        make_nested(sub)
        record(repo, "sub")
        with (sub / ".git" / "config").open("a") as config:
            config.write("[include]\n\tpath = ../../drivers.inc\n")
        arm(sub, repo / "drivers.inc")
    else:
        main = repo / ".store" / "main"
        make_nested(main)
        host_git(main, "worktree", "add", "-q", "--detach", str(sub))
        relative_gitfile(sub, "../.store/main/.git/worktrees/sub")
        host_git(main, "config", "extensions.worktreeConfig", "true")
        record(repo, "sub")
        arm(sub, main / ".git" / "worktrees" / "sub" / "config.worktree")


def bash(sandbox: DockerSandbox, command: str, timeout: float = 60) -> ExecResult:
    return sandbox.call(ToolRequest("bash", {"command": command}, timeout=timeout))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_program_a_nested_repository_names_runs(
    make_sandbox: SandboxFactory, repo: Path, layout: str
) -> None:
    build_layout(repo, layout)
    control = make_sandbox()
    with control:
        bash(control, f"{BARE_GIT} status")
    # The layout is live: git without planrun's settings runs the nested filter.
    assert "ran-clean" in markers(control.spec.plan_dir)

    sandbox = make_sandbox()
    with sandbox:
        for command in READ_ONLY_GIT:
            result = bash(sandbox, command)
            assert result.ok and not result.timed_out, (command, result)
            assert DISABLED not in result.output, (command, result.output)
            assert live_markers(sandbox) == [], (command, result.output)


def test_planrun_s_own_git_status_check_runs_nothing(
    make_sandbox: SandboxFactory, repo: Path, tmp_path: Path
) -> None:
    build_layout(repo, LAYOUTS[0])
    made: list[DockerSandbox] = []

    def factory(plan_dir: Path | None) -> DockerSandbox:
        # A plan sandbox rather than a probe, so that a marker would reach the host.
        made.append(make_sandbox())
        return made[-1]

    status = workspace_git_status(repo, None, git_in_sandbox(factory))
    assert status is not None
    assert made and all(markers(sandbox.spec.plan_dir) == [] for sandbox in made)


def test_drivers_git_would_find_elsewhere_than_the_scan_refuse_git(
    make_sandbox: SandboxFactory, repo: Path
) -> None:
    """/proc/self/cwd is the nested repository for the git process there, not for the scan."""
    build_layout(repo, LAYOUTS[0])
    config = repo / "sub" / ".git" / "config"
    (repo / "sub" / "drivers.inc").write_text(HOSTILE_CONFIG)
    config.write_text(config.read_text().replace(HOSTILE_CONFIG, ""))
    with config.open("a") as file:
        file.write("[include]\n\tpath = /proc/self/cwd/drivers.inc\n")
    control = make_sandbox()
    with control:
        bash(control, f"{BARE_GIT} status")
    assert "ran-clean" in markers(control.spec.plan_dir)
    sandbox = make_sandbox()
    with sandbox:
        assert_git_refused_quickly(sandbox, "leads through /proc")
    assert markers(sandbox.spec.plan_dir) == []


def test_a_git_directory_a_command_copies_into_a_writable_place_is_disarmed(
    make_sandbox: SandboxFactory, repo: Path, tmp_path: Path
) -> None:
    """A gitdir file may point into the plan directory, which a command can fill: the guard
    walks /plan (and /tmp) too, and switches off what the copied config defines."""
    build_layout(repo, LAYOUTS[0])
    # The git directory travels in the workspace; a command copies it into /plan, as an
    # attacker inside would.
    (repo / "sub" / ".git").rename(repo / "stash.git")
    relative_gitfile(repo / "sub", "/plan/sub.git")
    control, sandbox = make_sandbox(), make_sandbox()
    with control:
        bash(control, "cp -r /workspace/stash.git /plan/sub.git")
        bash(control, f"{BARE_GIT} status")
    assert "ran-clean" in markers(control.spec.plan_dir)
    with sandbox:
        bash(sandbox, "cp -r /workspace/stash.git /plan/sub.git")
        for command in HANGING_GIT:
            result = bash(sandbox, command, timeout=30)
            assert result.ok and not result.timed_out, (command, result)
        assert live_markers(sandbox) == []
    assert markers(sandbox.spec.plan_dir) == []


# Where a FIFO (or a link to a device) makes git wait for ever, or read without end.
BLOCKING_PLACES = (
    ".git/HEAD",
    ".git/config",
    ".git/index",
    ".git/packed-refs",
    ".git/refs/heads/main",
    ".git/commondir",
    ".git/info/exclude",
    ".git/info/attributes",
    ".git/objects/info/alternates",
    ".git/logs/HEAD",
    ".git",
    "src/.gitignore",
    ".gitattributes",
    ".mailmap",
    ".gitmodules",
    "sub/.git",
    "sub/.git/HEAD",
    "sub/.git/index",
    "sub/.git/config",
)
DEVICE_LINKS = {".git/HEAD": "/dev/zero", ".git/packed-refs": "/dev/zero", ".mailmap": "/dev/zero"}
# Settings that name a file git opens: a FIFO there would block it.
PATH_SETTINGS = (
    "core.excludesFile",
    "core.attributesFile",
    "mailmap.file",
    "diff.orderFile",
    "blame.ignoreRevsFile",
)
HANGING_GIT = (
    "git status",
    "git log -p --format=%aN -1",
    "git blame README.md",
    "git check-attr -a src/app.py",
    "git worktree list",
    GIT_STATUS_COMMAND,
)


def assert_git_refused_quickly(sandbox: DockerSandbox, what: str) -> None:
    for command in HANGING_GIT:
        result = bash(sandbox, command, timeout=30)
        assert result.ok and not result.timed_out, (command, result)
        assert DISABLED in result.output and what in result.output, (command, result.output)
    assert bash(sandbox, "echo still here").output.strip() == "still here"


@pytest.mark.parametrize("place", BLOCKING_PLACES)
def test_a_fifo_where_git_reads_refuses_git_at_once(
    make_sandbox: SandboxFactory, repo: Path, place: str
) -> None:
    build_layout(repo, LAYOUTS[0])
    target = repo / place
    if target.is_dir():
        target.rename(target.with_name(target.name + ".moved"))
    elif target.exists():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(target)
    with make_sandbox() as sandbox:
        assert_git_refused_quickly(sandbox, "fifo")


def test_git_s_default_files_in_the_writable_home_are_not_read(
    make_sandbox: SandboxFactory, repo: Path
) -> None:
    build_layout(repo, LAYOUTS[0])
    with make_sandbox() as sandbox:
        made = bash(
            sandbox, "mkdir -p /tmp/.config/git && cd /tmp/.config/git && mkfifo ignore attributes"
        )
        assert made.exit_code == 0, made.output
        for command in ("git status", "git check-attr -a README.md"):
            result = bash(sandbox, command, timeout=30)
            assert result.exit_code == 0 and not result.timed_out, (command, result)


@pytest.mark.parametrize("place", sorted(DEVICE_LINKS))
def test_a_link_to_a_device_where_git_reads_refuses_git(
    make_sandbox: SandboxFactory, repo: Path, place: str
) -> None:
    build_layout(repo, LAYOUTS[0])
    target = repo / place
    if target.exists():
        target.unlink()
    target.symlink_to(DEVICE_LINKS[place])
    with make_sandbox() as sandbox:
        assert_git_refused_quickly(sandbox, "device")


@pytest.mark.parametrize("setting", PATH_SETTINGS)
@pytest.mark.parametrize("config", [".git/config", "sub/.git/config"])
def test_a_setting_naming_a_fifo_refuses_git(
    make_sandbox: SandboxFactory, repo: Path, setting: str, config: str
) -> None:
    build_layout(repo, LAYOUTS[0])
    os.mkfifo(repo / "src" / "waits")
    section, _, key = setting.partition(".")
    with (repo / config).open("a") as file:
        file.write(f"[{section}]\n\t{key} = src/waits\n")
    with make_sandbox() as sandbox:
        assert_git_refused_quickly(sandbox, "fifo")


@pytest.mark.parametrize(("shape", "message"), [("deep", "deep"), ("repositories", "repositories")])
def test_git_is_refused_when_the_scan_cannot_be_complete(
    make_sandbox: SandboxFactory, repo: Path, shape: str, message: str
) -> None:
    """The bound on entries (20,000,000) is tested with a lower one, in tests/unit."""
    build_layout(repo, LAYOUTS[0])
    if shape == "deep":
        Path(repo, *["d"] * 300).mkdir(parents=True)
    else:
        for index in range(300):
            git_dir = repo / "many" / str(index) / ".git"
            git_dir.mkdir(parents=True)
            (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    with make_sandbox() as sandbox:
        for command in ("git status", GIT_STATUS_COMMAND):
            result = bash(sandbox, command, timeout=60)
            assert result.exit_code == 128, result.output
            assert DISABLED in result.output and message in result.output
