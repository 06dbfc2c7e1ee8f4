"""Git run through the tool server's bash op obeys nothing the repository's config names."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.toolserver_process import ServerProcess

# Commands of the bash policy's read-only git allow-list that run diffs, filters or textconv.
READ_ONLY_GIT = (
    "git status",
    "git diff",
    "git diff HEAD",
    "git diff --stat",
    "git log -p",
    "git show",
    "git blame clean.txt",
    "git blame textconv.txt",
    "git grep -n changed",
    "git cat-file --filters HEAD:clean.txt",
    "git cat-file --textconv HEAD:textconv.txt",
    "git stash list",
)
# What each driver of the repository below switches on: the marker its program writes.
DRIVER_ATTRIBUTES = {
    "clean.txt": ("filter=cleaner", "clean"),
    "smudge.txt": ("filter=smudger", "smudge"),
    "process.txt": ("filter=processor", "process"),
    "textconv.txt": ("diff=converter", "textconv"),
    "command.txt": ("diff=differ", "command"),
    "dotted.txt": ("filter=dotted.name", "dotted"),
    "included.txt": ("filter=included", "included"),
    "merged.txt": ("merge=merger", "merge"),
}


def git(repo: Path, *args: str) -> str:
    """Plain git for setting repositories up, untouched by the server's settings."""
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1"}
    settings = ("user.name=t", "user.email=t@t", "protocol.file.allow=always")
    options = [arg for setting in settings for arg in ("-c", setting)]
    done = subprocess.run(
        ["git", *options, *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout


def marking(markers: Path, name: str) -> str:
    """A shell command that records that it ran, then passes its input through."""
    return f'"touch {markers}/{name}; cat"'


def hostile_config(markers: Path) -> str:
    return f"""\
[filter "cleaner"]
\tclean = {marking(markers, "clean")}
\trequired = true
[filter "smudger"]
\tsmudge = {marking(markers, "smudge")}
[filter "processor"]
\tprocess = {marking(markers, "process")}
[diff "converter"]
\ttextconv = {marking(markers, "textconv")}
[diff "differ"]
\tcommand = {marking(markers, "command")}
[diff]
\texternal = {marking(markers, "external")}
[filter.dotted "name"]
\tclean = {marking(markers, "dotted")}
[merge "merger"]
\tdriver = {marking(markers, "merge")}
[include]
\tpath = ../config/git.inc
"""


def make_hostile_repo(workspace: Path, markers: Path) -> None:
    """A committed repository, then edited, whose config names a program for each driver.

    One filter is defined only in a file of the worktree that .git/config includes.
    """
    git(workspace, "init", "-q")
    attributes = "".join(
        f"{name} {attribute}\n" for name, (attribute, _) in DRIVER_ATTRIBUTES.items()
    )
    (workspace / ".gitattributes").write_text(attributes)
    for name in DRIVER_ATTRIBUTES:
        (workspace / name).write_text("first line\n")
    (workspace / "config").mkdir()
    (workspace / "config" / "git.inc").write_text(
        f'[filter "included"]\n\tclean = {marking(markers, "included")}\n'
    )
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "first")
    with (workspace / ".git" / "config").open("a") as config:
        config.write(hostile_config(markers))
    for name in DRIVER_ATTRIBUTES:
        (workspace / name).write_text("first line\nchanged line\n")


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    directory = tmp_path / "markers"
    directory.mkdir()
    return directory


@pytest.fixture
def server(
    start_server: Callable[..., ServerProcess],
    workspace: Path,
    plan_dir: Path,
    tmp_path: Path,
    markers: Path,
) -> Iterator[ServerProcess]:
    """The server, seeing the test's whole directory (the programs a repository names
    live there) and able to write only its plan directory and the markers."""
    process = start_server(workspace, plan_dir, visible=[tmp_path], writable=[markers])
    yield process
    assert process.close() == 0


@pytest.fixture
def hostile_repo(workspace: Path, markers: Path) -> Path:
    make_hostile_repo(workspace, markers)
    return workspace


def bash(server: ServerProcess, command: str, timeout: float = 30) -> tuple[int, str]:
    response = server.call("bash", {"command": command}, timeout=timeout)
    assert response["ok"], response
    return int(response["exit_code"]), str(response["output"])


def test_the_hostile_repository_runs_its_programs_under_plain_git(
    hostile_repo: Path, markers: Path
) -> None:
    """The fixture is live: without the server's environment, git runs every driver."""
    env = {"PATH": os.environ["PATH"], "HOME": str(hostile_repo)}
    # Each command stops at the first driver that fails, hence several.
    for command in ("git diff", "git diff smudge.txt", "git diff command.txt", "git log -p"):
        subprocess.run(command.split(), cwd=hostile_repo, env=env, capture_output=True)
    ran = {path.name for path in markers.iterdir()}
    drivers = {marker for _, marker in DRIVER_ATTRIBUTES.values()}
    assert ran == drivers - {"merge"} | {"external"}


@pytest.mark.parametrize("command", READ_ONLY_GIT)
def test_read_only_git_runs_no_program_the_repository_names(
    hostile_repo: Path, markers: Path, server: ServerProcess, command: str
) -> None:
    exit_code, output = bash(server, command)
    assert exit_code == 0, output
    assert list(markers.iterdir()) == []


def test_git_diff_still_shows_every_change(hostile_repo: Path, server: ServerProcess) -> None:
    exit_code, output = bash(server, "git diff")
    assert exit_code == 0, output
    for name in DRIVER_ATTRIBUTES:
        assert f"diff --git a/{name} b/{name}" in output
    assert output.count("+changed line") == len(DRIVER_ATTRIBUTES)
    exit_code, output = bash(server, "git log -p -1 --format=%s")
    assert exit_code == 0 and output.count("+first line") == len(DRIVER_ATTRIBUTES)


def test_git_diff_is_git_s_own_in_a_plain_repository(
    workspace: Path, server: ServerProcess
) -> None:
    git(workspace, "init", "-q")
    (workspace / "notes.txt").write_text("one\n")
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "one")
    (workspace / "notes.txt").write_text("two\n")
    exit_code, output = bash(server, "git diff")
    assert exit_code == 0, output
    assert "index " in output and "-one\n+two" in output  # not an external diff


