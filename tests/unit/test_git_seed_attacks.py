"""Attacks on the git guard's seed: a workspace changed between the host's walk and the
sandbox's look, in ways that keep some directories' stamps (renames keep a subtree's
inodes and ctimes; a filesystem with whole-second times keeps a directory's ctime through
a change in the same second), and a seed that something other than the host could write.
Each plants a repository whose filter leaves a marker if it runs (test_git_guard).
"""

from __future__ import annotations

import os
import shutil
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from sandbox_runner.sandbox.git_mounts import clean_config_copies
from sandbox_runner.sandbox.guard_seed import GuardSeed, write_seed
from sandbox_runner.sandbox.toolserver import git_scan, git_tree
from sandbox_runner.sandbox.toolserver.git_guard import GitGuard
from sandbox_runner.sandbox.toolserver.git_scan import Stamp, stamp_from
from tests.unit.test_git_guard import STALE, arm, guarded, host_git, plant
from tests.unit.test_git_seed import markers, rows, seed_of, workspace

__all__ = ["markers", "workspace"]  # the fixtures, shared with test_git_seed


def test_a_subtree_moved_after_the_seed_is_listed_at_its_new_path(
    workspace: Path, markers: Path, tmp_path: Path
) -> None:
    """A rename keeps the moved directories' inodes and (below the top) ctimes: the seed's
    rows are by path, so the new paths have none and the old ones are dropped."""
    seed = seed_of(workspace, tmp_path)
    plant(workspace / "pkg" / "mod3" / "sub", markers)
    (workspace / "pkg").rename(workspace / "moved")
    guard = GitGuard([str(workspace)], str(seed))
    assert guarded(guard, workspace / "moved" / "mod3" / "sub", "status").returncode == 0
    assert list(markers.iterdir()) == []
    assert guard.first_look is not None and guard.first_look[1] > 0


def test_two_subtrees_swapped_after_the_seed_hide_no_repository(
    workspace: Path, markers: Path, tmp_path: Path
) -> None:
    """Each path then holds the other's directories, whose stamps are all the seed's: the
    inode in the stamp tells them apart."""
    plant(workspace / "alt" / "mod3" / "sub", markers)
    seed = seed_of(workspace, tmp_path)
    (workspace / "pkg").rename(workspace / "swap")
    (workspace / "alt").rename(workspace / "pkg")
    (workspace / "swap").rename(workspace / "alt")
    guard = GitGuard([str(workspace)], str(seed))
    assert "filter.evil.process" in guard.env().values()
    assert guarded(guard, workspace / "pkg" / "mod3" / "sub", "status").returncode == 0
    assert list(markers.iterdir()) == []


def test_a_nested_git_directory_replaced_after_the_seed(
    workspace: Path, markers: Path, tmp_path: Path
) -> None:
    """The seed says only that `.git` is there; what it holds is read in the sandbox."""
    nested = workspace / "vendor" / "lib"
    other = tmp_path / "other"
    plant(other, markers)
    seed = seed_of(workspace, tmp_path)
    shutil.rmtree(nested / ".git")
    (other / ".git").rename(nested / ".git")
    for name in (".gitattributes", "a.txt"):
        (other / name).rename(nested / name)
    guard = GitGuard([str(workspace)], str(seed))
    assert guarded(guard, nested, "status").returncode == 0
    assert list(markers.iterdir()) == []


def test_a_repository_cloned_again_at_the_same_path(
    workspace: Path, markers: Path, tmp_path: Path
) -> None:
    """The seed is named by the workspace's path alone: a new tree there (whose directories
    may reuse the old inodes) has other ctimes."""
    seed = seed_of(workspace, tmp_path)
    shutil.rmtree(workspace)
    for number in range(20):
        (workspace / "pkg" / f"mod{number}").mkdir(parents=True)
    host_git(workspace, "init", "-q")
    plant(workspace / "pkg" / "mod3", markers)
    time.sleep(0.15)
    guard = GitGuard([str(workspace)], str(seed))
    assert guarded(guard, workspace / "pkg" / "mod3", "status").returncode == 0
    assert list(markers.iterdir()) == []


def coarse_stamp(
    info: os.stat_result, now: int | None = None, stamp: Callable[..., Stamp] = stamp_from
) -> Stamp:
    """The stamp a filesystem keeping whole seconds (ext4 with 128-byte inodes, ext3, HFS+
    under Docker Desktop, some network filesystems) would give."""
    coarse = types.SimpleNamespace(
        st_dev=info.st_dev,
        st_ino=info.st_ino,
        st_mode=info.st_mode,
        st_size=info.st_size,
        st_mtime_ns=info.st_mtime_ns // 10**9 * 10**9,
        st_ctime_ns=info.st_ctime_ns // 10**9 * 10**9,
    )
    return stamp(cast(os.stat_result, coarse), now)


