"""The host's one walk of a workspace (GNU find): its records match a walk in Python entry
for entry, the seed it makes is exactly what the git guard's own look records, and a seed
is only ever left short (never wrong) when the walk cannot vouch for a directory."""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import termios
import time
import zlib
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.runs.workspace_check import take_files
from sandbox_runner.sandbox.host_walk import find, tree_fingerprint
from sandbox_runner.sandbox.host_walk.find import SeedParts, Walk, gnu_find, walk
from sandbox_runner.sandbox.host_walk.python_walk import python_walk
from sandbox_runner.sandbox.host_walk.seed import seed_from_walk
from sandbox_runner.sandbox.host_walk.shared import prune_seeds, seed_root
from sandbox_runner.sandbox.host_walk.tree import FileTree, records
from sandbox_runner.sandbox.toolserver.git_tree import WorkspaceTree
from tests.unit.test_git_guard import host_git

pytestmark = pytest.mark.skipif(gnu_find() is None, reason="GNU find is not installed")
SETTLE_SECONDS = 0.15
"""Past GIT_RACY_NS: a directory changed within it of the walk is left out of a seed."""


class GuardsOwnLook(WorkspaceTree):
    """The guard's look of the workspace alone, as the host's seed describes it."""

    def link(self, path: str) -> tuple[bool, str | None]:
        return False, None


def tricky(root: Path) -> Path:
    """What the guard treats apart: repositories nested and under other names, `.git`
    files and links, `.gitmodules` files and directories, links, odd names."""
    for directory in ("src/pkg", "vendor/lib", "docs/.gitmodules", "store/refs", "deep/a/b/c"):
        (root / directory).mkdir(parents=True)
    (root / "src" / "pkg" / "a.py").write_text("x = 1\n")
    host_git(root, "init", "-q")
    host_git(root / "vendor" / "lib", "init", "-q")
    (root / ".gitmodules").write_text("")
    (root / "store" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "src" / ".git").write_text("gitdir: ../.git\n")
    (root / "deep" / "a" / ".git").symlink_to("../../.git")
    (root / "link-to-src").symlink_to("src")
    (root / "dangling").symlink_to("nowhere")
    (root / os.fsdecode(b"caf\xe9")).mkdir()
    (root / "new\nline.txt").write_text("x")
    (root / "with space").mkdir()
    os.mkfifo(root / "pipe")
    return root


def guard_rows(root: Path) -> dict[str, list[object]]:
    tree = GuardsOwnLook([str(root)])
    tree.refresh()
    rows = {}
    for path, record in tree.directories.items():
        if record.refusal is not None:
            continue
        relative = os.path.relpath(path, root)
        name = lambda full: os.path.basename(full)  # noqa: E731
        rows["" if relative == "." else relative] = [
            record.stamp[1:],
            record.entries,
            sorted(map(name, record.subdirectories)),
            sorted(map(name, record.links)),
            record.dot_git is not None,
            record.gitmodules is not None,
            record.git_dir is not None,
        ]
    return rows


def seed_rows(data: bytes | None) -> dict[str, list[object]]:
    assert data is not None
    rows = json.loads(data)["directories"]
    return {
        row[0]: [tuple(row[1]), row[2], sorted(row[3]), sorted(row[4]), *row[5:]] for row in rows
    }


def test_find_and_python_record_the_same_entries(tmp_path: Path) -> None:
    root = tricky(tmp_path / "ws")
    by_find = walk(root).tree
    by_python = python_walk(str(root), None, None)
    assert dict(records(by_find.stream)) == dict(records(by_python.stream))
    assert by_find.entries == by_python.entries
    assert by_find.changes(by_python).listed == ()  # another order is no change


def test_the_seed_is_what_the_guard_s_own_look_records(tmp_path: Path) -> None:
    root = tricky(tmp_path / "ws")
    time.sleep(SETTLE_SECONDS)
    done = walk(root, seed=True)
    assert done.seed is not None
    seeded = seed_rows(seed_from_walk(done.seed, str(root)))
    assert seeded == guard_rows(root)
    assert seeded["store"][-1] is True  # a git directory under another name
    assert seeded["src"][4] is True and seeded["deep/a"][4] is True  # `.git` file, link
    assert ".git" not in str(seeded[""][2])  # the guard does not walk into `.git`
    assert not any(path.startswith(".git") for path in seeded)