@pytest.mark.parametrize("layout", ["gitdir in .git/modules", "gitdir in the worktree"])
def test_drivers_in_a_submodule_s_config_are_switched_off(
    workspace: Path, tmp_path: Path, markers: Path, server: ServerProcess, layout: str
) -> None:
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q")
    (library / ".gitattributes").write_text("*.txt filter=subfilter diff=subdiff\n")
    (library / "lib.txt").write_text("same size\n")
    git(library, "add", ".")
    git(library, "commit", "-qm", "library")
    git(workspace, "init", "-q")
    if layout == "gitdir in the worktree":
        git(workspace, "clone", "-q", str(library), "lib")
    git(workspace, "submodule", "add", "-q", str(library), "lib")
    git(workspace, "commit", "-qm", "with a submodule")
    if layout == "gitdir in .git/modules":
        # git recurses into every gitlink, .gitmodules or not.
        (workspace / ".gitmodules").unlink()
    config_path = workspace / "lib" / ".git" / "config"
    if not config_path.exists():
        config_path = workspace / ".git" / "modules" / "lib" / "config"
    with config_path.open("a") as config:
        config.write(
            f'[filter "subfilter"]\n\tclean = {marking(markers, "subclean")}\n'
            f'[diff "subdiff"]\n\ttextconv = {marking(markers, "subtextconv")}\n'
            f"[core]\n\tfsmonitor = {marking(markers, 'fsmonitor')}\n"
        )
    (workspace / "lib" / "lib.txt").write_text("SAME SIZE\n")
    for command in ("git status", "git diff --submodule=diff", "git grep --recurse-submodules x"):
        exit_code, output = bash(server, command)
        assert exit_code in (0, 1), output
    assert list(markers.iterdir()) == []


def make_partial_clone(origin: Path, clone: Path, markers: Path) -> None:
    """A blobless clone whose remote runs a marking upload-pack when git fetches a blob."""
    if not origin.exists():
        origin.mkdir()
        git(origin, "init", "-q")
        (origin / "file.txt").write_text("content\n")
        git(origin, "add", ".")
        git(origin, "commit", "-qm", "origin")
        git(origin, "config", "uploadpack.allowFilter", "true")
    clone.mkdir(exist_ok=True)
    git(clone, "clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{origin}", ".")
    upload_pack = f"touch {markers}/upload-pack; git-upload-pack"
    git(clone, "config", "remote.origin.uploadpack", upload_pack)
    git(clone, "config", "protocol.file.allow", "always")