@pytest.fixture
def whole_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stamp the guard takes as on a filesystem keeping whole seconds."""
    monkeypatch.setattr(git_tree, "stamp_from", coarse_stamp)
    monkeypatch.setattr(git_scan, "stamp_from", coarse_stamp)


def in_one_second(
    before: Callable[[], None], look: Callable[[], None], after: Callable[[], object]
) -> None:
    """BEFORE 50 ms into a second, LOOK 250 ms later (past GIT_RACY_NS), AFTER at once:
    all in the same second (tried in three)."""
    for _ in range(3):
        time.sleep(1.05 - time.time() % 1)
        second = int(time.time())
        before()
        time.sleep(0.25)
        look()
        after()
        if int(time.time()) == second:
            return
    pytest.skip("the machine is too slow to act within one second")


@pytest.mark.usefixtures("whole_seconds")
@pytest.mark.parametrize("looker", ["host walk", "guard's own look"])
def test_a_repository_planted_in_the_second_of_a_look_on_whole_second_times(
    workspace: Path, markers: Path, tmp_path: Path, looker: str
) -> None:
    """A directory changed early in a second, looked at 250 ms later (not racy by 100 ms),
    then given a repository in the same second: its ctime, mtime and size stay those of
    the look. The racy rule must span the filesystem's tick, not the kernel clock's."""
    target = workspace / "pkg" / "mod3"
    planted = tmp_path / "planted"
    plant(planted, markers)
    seeds: list[Path | None] = []
    guards: list[GitGuard] = []

    def look() -> None:
        if looker == "host walk":
            seeds.append(write_seed(workspace, tmp_path / "seeds"))
        else:
            guards.append(GitGuard([str(workspace)]))
            assert "filter" not in str(guards[-1].env())

    def before() -> None:
        if (target / "sub").exists():
            (target / "sub").rename(planted)  # a second that ran out: undone
        (target / f"touched{time.time_ns()}").write_text("")
        seeds.clear()
        guards.clear()

    in_one_second(before, look, lambda: planted.rename(target / "sub"))
    guard = guards[0] if guards else GitGuard([str(workspace)], str(seeds[0]))
    assert guarded(guard, target / "sub", "status").returncode == 0
    assert list(markers.iterdir()) == []


@pytest.mark.usefixtures("whole_seconds")
def test_a_config_rewritten_to_its_size_in_the_second_of_a_look(
    workspace: Path, markers: Path
) -> None:
    """A config file rewritten in place to the same size in the second the guard read it
    keeps its stamp on a filesystem keeping whole seconds: its filter must still be seen."""
    nested = workspace / "vendor" / "lib"
    (nested / ".gitattributes").write_text("*.txt filter=evil\n")
    (nested / "a.txt").write_text("one\n")
    host_git(nested, "add", ".")
    host_git(nested, "commit", "-qm", "one")
    os.utime(nested / "a.txt", (STALE, STALE))
    config = nested / ".git" / "config"
    original = config.read_bytes()
    arm(config, markers, "evil")
    armed = config.read_bytes()
    padded = original + b"#" * (len(armed) - len(original) - 1) + b"\n"
    guard = GitGuard([str(workspace)])

    def write(data: bytes) -> Callable[[], None]:
        def rewrite() -> None:
            with config.open("r+b") as file:
                file.write(data)

        return rewrite

    def look() -> None:
        assert "filter" not in str(guard.env())

    in_one_second(write(padded), look, write(armed))
    assert guarded(guard, nested, "status").returncode == 0
    assert list(markers.iterdir()) == []


@pytest.mark.parametrize("where", ["inside", "linked"])
def test_no_seed_is_written_where_a_sandbox_could_write(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """PLANRUN_HOME in the workspace (or a cache linked into it): a work sandbox, which
    writes the workspace, could replace the seed that later sandboxes trust."""
    home = workspace / ".planrun"
    if where == "linked":
        home = tmp_path / "home"
        (home / "cache").mkdir(parents=True)
        (workspace / "cache").mkdir()
        (home / "cache" / "git-seed").symlink_to(workspace / "cache")
    monkeypatch.setenv("PLANRUN_HOME", str(home))
    time.sleep(0.15)
    seed = GuardSeed(workspace)
    seed.start()
    assert seed.path() is None
    assert not any(path.suffix == ".json" for path in workspace.rglob("*"))
    assert rows(seed_of(workspace, tmp_path))  # elsewhere, the seed is written


def test_a_clean_config_copy_planted_in_the_cache_is_written_again(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clean copies are named by their content: a file planted under the name a copy
    will have (by a sandbox that writes the cache, PLANRUN_HOME being in its workspace)
    is never mounted as the repository's config."""
    monkeypatch.setenv("PLANRUN_HOME", str(tmp_path / "home"))
    [(copy, target)] = clean_config_copies(workspace)
    clean = copy.read_bytes()
    copy.write_text('[filter "evil"]\n\tclean = touch /tmp/pwned\n')
    assert clean_config_copies(workspace) == [(copy, target)]
    assert copy.read_bytes() == clean
    copy.unlink()
    copy.symlink_to(tmp_path / "elsewhere")
    assert clean_config_copies(workspace) == [(copy, target)]
    assert not copy.is_symlink() and copy.read_bytes() == clean