def test_a_directory_the_walk_cannot_vouch_for_is_left_to_the_sandbox(tmp_path: Path) -> None:
    root = tricky(tmp_path / "ws")
    (root / "out").mkdir()
    os.mkfifo(root / "src" / "pkg" / ".gitignore")  # the guard looks closer at such a one
    time.sleep(SETTLE_SECONDS)
    (root / "docs" / "fresh").mkdir()  # changed in the walk's tick: racy
    done = walk(root, exclude=root / "out", seed=True)
    assert done.seed is not None
    seeded = seed_rows(seed_from_walk(done.seed, str(root)))
    assert "src/pkg" not in seeded
    assert "docs" not in seeded and "docs/fresh" not in seeded
    # The workspace's own listing lacks the directory left out: the sandbox lists it.
    assert "" not in seeded and "out" not in seeded
    assert "src" in seeded and "vendor/lib" in seeded
    assert not any(path.startswith(b"out") for path, _ in records(done.tree.stream))


def test_a_complaint_the_walk_cannot_explain_makes_no_seed(tmp_path: Path) -> None:
    root = tricky(tmp_path / "ws")
    done = walk(root, seed=True)
    assert done.seed is not None
    parts = done.seed
    unexplained = SeedParts(parts.files, parts.started_ns, (), 1, None)
    assert seed_from_walk(unexplained, str(root)) is None
    unreadable = SeedParts(parts.files, parts.started_ns - 10**9, ("src",), 1, None)
    assert "src" not in seed_rows(seed_from_walk(unreadable, str(root)))


def test_an_unreadable_directory_is_told_from_an_empty_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """find says it could not list a directory: it is named, and an empty one is not."""
    root = tricky(tmp_path / "ws")
    (root / "empty").mkdir()
    done = walk(root, seed=True)
    real_scandir = os.scandir

    def refuse(path: str) -> object:
        if path.endswith("/deep/a/b/c"):
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    complaint = [b"find: './deep/a/b/c': Permission denied"]
    assert done.seed is not None
    assert find._unreadable(str(root), done.seed.files, complaint) == ["deep/a/b/c"]
    assert find._unreadable(str(root), None, complaint) == ["deep/a/b/c"]
    assert find._unexplained(complaint * 2, 1) == (
        "1 more that find could not read, such as './deep/a/b/c': Permission denied",
    )


def test_a_walk_past_its_time_limit_is_not_complete(tmp_path: Path) -> None:
    root = tricky(tmp_path / "ws")
    late = walk(root, time_limit=0).tree
    assert not late.complete and late.digest == ""
    assert tree_fingerprint(root, time_limit=0) is None


def test_records_stream_compressed_and_name_each_change(tmp_path: Path) -> None:
    root = tricky(tmp_path / "ws")
    before = walk(root).tree
    (root / "src" / "pkg" / "b.py").write_text("y = 2\n")
    (root / "dangling").unlink()
    after = walk(root).tree
    assert before.digest != after.digest
    assert [str(change) for change in before.changes(after).listed] == [
        "dangling (removed)",
        "src/pkg/b.py (added)",
    ]
    raw = zlib.decompress(b"".join(after.stream))
    assert raw.count(b"\0") == 3 * after.entries


def test_a_digest_does_not_depend_on_the_walk_s_priority(tmp_path: Path) -> None:
    root = tricky(tmp_path / "ws")
    assert walk(root, background=True).tree.digest == walk(root).tree.digest
    empty = FileTree("v2:x", 0, 0.0)
    assert list(records(empty.stream)) == []


def test_gc_prunes_the_seeds_of_processes_that_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANRUN_HOME", str(tmp_path / "home"))
    root = seed_root()
    for name in (f"{os.getpid()}-0", "1-3", "999999999-0"):
        (root / name).mkdir(parents=True)
        (root / name / "seed.json").write_text("{}")
    (root / "0f1e2d.json").write_text("{}")  # an earlier planrun's seed file
    assert prune_seeds() == 2
    assert sorted(path.name for path in root.iterdir()) == ["1-3", f"{os.getpid()}-0"]
    assert prune_seeds(everything=True) == 1  # a running process's too; never our own
    assert [path.name for path in root.iterdir()] == [f"{os.getpid()}-0"]


@pytest.mark.parametrize("link", ["git-seed", "cache"])
def test_gc_follows_no_link_out_of_planrun_s_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, link: str
) -> None:
    """PLANRUN_HOME in a repository: what a sandbox writes there, or a stranger's pull
    request holds, may make the cache a link to the user's own files. gc removes
    nothing there, however the names look."""
    home, elsewhere = tmp_path / "ws" / ".planrun", tmp_path / "documents"
    monkeypatch.setenv("PLANRUN_HOME", str(home))
    (elsewhere / "git-seed").mkdir(parents=True)
    for directory in (elsewhere, elsewhere / "git-seed"):
        (directory / "notes.txt").write_text("mine")
        (directory / "0badc0de.json").write_text("{}")
        (directory / "999999999-0").mkdir()
    (home / "cache").mkdir(parents=True)
    if link == "git-seed":
        (home / "cache" / "git-seed").symlink_to(elsewhere)
    else:
        (home / "cache").rmdir()
        (home / "cache").symlink_to(elsewhere)
    assert prune_seeds(everything=True) == 0
    for directory in (elsewhere, elsewhere / "git-seed"):
        names = sorted(path.name for path in directory.iterdir())
        assert {"0badc0de.json", "999999999-0", "notes.txt"} <= set(names)


