"""The git guard's seed: the host's walk that a sandbox's guard starts from. A seed saves
the first look's listings; stale, forged or broken, it never lets a repository's driver run.

The guard runs in this process, as in the tool server, with the helpers and marker
technique of test_git_guard: a planted repository's filter leaves a marker if it runs.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from sandbox_runner.sandbox.guard_seed import GuardSeed, write_seed
from sandbox_runner.sandbox.host_walk.shared import NO_SEED, SEED_FILE, seed_root
from sandbox_runner.sandbox.toolserver import git_seed
from sandbox_runner.sandbox.toolserver.git_guard import GitGuard
from sandbox_runner.sandbox.toolserver.git_scan import Stamp
from sandbox_runner.sandbox.toolserver.git_seed import SeedError, load_seed
from sandbox_runner.sandbox.toolserver.git_tree import Directory, WorkspaceTree
from tests.unit.test_git_guard import arm, guarded, host_git, plant

# A directory changed within GIT_RACY_NS of a look is never taken as it was: the tests
# wait that long before the host walks, so that the seed holds every directory.
SETTLE_SECONDS = 0.15


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    directory = tmp_path / "markers"
    directory.mkdir()
    return directory


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A repository with a few directories, one holding a nested repository whose config
    is not armed yet."""
    root = tmp_path / "ws"
    for number in range(20):
        (root / "pkg" / f"mod{number}").mkdir(parents=True)
        (root / "pkg" / f"mod{number}" / "a.py").write_text("x = 1\n")
    host_git(root, "init", "-q")
    host_git(root, "add", ".")
    host_git(root, "commit", "-qm", "top")
    nested = root / "vendor" / "lib"
    nested.mkdir(parents=True)
    host_git(nested, "init", "-q")
    return root


def seed_of(workspace: Path, tmp_path: Path) -> Path:
    time.sleep(SETTLE_SECONDS)
    seed = write_seed(workspace, tmp_path / "seeds")
    assert seed is not None
    return seed


def rows(seed: Path) -> list[list[object]]:
    data = json.loads(seed.read_bytes())
    assert isinstance(data["directories"], list)
    return data["directories"]


def rewrite(seed: Path, directories: list[list[object]]) -> None:
    data = json.loads(seed.read_bytes())
    data["directories"] = directories
    seed.write_text(json.dumps(data))


def test_a_seeded_guard_gives_the_same_environment_without_listing_again(
    workspace: Path, markers: Path, tmp_path: Path
) -> None:
    plant(workspace / "deep" / "sub", markers)
    seed = seed_of(workspace, tmp_path)
    seeded = GitGuard([str(workspace)], str(seed))
    unseeded = GitGuard([str(workspace)])
    assert seeded.env() == unseeded.env()
    assert "filter.evil.process" in seeded.env().values()
    assert seeded.tree_size() == unseeded.tree_size()
    assert seeded.first_look is not None and unseeded.first_look is not None
    assert seeded.first_look[1] == len(rows(seed)) == seeded.tree_size()[0]
    assert unseeded.first_look[1] == 0
    assert guarded(seeded, workspace / "deep" / "sub", "status").returncode == 0
    assert list(markers.iterdir()) == []


def test_a_repository_planted_after_the_seed_is_found(
    workspace: Path, markers: Path, tmp_path: Path
) -> None:
    seed = seed_of(workspace, tmp_path)
    plant(workspace / "pkg" / "mod3" / "sub", markers)
    guard = GitGuard([str(workspace)], str(seed))
    done = guarded(guard, workspace / "pkg" / "mod3" / "sub", "status")
    assert done.returncode == 0, done.stderr
    assert list(markers.iterdir()) == []
    assert guard.first_look is not None and guard.first_look[1] > 0


