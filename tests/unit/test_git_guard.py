"""The tool server's git guard on the host's git: what appears or changes after its first
look (a nested repository, a config, a link, a FIFO) is guarded before the next command.

The guard runs in this process, as in the tool server, and the host's git runs with the
environment a command would get; each repository's programs leave a marker, so a test
fails if one runs. Containers are not needed: tests/docker covers the guard in the image.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from sandbox_runner.sandbox.toolserver import git_guard, git_scan, git_tree
from sandbox_runner.sandbox.toolserver.git_guard import GitGuard
from sandbox_runner.sandbox.toolserver.git_scan import RepositoryScan
from sandbox_runner.sandbox.toolserver.processes import command_env

STALE = 978307200  # stat data that no longer matches the index: git must run the filter
DISABLED = "git is disabled in this sandbox"


def host_git(cwd: Path, *args: str) -> None:
    """The host's git for building repositories, with no user or system setting."""
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    settings = ("user.name=t", "user.email=t@t", "init.defaultBranch=main")
    options = [arg for setting in settings for arg in ("-c", setting)]
    subprocess.run(["git", *options, *args], cwd=cwd, env=env, check=True, capture_output=True)


def guarded(guard: GitGuard, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as a command in the sandbox runs it: with the guard's environment."""
    env = {**command_env("test", guard.env()), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)


def plant(worktree: Path, markers: Path, name: str = "evil") -> None:
    """A committed repository at WORKTREE whose config then names a filter (clean and
    process) that leaves a marker, with stale stat data so that `git status` runs it."""
    worktree.mkdir(parents=True, exist_ok=True)
    host_git(worktree, "init", "-q")
    (worktree / ".gitattributes").write_text(f"*.txt filter={name}\n")
    (worktree / "a.txt").write_text("one\n")
    host_git(worktree, "add", ".")
    host_git(worktree, "commit", "-qm", "one")
    arm(worktree / ".git" / "config", markers, name)
    os.utime(worktree / "a.txt", (STALE, STALE))


def arm(config: Path, markers: Path, name: str) -> None:
    program = f'"touch {markers}/{name}; cat"'
    with config.open("a") as file:
        file.write(f'[filter "{name}"]\n\tclean = {program}\n\tprocess = {program}\n')


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    directory = tmp_path / "markers"
    directory.mkdir()
    return directory


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    host_git(root, "init", "-q")
    (root / "README.md").write_text("top\n")
    host_git(root, "add", ".")
    host_git(root, "commit", "-qm", "top")
    return root


@pytest.fixture(params=["small tree", "large tree"])
def tree_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A small tree is looked at before every command; a large one after each command."""
    if request.param == "large tree":
        monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    return str(request.param)


def test_the_planted_repository_runs_its_filter_under_plain_git(
    tmp_path: Path, markers: Path
) -> None:
    plant(tmp_path / "control", markers)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "status"], cwd=tmp_path / "control", env=env, capture_output=True)
    assert [path.name for path in markers.iterdir()] == ["evil"]


def test_a_repository_a_command_plants_is_guarded_before_the_next_command(
    workspace: Path, markers: Path, tree_size: str
) -> None:
    guard = GitGuard([str(workspace)])
    assert guarded(guard, workspace, "status").returncode == 0
    with guard.writing():  # a command writes the workspace
        plant(workspace / "deep" / "sub", markers)
    done = guarded(guard, workspace / "deep" / "sub", "status")
    assert done.returncode == 0, done.stderr
    assert list(markers.iterdir()) == []


def test_a_repository_the_host_plants_is_guarded(
    workspace: Path, markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a small tree, before the next command; in a large one, within the idle look."""
    guard = GitGuard([str(workspace)])
    guarded(guard, workspace, "status")
    plant(workspace / "sub", markers)
    assert guarded(guard, workspace / "sub", "status").returncode == 0
    monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    monkeypatch.setattr(git_guard, "GIT_TREE_IDLE_SECONDS", 0.05)
    monkeypatch.setattr(git_guard, "GIT_TREE_IDLE_SHARE", 1.0)
    guard = GitGuard([str(workspace)])
    guard.start()
    guarded(guard, workspace, "status")
    plant(workspace / "other", markers, "other")
    deadline = time.monotonic() + 10
    while "filter.other.process" not in guard.env().values():  # no command in between
        assert time.monotonic() < deadline, "the idle look never saw the repository"
        time.sleep(0.05)
    assert guarded(guard, workspace / "other", "status").returncode == 0
    assert list(markers.iterdir()) == []


def test_a_repository_planted_while_another_command_runs_is_guarded(
    workspace: Path, markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    guard = GitGuard([str(workspace)])
    guarded(guard, workspace, "status")
    with guard.writing():  # a long command, still running, plants it
        plant(workspace / "sub", markers)
        assert guarded(guard, workspace / "sub", "status").returncode == 0
    assert list(markers.iterdir()) == []


@pytest.mark.parametrize("where", ["ws/.git/config", "ws/sub/.git/config", "ws/included.inc"])
def test_a_config_changed_after_the_look_is_read_again(
    tmp_path: Path, workspace: Path, markers: Path, tree_size: str, where: str
) -> None:
    plant(workspace / "sub", markers)
    with (workspace / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = ../included.inc\n")
    (workspace / "included.inc").write_text("")
    guard = GitGuard([str(workspace)])
    assert guarded(guard, workspace / "sub", "status").returncode == 0
    arm(tmp_path / where, markers, "late")
    (workspace / ".gitattributes").write_text("*.md filter=late\n")
    (workspace / "sub" / ".gitattributes").write_text("*.txt filter=late\n")
    for worktree in (workspace, workspace / "sub"):
        os.utime(next(worktree.glob("*.*[td]")), (STALE, STALE))
        assert guarded(guard, worktree, "status").returncode == 0
    assert list(markers.iterdir()) == []


def test_a_git_file_naming_a_git_directory_made_later_is_guarded(
    workspace: Path, tmp_path: Path, markers: Path
) -> None:
    guard = GitGuard([str(workspace)])
    elsewhere = tmp_path / "made-later"
    plant(elsewhere, markers)
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".git").write_text("gitdir: ../store/sub.git\n")
    guarded(guard, workspace, "status")
    (workspace / "store").mkdir()
    (elsewhere / ".git").rename(workspace / "store" / "sub.git")
    for name in (".gitattributes", "a.txt"):
        (elsewhere / name).rename(workspace / "sub" / name)
    os.utime(workspace / "sub" / "a.txt", (STALE, STALE))
    assert guarded(guard, workspace / "sub", "status").returncode == 0
    assert list(markers.iterdir()) == []


def test_a_link_to_a_worktree_that_becomes_a_repository_is_guarded(
    workspace: Path, tmp_path: Path, markers: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "linked").symlink_to(outside)
    guard = GitGuard([str(workspace), str(tmp_path)])
    guarded(guard, workspace, "status")
    plant(outside, markers)
    assert guarded(guard, workspace / "linked", "status").returncode == 0
    assert list(markers.iterdir()) == []


def test_a_fifo_that_appears_refuses_git_until_it_goes(workspace: Path, tree_size: str) -> None:
    guard = GitGuard([str(workspace)])
    fifo = workspace / "src" / ".gitignore"
    fifo.parent.mkdir()
    with guard.writing():
        os.mkfifo(fifo)
    done = guarded(guard, workspace, "status")
    assert done.returncode == 128 and DISABLED in done.stderr and "fifo" in done.stderr
    with guard.writing():
        fifo.unlink()
    assert guarded(guard, workspace, "status").returncode == 0


def test_a_removed_repository_s_drivers_are_dropped(workspace: Path, markers: Path) -> None:
    plant(workspace / "sub", markers)
    guard = GitGuard([str(workspace)])
    assert "filter.evil.process" in guard.env().values()
    with guard.writing():
        subprocess.run(["rm", "-rf", str(workspace / "sub")], check=True)
    assert "filter.evil.process" not in guard.env().values()


def test_a_tree_past_the_entry_bound_refuses_git(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = workspace / "many"
    many.mkdir()
    for index in range(150):
        (many / f"f{index}").touch()
    monkeypatch.setattr(git_tree, "GIT_SCAN_MAX_ENTRIES", 200)
    assert guarded(GitGuard([str(workspace)]), workspace, "status").returncode == 0
    monkeypatch.setattr(git_tree, "GIT_SCAN_MAX_ENTRIES", 100)
    done = guarded(GitGuard([str(workspace)]), workspace, "status")
    assert done.returncode == 128 and DISABLED in done.stderr
    assert "over 100 entries" in done.stderr


def test_the_first_look_runs_in_the_background_and_the_first_command_waits(
    workspace: Path, markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(workspace / "sub", markers)
    looked_on: list[str] = []
    run = RepositoryScan.run

    def slow_run(scan: RepositoryScan) -> RepositoryScan:
        looked_on.append(threading.current_thread().name)
        time.sleep(0.3)
        return run(scan)

    monkeypatch.setattr(RepositoryScan, "run", slow_run)
    guard = GitGuard([str(workspace)])
    guard.start()
    while not looked_on:  # the look is under way, in the background
        time.sleep(0.01)
    started = time.monotonic()
    assert guarded(guard, workspace / "sub", "status").returncode == 0
    assert time.monotonic() - started >= 0.25  # it waited for the look to end
    assert list(markers.iterdir()) == []
    assert len(looked_on) == 2 and threading.main_thread().name not in looked_on


# What someone who controls the repository and the commands may try against the tiers.


def test_a_git_link_pointed_elsewhere_is_seen_before_the_next_command(
    workspace: Path, tmp_path: Path, markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `.git` entry's stamp follows the link: the git tier sees it, no tree look needed."""
    monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    plant(tmp_path / "evil", markers)
    (workspace / "store").mkdir()
    (tmp_path / "evil" / ".git").rename(workspace / "store" / "evil.git")
    host_git(tmp_path, "init", "-q", "plain")
    (tmp_path / "plain" / ".git").rename(workspace / "store" / "plain.git")
    sub = workspace / "sub"
    sub.mkdir()
    for name in (".gitattributes", "a.txt"):
        (tmp_path / "evil" / name).rename(sub / name)
    (sub / ".git").symlink_to("../store/plain.git")
    guard = GitGuard([str(workspace)])
    guarded(guard, workspace, "status")
    (sub / "swap").symlink_to("../store/evil.git")
    (sub / "swap").rename(sub / ".git")
    os.utime(sub / "a.txt", (STALE, STALE))
    guarded(guard, sub, "status")
    assert list(markers.iterdir()) == []


def test_setting_a_directory_s_mtime_back_hides_nothing(
    workspace: Path, markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    (workspace / "deep").mkdir()
    guard = GitGuard([str(workspace)])
    guarded(guard, workspace, "status")
    before = os.stat(workspace / "deep")
    with guard.writing():
        plant(workspace / "deep" / "sub", markers)
        os.utime(workspace / "deep", ns=(before.st_atime_ns, before.st_mtime_ns))
    guarded(guard, workspace / "deep" / "sub", "status")
    assert list(markers.iterdir()) == []


def test_a_directory_closed_then_opened_again_is_looked_into(
    workspace: Path, markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    closed = workspace / "closed"
    plant(closed / "sub", markers)
    closed.chmod(0)
    guard = GitGuard([str(workspace)])
    try:
        guarded(guard, workspace, "status")
    finally:
        with guard.writing():
            closed.chmod(0o755)
    guarded(guard, closed / "sub", "status")
    assert list(markers.iterdir()) == []


def test_a_gitmodules_rewritten_in_place_is_read_again(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    modules = workspace / ".gitmodules"
    modules.write_text("")
    guard = GitGuard([str(workspace)])
    assert "submodule.lib.ignore" not in guard.env().values()
    modules.write_text('[submodule "lib"]\n\tpath = lib\n')
    assert "submodule.lib.ignore" in guard.env().values()


def test_a_core_worktree_outside_set_later_refuses_git(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    (tmp_path / "extra").mkdir()  # an extra read-only directory: walked as well
    (tmp_path / "elsewhere").mkdir()
    guard = GitGuard([str(workspace), str(tmp_path / "extra")])
    assert guarded(guard, workspace, "status").returncode == 0
    with (workspace / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tworktree = {tmp_path / 'elsewhere'}\n")
    done = guarded(guard, workspace, "status")
    assert done.returncode == 128 and DISABLED in done.stderr


def test_a_fifo_a_command_plants_in_a_git_directory_refuses_git(
    workspace: Path, markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    plant(workspace / "sub", markers)
    guard = GitGuard([str(workspace)])
    guarded(guard, workspace, "status")
    with guard.writing():
        os.mkfifo(workspace / "sub" / ".git" / "refs" / "heads" / "waits")
    done = guarded(guard, workspace / "sub", "status")
    assert done.returncode == 128 and "fifo" in done.stderr


def test_new_loose_objects_and_refs_are_taken_without_reading_the_repository_again(
    workspace: Path, markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit in a nested repository adds files to its git directory's inner
    directories: the tree look takes them as they are; a FIFO among them is refused."""
    monkeypatch.setattr(git_guard, "GIT_TREE_INLINE_DIRECTORIES", 0)
    plant(workspace / "sub", markers)
    time.sleep(0.2)  # past git_scan.GIT_RACY_NS: the stamps of the first look settle
    guard = GitGuard([str(workspace)])
    guarded(guard, workspace, "status")
    runs: list[str] = []
    run = RepositoryScan.run

    def counted(scan: RepositoryScan) -> RepositoryScan:
        runs.append(scan.dotgit)
        return run(scan)

    monkeypatch.setattr(RepositoryScan, "run", counted)
    heads = workspace / "sub" / ".git" / "refs" / "heads"
    with guard.writing():
        (heads / "another").write_text((heads / "main").read_text())
    assert guarded(guard, workspace / "sub", "status").returncode == 0
    assert runs == []
    with guard.writing():
        os.mkfifo(heads / "waits")
    done = guarded(guard, workspace / "sub", "status")
    assert done.returncode == 128 and "fifo" in done.stderr
    with guard.writing():
        (heads / "waits").unlink()
    assert guarded(guard, workspace / "sub", "status").returncode == 0


def test_a_directory_changed_in_the_tick_of_a_look_is_listed_again(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel keeps times to a tick: a change right after a look, in the same tick,
    would leave the directory's ctime as the look saw it. A recent ctime is not trusted."""
    (workspace / "fresh").mkdir()
    tree = git_tree.WorkspaceTree([str(workspace)])
    monkeypatch.setattr(git_scan, "GIT_RACY_NS", 3600 * 10**9)  # everything here is recent
    assert tree.refresh()
    assert tree.refresh()  # listed again, though nothing moved
    monkeypatch.setattr(git_scan, "GIT_RACY_NS", 0)
    assert tree.refresh()  # the stamps settle
    assert not tree.refresh()
