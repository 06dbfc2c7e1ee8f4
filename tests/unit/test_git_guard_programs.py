"""Programs a repository's config names beyond drivers (editors, aliases, diff and merge
tools, signing-key and trailer commands): none runs when a command runs git under the guard.

Each case arms the workspace's own `.git/config` and runs, with the guard's environment,
the git command a model in a work session could run there; the program leaves a marker.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandbox_runner.sandbox.toolserver.git_guard import GitGuard
from sandbox_runner.sandbox.toolserver.processes import command_env
from tests.unit.test_git_guard import guarded, host_git, plant

IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
IDENTITY |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}

# (config naming MARK's program, or TOOL, a script that makes MARK; the command a model runs)
CASES = {
    "core.editor": ('[core]\n\teditor = "touch MARK; true"\n', "git commit --amend"),
    "core.editor for a tag": ('[core]\n\teditor = "touch MARK; true"\n', "git tag -a v1"),
    "sequence.editor": ('[sequence]\n\teditor = "touch MARK; true"\n', "git rebase -i HEAD~1"),
    "a shell alias": ('[alias]\n\tst = "!touch MARK"\n', "git st"),
    "an alias in a subsection": ('[alias "x"]\n\tst = "!touch MARK"\n', "git x.st"),
    "an alias to a tool": (
        '[alias]\n\tdt = difftool -y\n[diff]\n\ttool = x\n[difftool "x"]\n\tcmd = "touch MARK"\n',
        "echo 3 > a && git dt",
    ),
    "difftool.<tool>.cmd": (
        '[diff]\n\ttool = x\n[difftool "x"]\n\tcmd = "touch MARK"\n',
        "echo 3 > a && git difftool -y",
    ),
    "difftool.<tool>.path": (
        '[difftool "vimdiff"]\n\tpath = TOOL\n',
        "echo 3 > a && git difftool -y --tool=vimdiff",
    ),
    "mergetool.<tool>.cmd": (
        '[merge]\n\ttool = x\n[mergetool "x"]\n\tcmd = "touch MARK"\n',
        "git checkout -qb b HEAD~1 && echo 4 > a && git commit -qam b; git merge main;"
        " git mergetool -y",
    ),
    "gpg.ssh.defaultKeyCommand": (
        '[commit]\n\tgpgsign = true\n[gpg]\n\tformat = ssh\n[gpg "ssh"]\n'
        "\tdefaultKeyCommand = touch MARK\n",
        "echo 3 > a && git commit -qam three",
    ),
    "browser.<tool>.cmd": (
        '[browser "x"]\n\tcmd = "touch MARK"\n',
        "git web--browse --browser=x http://example.invalid",
    ),
    "man.<tool>.cmd": ('[man]\n\tviewer = x\n[man "x"]\n\tcmd = "touch MARK"\n', "git help -m log"),
    "trailer.<token>.command": (
        '[trailer "see"]\n\tcommand = "touch MARK; true"\n',
        "echo body | git interpret-trailers",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_program_the_config_names_runs(tmp_path: Path, case: str) -> None:
    config, command = CASES[case]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    host_git(workspace, "init", "-q")
    for content in ("1\n", "2\n"):
        (workspace / "a").write_text(content)
        host_git(workspace, "add", ".")
        host_git(workspace, "commit", "-qm", content)
    marker = tmp_path / "marker"
    tool = tmp_path / "tool"
    tool.write_text(f"#!/bin/sh\ntouch {marker}\n")
    tool.chmod(0o755)
    with (workspace / ".git" / "config").open("a") as file:
        file.write(config.replace("MARK", str(marker)).replace("TOOL", str(tool)))
    guard = GitGuard([str(workspace)])
    env = {**command_env("test", guard.env()), "GIT_CONFIG_NOSYSTEM": "1", **IDENTITY}
    subprocess.run(
        ["sh", "-c", command],
        cwd=workspace,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert not marker.exists(), f"{case}: the repository's program ran"


def test_a_repository_in_an_extra_directory_is_guarded(tmp_path: Path) -> None:
    """Extra directories (read-only mounts beside the workspace) are places git runs too."""
    workspace, markers = tmp_path / "ws", tmp_path / "markers"
    workspace.mkdir()
    markers.mkdir()
    extra = tmp_path / "extra"
    plant(extra / "lib", markers)
    guard = GitGuard([str(workspace), str(extra)])
    assert guarded(guard, extra / "lib", "status").returncode == 0
    assert list(markers.iterdir()) == []


@pytest.mark.parametrize("how", ["--git-dir", "GIT_DIR"])
def test_a_git_directory_under_another_name_is_guarded(tmp_path: Path, how: str) -> None:
    """A work session's command may name any directory as the git directory (the Bash
    policy refuses that in plan mode): one not called `.git` is checked as well."""
    workspace, markers = tmp_path / "ws", tmp_path / "markers"
    markers.mkdir()
    plant(workspace / "src", markers)
    (workspace / "src" / ".git").rename(workspace / "store")
    guard = GitGuard([str(workspace)])
    env = {**command_env("test", guard.env()), "GIT_CONFIG_NOSYSTEM": "1"}
    if how == "GIT_DIR":
        env |= {"GIT_DIR": str(workspace / "store"), "GIT_WORK_TREE": str(workspace / "src")}
        args = ["git", "status"]
    else:
        args = ["git", "--git-dir=../store", "--work-tree=.", "status"]
    done = subprocess.run(args, cwd=workspace / "src", env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert list(markers.iterdir()) == []


def test_no_submodule_update_command_runs(tmp_path: Path) -> None:
    """`submodule.<name>.update = !command` in the config: `git submodule update` runs it
    in a submodule whose commit differs from the recorded one."""
    source, workspace, marker = tmp_path / "source", tmp_path / "ws", tmp_path / "marker"
    for directory in (source, workspace):
        directory.mkdir()
        host_git(directory, "init", "-q")
    for content in ("1\n", "2\n"):
        (source / "a").write_text(content)
        host_git(source, "add", ".")
        host_git(source, "commit", "-qm", content)
    host_git(workspace, "-c", "protocol.file.allow=always", "submodule", "add", str(source), "sub")
    host_git(workspace, "commit", "-qm", "sub")
    host_git(workspace / "sub", "checkout", "-q", "HEAD~1")
    with (workspace / ".git" / "config").open("a") as file:
        file.write(f'[submodule "sub"]\n\tupdate = "!touch {marker}"\n')
    guard = GitGuard([str(workspace)])
    env = {**command_env("test", guard.env()), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", "submodule", "update"], cwd=workspace, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert (workspace / "sub" / "a").read_text() == "2\n"  # checked out instead


@pytest.mark.xfail(
    strict=True,
    reason="a git directory's state is not config: the guard never reads a rebase's todo, "
    "whose exec lines `git rebase --continue` runs (no setting switches them off)",
)
def test_no_exec_line_of_a_rebase_in_progress_runs(tmp_path: Path) -> None:
    """A repository can come with an interactive rebase stopped half-way, its todo
    holding `exec`: a work session continuing it would run that command."""
    workspace, marker = tmp_path / "ws", tmp_path / "marker"
    workspace.mkdir()
    host_git(workspace, "init", "-q")
    for content in ("1\n", "2\n"):
        (workspace / "a").write_text(content)
        host_git(workspace, "add", ".")
        host_git(workspace, "commit", "-qm", content)
    host_git(workspace, "-c", "sequence.editor=sed -i s/^pick/edit/", "rebase", "-qi", "HEAD~1")
    with (workspace / ".git" / "rebase-merge" / "git-rebase-todo").open("a") as todo:
        todo.write(f"exec touch {marker}\n")
    guard = GitGuard([str(workspace)])
    env = {**command_env("test", guard.env()), "GIT_CONFIG_NOSYSTEM": "1", **IDENTITY}
    subprocess.run(["git", "rebase", "--continue"], cwd=workspace, env=env, capture_output=True)
    assert not marker.exists()