def test_a_config_armed_after_the_seed_is_read(
    workspace: Path, markers: Path, tmp_path: Path
) -> None:
    nested = workspace / "vendor" / "lib"
    (nested / ".gitattributes").write_text("*.txt filter=late\n")
    (nested / "a.txt").write_text("one\n")
    host_git(nested, "add", ".")
    host_git(nested, "commit", "-qm", "one")
    seed = seed_of(workspace, tmp_path)
    arm(nested / ".git" / "config", markers, "late")
    os.utime(nested / "a.txt", (978307200, 978307200))
    guard = GitGuard([str(workspace)], str(seed))
    assert guarded(guard, nested, "status").returncode == 0
    assert list(markers.iterdir()) == []


@pytest.mark.parametrize("forgery", ["stamps", "emptied"])
def test_a_seed_forged_to_show_no_repository_hides_none(
    workspace: Path, markers: Path, tmp_path: Path, forgery: str
) -> None:
    """Stamps that are not the directories' own are listed again; a seed emptied of its
    rows is a walk of everything."""
    plant(workspace / "pkg" / "mod7" / "sub", markers)
    seed = seed_of(workspace, tmp_path)
    forged = []
    if forgery == "stamps":
        for relative, numbers, entries, *_ in rows(seed):
            assert isinstance(numbers, list)
            forged.append([relative, [*numbers[:4], 1], entries, [], [], False, False, False])
    rewrite(seed, forged)
    guard = GitGuard([str(workspace)], str(seed))
    assert guarded(guard, workspace / "pkg" / "mod7" / "sub", "status").returncode == 0
    assert "filter.evil.process" in guard.env().values()
    assert list(markers.iterdir()) == []


@pytest.mark.parametrize(
    "row",
    [
        ["../outside", [1, 2, 3, 4, 5], 0, [], [], False, False, False],
        ["pkg", [1, 2, 3, 4, 5], 0, ["/etc"], [], False, False, False],
        ["pkg", [1, 2, 3, 4, 5], 0, [".."], [], False, False, False],
        ["pkg", [1, 2, 3, 4, 5], 0, ["a\0b"], [], False, False, False],
        ["pkg", [1, 2, 3, 4, -5], 0, [], [], False, False, False],
        ["pkg", [1, 2, 3, 4, True], 0, [], [], False, False, False],
        ["pkg", [1, 2, 3, 4, 5], 0, [], None, False, False, False],
        ["pkg", [1, 2, 3, 4], 0, [], [], False, False, False],
        ["pkg", [1, 2, 3, 4, 5], 0, [], [], 1, False, False],
        ["pkg", [1, 2, 3, 4, 5], 0, [], [], False, False, None],
        ["pkg", [1, 2, 3, 4, 5], 0, [], [], False, False],
    ],
)
def test_a_malformed_row_drops_the_whole_seed(
    workspace: Path, tmp_path: Path, row: list[object]
) -> None:
    seed = seed_of(workspace, tmp_path)
    rewrite(seed, [*rows(seed), row])
    tree = WorkspaceTree([str(workspace)])
    with pytest.raises(SeedError):
        load_seed(tree, str(seed))
    assert tree.directories == {}
    assert tree.entries == 0


@pytest.mark.parametrize(
    "content", [b"not json", b"[]", b'{"format": "planrun-git-seed", "version": 2}']
)
def test_a_broken_seed_leaves_the_guard_walking_everything(
    workspace: Path, markers: Path, tmp_path: Path, content: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_seed, "SEED_WAIT_SECONDS", 0.2)  # for the one never written
    plant(workspace / "sub", markers)
    seed = tmp_path / "broken.json"
    seed.write_bytes(content)
    for path in (str(seed), str(tmp_path / "missing.json")):
        guard = GitGuard([str(workspace)], path)
        assert guarded(guard, workspace / "sub", "status").returncode == 0
        assert guard.first_look is not None and guard.first_look[1] == 0
    assert list(markers.iterdir()) == []