def test_a_lazy_fetch_runs_no_upload_pack_the_repository_names(
    workspace: Path, tmp_path: Path, markers: Path, server: ServerProcess
) -> None:
    control = tmp_path / "control"
    make_partial_clone(tmp_path / "origin", control, markers)
    env = {"PATH": os.environ["PATH"], "HOME": str(control)}
    subprocess.run(["git", "show", "HEAD:file.txt"], cwd=control, env=env, capture_output=True)
    assert [path.name for path in markers.iterdir()] == ["upload-pack"]
    (markers / "upload-pack").unlink()
    make_partial_clone(tmp_path / "origin", workspace, markers)
    exit_code, output = bash(server, "git show HEAD:file.txt")
    assert exit_code == 128 and "transport 'file' not allowed" in output
    assert list(markers.iterdir()) == []


def test_help_runs_no_man_viewer_the_repository_names(
    workspace: Path, markers: Path, server: ServerProcess
) -> None:
    git(workspace, "init", "-q")
    with (workspace / ".git" / "config").open("a") as config:
        config.write(f'[man]\n\tviewer = mine\n[man "mine"]\n\tcmd = {marking(markers, "man")}\n')
    bash(server, "git log --help")
    assert list(markers.iterdir()) == []


def test_signatures_are_not_checked_by_a_program_the_repository_names(
    workspace: Path, tmp_path: Path, markers: Path, server: ServerProcess
) -> None:
    checker = tmp_path / "checker"
    checker.write_text(f"#!/bin/sh\ntouch {markers}/signature\n")
    checker.chmod(0o755)
    git(workspace, "init", "-q")
    tree = git(workspace, "write-tree").strip()
    signature = "-----BEGIN SSH SIGNATURE-----\n x\n -----END SSH SIGNATURE-----"
    commit = f"tree {tree}\nauthor a <a@a> 1 +0000\ncommitter a <a@a> 1 +0000\n"
    commit += f"gpgsig {signature}\n\nsigned\n"
    done = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=workspace, input=commit, capture_output=True, text=True, check=True,
    )  # fmt: skip
    git(workspace, "update-ref", "HEAD", done.stdout.strip())
    settings = {
        "log.showSignature": "true",
        "gpg.ssh.program": str(checker),
        "gpg.ssh.allowedSignersFile": "/dev/null",
    }
    for key, value in settings.items():
        git(workspace, "config", key, value)
    subprocess.run(["git", "log"], cwd=workspace, capture_output=True)
    assert [path.name for path in markers.iterdir()] == ["signature"]
    (markers / "signature").unlink()
    exit_code, output = bash(server, "git log; git log --show-signature; git show --stat")
    # The signature program is `false`: it exits before reading what git writes to it, so
    # git may die of SIGPIPE (141) on `--show-signature`, at random; either way nothing of
    # the repository's runs, and the commits are shown.
    assert exit_code in (0, 141) and "signed" in output
    assert list(markers.iterdir()) == []


def test_a_changed_include_is_read_again(
    hostile_repo: Path, markers: Path, server: ServerProcess
) -> None:
    assert bash(server, "git diff included.txt")[0] == 0
    include = hostile_repo / "config" / "git.inc"
    late = marking(markers, "late")
    include.write_text(f'[filter "included"]\n\tsmudge = x\n[diff "late"]\n\tcommand = {late}\n')
    (hostile_repo / ".gitattributes").write_text("included.txt diff=late\n")
    exit_code, output = bash(server, "git diff included.txt")
    assert exit_code == 0 and "+changed line" in output
    assert list(markers.iterdir()) == []


def test_an_include_in_a_writable_place_is_read_again_before_each_command(
    hostile_repo: Path, plan_dir: Path, markers: Path, server: ServerProcess
) -> None:
    """A file the plan's writer can change (the guard walks /plan and /tmp): what a command
    writes there is read before the next command, and the driver it names is switched off."""
    with (hostile_repo / ".git" / "config").open("a") as config:
        config.write(f"[include]\n\tpath = {plan_dir}/later.inc\n")
    assert bash(server, "git status")[0] == 0
    program = marking(markers, "later")
    include = f"printf '[diff]\\n\\texternal = {program}\\n' > {plan_dir}/later.inc"
    assert bash(server, include)[0] == 0
    exit_code, output = bash(server, "git diff")
    assert exit_code == 0, output
    assert "diff --git" in output
    assert list(markers.iterdir()) == []
    # The include is live: git reads the external diff from it.
    exit_code, named = bash(server, "git config --show-origin --get-all diff.external")
    assert exit_code == 0 and f"{markers}/later" in named