def test_gc_removes_only_the_names_planrun_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANRUN_HOME", str(tmp_path / "home"))
    root = seed_root()
    root.mkdir(parents=True)
    for name in ("99999999999999999999-0", "12-x", "notes"):
        (root / name).mkdir()
    (root / "notes.txt").write_text("not a seed")
    (root / ".partial-k2j3").write_text("")
    (root / "0f1e2d.json").write_text("{}")
    assert prune_seeds() == 3  # a pid no process can have, a write cut short, a seed file
    assert sorted(path.name for path in root.iterdir()) == ["12-x", "notes", "notes.txt"]


def test_a_seed_stamp_is_racy_for_the_filesystem_s_whole_tick() -> None:
    """On a filesystem keeping whole seconds, a directory changed in the second of the
    walk could change again with the same stamp: it is left out for 2.1 s, not 0.1 s."""
    from sandbox_runner.sandbox.host_walk.seed import _stamp

    second = 1_000 * 10**9
    whole = "7 42 755 4096 1000.0000000000 1000.0000000000 1"
    assert _stamp(whole, 7, second + 1_500_000_000) is None
    assert _stamp(whole, 7, second + 2_200_000_000) == [42, 0o40755, 4096, second, second]
    fine = "7 42 755 4096 1000.5000000000 1000.5000000000 1"
    assert _stamp(fine, 7, second + 550_000_000) is None  # within GIT_RACY_NS
    assert _stamp(fine, 7, second + 700_000_000) is not None
    assert _stamp(fine, 8, second + 700_000_000) is None  # another device
    assert _stamp("7 42 755 4096 1000.5000000000 1000.5000000000 300", 7, 2 * second) is None
    assert _stamp("7 42 755 not-a-size 1 1 1", 7, 2 * second) is None


def test_a_batch_s_keying_walk_seeds_its_sandboxes_and_a_run_s_check_makes_no_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch walks each repository before its sandboxes are made: that walk is their
    seed. A run's factory begins the walk the check then takes; a check alone (a
    session's plan) makes no seed nobody mounts."""
    from sandbox_runner.runs.workspace_check import RepositoryTrees, take_files_before
    from sandbox_runner.sandbox.guard_seed import GuardSeed

    monkeypatch.setenv("PLANRUN_HOME", str(tmp_path / "home"))
    alone, batch = tricky(tmp_path / "alone"), tricky(tmp_path / "batch")
    assert take_files_before(alone, None).value is not None
    assert not seed_root().exists() or not any(seed_root().iterdir())
    assert RepositoryTrees().take(alone, None).value is not None  # a dry run's keys
    assert not seed_root().exists() or not any(seed_root().iterdir())
    trees = RepositoryTrees(seed=True)
    assert trees.take(batch, None).value is not None
    [made] = list(seed_root().iterdir())
    seed = GuardSeed(batch)
    seed.start()
    assert seed.path() == made
    # The batch's tree was claimed: a run after it in the same process walks again.
    assert take_files_before(batch, None).value is not None
    assert len(list(seed_root().iterdir())) == 1


def test_a_walk_that_cannot_start_find_walks_in_python_and_a_failed_one_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import Future

    from sandbox_runner.runs.workspace_check import take_files

    root = tricky(tmp_path / "ws")
    expected = dict(records(walk(root).tree.stream))

    def no_process(*args: object, **kwargs: object) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    with monkeypatch.context() as patched:
        patched.setattr(subprocess, "Popen", no_process)
        assert dict(records(walk(root, seed=True).tree.stream)) == expected
    failed: Future[find.Walk] = Future()
    failed.set_exception(OSError(12, "Cannot allocate memory"))
    taken = take_files(root, None, walked=failed)
    assert taken.value is None
    assert taken.note == (
        "files were not compared: listing them before the run failed "
        "([Errno 12] Cannot allocate memory)"
    )