def test_the_host_follows_no_link_out_of_the_workspace(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    plant(outside, tmp_path)
    (workspace / "linked").symlink_to(outside)
    seed = seed_of(workspace, tmp_path)
    directories = {row[0] for row in rows(seed)}
    assert "" in directories and "pkg/mod0" in directories
    assert all(isinstance(relative, str) for relative in directories)
    assert [row[4] for row in rows(seed) if row[0] == ""] == [["linked"]]
    assert not any(str(outside) in str(relative) for relative in directories)


def test_a_fresh_seed_leaves_nothing_to_list_even_names_not_utf8(
    workspace: Path, tmp_path: Path
) -> None:
    odd = os.fsdecode(b"caf\xe9")
    (workspace / odd).mkdir()
    host_git(workspace, "init", "-q", "--bare", "store.git")  # a git directory by another name
    (workspace / ".gitmodules").write_text("")
    (workspace / "pkg" / "link").symlink_to("mod1")
    seed = seed_of(workspace, tmp_path)
    tree = WorkspaceTree([str(workspace)])
    assert load_seed(tree, str(seed)) == len(rows(seed))
    assert os.path.join(str(workspace), odd) in tree.directories
    listed: list[str] = []
    look = tree.look

    def counted(directory: str, stamp: Stamp, depth: int) -> Directory:
        listed.append(directory)
        return look(directory, stamp, depth)

    tree.look = counted  # type: ignore[method-assign]
    tree.refresh()
    assert listed == []  # every stamp matched: no directory was listed again
    records = tree.directories.values()
    assert all(any(getattr(record, name) for record in records) for name in NAMED_FIELDS)
    walked = WorkspaceTree([str(workspace)])
    walked.refresh()
    assert walked.entries == tree.entries
    assert fields(walked) == fields(tree)


NAMED_FIELDS = ("dot_git", "git_dir", "gitmodules", "links", "subdirectories")


def fields(tree: WorkspaceTree) -> dict[str, dict[str, object]]:
    """Every field of every directory record (a field the seed forgot would differ)."""
    return {
        path: {name: getattr(record, name) for name in Directory.__slots__}
        for path, record in tree.directories.items()
    }


def test_the_seed_is_made_once_in_the_background(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandboxes of a batch's tasks (a factory each) share one walk and one seed."""
    monkeypatch.setenv("PLANRUN_HOME", str(tmp_path / "home"))
    time.sleep(SETTLE_SECONDS)
    seed = GuardSeed(workspace)
    assert seed.path() is None  # never started: the sandbox walks for itself
    seed.start()
    seed.start()
    directory = seed.path()
    assert directory is not None and directory.parent == seed_root()
    other = GuardSeed(workspace)
    other.start()
    assert other.path() == directory  # the walk under way is taken, not begun again
    made = directory / SEED_FILE
    deadline = time.monotonic() + 30
    while not made.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert made.stat().st_mode & 0o777 == 0o644
    assert [path.name for path in seed_root().iterdir()] == [directory.name]
    assert rows(made)


@pytest.mark.parametrize("host", ["says none", "says nothing", "is late"])
def test_the_guard_waits_for_the_seed_only_as_long_as_one_may_come(
    host: str, workspace: Path, markers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox starts before the host's walk is done: its guard waits for the seed,
    and walks for itself when the host says none is coming or none comes in time."""
    plant(workspace / "deep" / "sub", markers)
    made = seed_of(workspace, tmp_path)
    directory = tmp_path / "seed-dir"
    directory.mkdir()
    monkeypatch.setattr(git_seed, "SEED_WAIT_SECONDS", 0.5 if host == "says nothing" else 30)
    if host == "says none":
        (directory / NO_SEED).write_bytes(b"")
    elif host == "is late":
        threading.Timer(0.3, lambda: os.replace(made, directory / SEED_FILE)).start()
    guard = GitGuard([str(workspace)], str(directory / SEED_FILE))
    started = time.monotonic()
    assert "filter.evil.process" in guard.env().values()
    assert guarded(guard, workspace / "deep" / "sub", "status").returncode == 0
    assert list(markers.iterdir()) == []  # the planted driver never ran
    assert guard.first_look is not None
    if host == "is late":
        assert guard.first_look[1] > 0 and guard.seed_wait >= 0.25
    else:
        assert guard.first_look[1] == 0
        assert time.monotonic() - started < (2 if host == "says none" else 5)