@pytest.mark.parametrize("where", [".git/config", "config/git.inc"])
def test_a_fifo_git_would_read_neither_hangs_the_server_nor_git(
    hostile_repo: Path, server: ServerProcess, where: str
) -> None:
    target = hostile_repo / where
    target.unlink()
    os.mkfifo(target)
    exit_code, output = bash(server, "git status", timeout=20)
    assert exit_code == 128, output
    assert "git is disabled in this sandbox" in output and "is a fifo" in output
    assert server.call("ping")["ok"]


def test_a_bare_repository_laid_out_by_files_is_not_obeyed(
    workspace: Path, markers: Path, server: ServerProcess
) -> None:
    bare = workspace / "looks-bare"
    for directory in ("objects", "refs", "info"):
        (bare / directory).mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (bare / "config").write_text(f'[diff "x"]\n\ttextconv = {marking(markers, "bare")}\n')
    (bare / "info" / "attributes").write_text("*.txt diff=x\n")
    (bare / "a.txt").write_text("a\n")
    (bare / "b.txt").write_text("b\n")
    exit_code, output = bash(server, "cd looks-bare && git diff --no-index a.txt b.txt")
    assert exit_code == 1 and "+b" in output
    assert list(markers.iterdir()) == []


def test_no_git_path_can_be_written_into_the_plan_directory(server: ServerProcess) -> None:
    message = server.error("write", {"file_path": "/does/not/matter", "content": ""})
    assert "plan directory" in message
    plan = server.call("ping")["meta"]["plan_dir"]
    for path in (".git/config", "repo/.git/HEAD", "repo/.git"):
        message = server.error("write", {"file_path": f"{plan}/{path}", "content": "x"})
        assert message.startswith("Refusing to write a .git path in the plan directory")
    server.ok("write", {"file_path": f"{plan}/notes.git/plan.md", "content": "fine"})


def test_git_s_own_settings_reach_every_command(server: ServerProcess) -> None:
    exit_code, output = bash(
        server,
        "git config --get-all credential.helper; git config help.format; "
        "echo allow=$GIT_ALLOW_PROTOCOL global=$GIT_CONFIG_GLOBAL",
    )
    assert exit_code == 0
    assert output.splitlines() == ["", "info", "allow= global=/dev/null"]


def test_no_command_can_write_to_the_server_s_stdout(server: ServerProcess) -> None:
    """The server is not dumpable, so no process of its uid can open /proc/<pid>/fd/1."""
    exit_code, output = bash(server, f"echo forged > /proc/{server.pid}/fd/1")
    assert exit_code == 1 and "Permission denied" in output
    assert server.call("ping")["meta"]["dumpable"] == 0


def test_a_repository_a_command_plants_is_guarded_in_the_next_command(
    start_server: Callable[..., ServerProcess],
    workspace: Path,
    plan_dir: Path,
    tmp_path: Path,
    markers: Path,
) -> None:
    """A writable part of the workspace (as in a work sandbox): one command copies a
    hostile repository in, the next runs git there."""
    git(workspace, "init", "-q")
    (workspace / "rw").mkdir()
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    git(prepared, "init", "-q")
    (prepared / ".gitattributes").write_text("*.txt filter=planted\n")
    (prepared / "a.txt").write_text("one\n")
    git(prepared, "add", ".")
    git(prepared, "commit", "-qm", "one")
    program = marking(markers, "planted")
    with (prepared / ".git" / "config").open("a") as config:
        config.write(f'[filter "planted"]\n\tclean = {program}\n\tprocess = {program}\n')
    writable = [markers, workspace / "rw"]
    server = start_server(workspace, plan_dir, visible=[tmp_path], writable=writable)
    try:
        assert bash(server, "git status")[0] == 0
        # A copy for the control, whose index git's own run leaves untouched.
        for copy in ("inner", "control"):
            planted = bash(
                server, f"cp -a {prepared} rw/{copy} && touch -d 2001-01-01 rw/{copy}/a.txt"
            )
            assert planted[0] == 0, planted
        for command in ("cd rw/inner && git status", "cd rw/inner && git diff"):
            exit_code, output = bash(server, command)
            assert exit_code == 0, output
        assert list(markers.iterdir()) == []
        # The repository is live: git without planrun's settings runs its filter.
        bash(server, "cd rw/control && env -i PATH=/usr/bin:/bin git -c safe.directory='*' status")
        assert [path.name for path in markers.iterdir()] == ["planted"]
    finally:
        assert server.close() == 0