def test_an_interrupted_walk_stops_find(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tricky(tmp_path / "ws")
    started: list[object] = []
    real_popen = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> object:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    def interrupted(*args: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(find, "_consume", interrupted)
    with pytest.raises(KeyboardInterrupt):
        walk(root)
    [process] = started
    assert process.returncode is not None  # type: ignore[attr-defined]


def test_a_walk_that_find_stops_short_of_vouches_for_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory moved while find is deep inside it (past its ring of open parents):
    find goes back up through `..`, finds another parent there and stops, saying "failed
    to read file names ...: No such file or directory". What it had not reached yet is in
    no listing, though those directories' stamps never moved: no seed, no tree."""
    root = tmp_path / "ws"
    moved = root / "g" / "a" / "moved"
    deep = moved / "b" / "c" / "d" / "e" / "f"
    deep.mkdir(parents=True)
    (root / "g" / "a" / "aside").mkdir()
    for number in range(8):  # some of them after `g` and `a` in their listings
        (root / f"repo{number}" / ".git").mkdir(parents=True)
        (root / "g" / f"repo{number}" / ".git").mkdir(parents=True)
    for number in range(500):  # more records than the pipe holds: find waits inside
        (deep / f"{number:03d}{'n' * 240}").write_text("")
    time.sleep(SETTLE_SECONDS)
    real_consume = find._consume

    def move_while_find_waits(process: subprocess.Popen[bytes], deadline: float | None) -> object:
        assert process.stdout is not None
        while _pending(process.stdout.fileno()) < 32_768:  # written past `a`'s entries
            time.sleep(0.01)
        moved.rename(root / "g" / "a" / "aside" / "moved")
        return real_consume(process, deadline)

    monkeypatch.setattr(find, "_consume", move_while_find_waits)
    done = walk(root, seed=True)
    assert done.seed is None
    assert not done.tree.complete and done.tree.digest == ""
    assert done.tree.stopped.startswith("failed to read file names")
    finished: Future[Walk] = Future()
    finished.set_result(done)
    note = take_files(root, None, walked=finished).note
    assert note.startswith("files were not compared: listing them before the run stopped short")
    # A find that died (the OOM killer) wrote as far as its buffers went: the same.
    assert find._stopped(-9, [], b"find: ") == "find ended with status -9"
    assert find._stopped(1, [b"find: './gone': Permission denied"], b"find: ") == ""


def test_an_exclude_gone_as_find_starts_is_no_walk_of_an_empty_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """find does not start without the directory it is told to leave out (a run's, just
    removed): it names it, gone, and walks nothing. That is no tree without entries."""
    root = tricky(tmp_path / "ws")
    real_isdir = os.path.isdir
    monkeypatch.setattr(os.path, "isdir", lambda path: path.endswith("/gone") or real_isdir(path))
    done = walk(root, exclude=root / "gone", seed=True)
    assert not done.tree.complete and done.tree.entries == 0
    assert done.tree.stopped.endswith("gone': No such file or directory")
    assert done.seed is None


def _pending(fd: int) -> int:
    """The bytes waiting in a pipe."""
    (pending,) = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))
    return int(pending)


def test_no_seed_directory_is_made_through_a_link_in_planrun_s_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox_runner.sandbox.host_walk.shared import begin_walk

    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    (home / "cache").mkdir(parents=True)
    elsewhere.mkdir()
    (home / "cache" / "git-seed").symlink_to(elsewhere)
    monkeypatch.setenv("PLANRUN_HOME", str(home))
    shared = begin_walk(tricky(tmp_path / "ws"))
    assert shared.seed_dir is None and list(elsewhere.iterdir()) == []
    assert shared.future.result(30).tree.complete


def test_a_run_takes_as_its_before_only_a_walk_begun_moments_ago(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What changed between an older walk and the run would be reported as changed
    during the run: such a walk still seeds sandboxes, but the check walks again."""
    from sandbox_runner.sandbox.host_walk import shared

    monkeypatch.setenv("PLANRUN_HOME", str(tmp_path / "home"))
    root = tricky(tmp_path / "ws")
    begun = shared.begin_walk(root)
    monkeypatch.setattr(shared, "CLAIM_SECONDS", 0.0)
    assert shared.claim_walk(root, None) is None
    assert shared.seed_directory(root) == begun.seed_dir
    monkeypatch.setattr(shared, "CLAIM_SECONDS", 60.0)
    assert shared.claim_walk(root, None) is begun.future
    assert shared.claim_walk(root, None) is None  # claimed once


def test_a_seed_that_cannot_be_made_is_not_walked_for_again_by_each_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With planrun's home inside the workspace no seed is made (a sandbox writing the
    workspace could forge it): a batch's sixteen factories must not walk sixteen times."""
    from sandbox_runner.sandbox.host_walk import shared

    root = tricky(tmp_path / "ws")
    monkeypatch.setenv("PLANRUN_HOME", str(root / ".planrun"))
    begun: list[Path] = []
    real_begin = shared.begin_walk

    def counted(workspace: Path, *args: Any, **kwargs: Any) -> shared.SharedWalk:
        begun.append(workspace)
        return real_begin(workspace, *args, **kwargs)

    monkeypatch.setattr(shared, "begin_walk", counted)
    assert [shared.seed_directory(root) for _ in range(3)] == [None] * 3
    assert begun == [root]
