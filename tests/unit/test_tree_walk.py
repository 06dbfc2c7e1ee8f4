"""The shared directory walk: top-down in name order, links never followed, bounded when
asked, and every host-side walker through it reaching the bottom of a tree deeper than
Python's recursion limit."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from sandbox_runner.batch.shipping.repo_files import shipped_files
from sandbox_runner.sandbox.image_setup import clear_privilege_bits
from sandbox_runner.tree_walk import TreeTooLargeError, remove_tree, walk
from sandbox_runner.verify.git_copy import private_git
from tests.support.deep_tree import deep_tree

DEPTH = 1100
"""Deeper than Python's default recursion limit (1000)."""
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
GIT_ENV |= {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
GIT_ENV |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def make_files(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)


def test_directories_come_top_down_in_name_order_each_subtree_before_the_next(
    tmp_path: Path,
) -> None:
    make_files(tmp_path, "b/z.txt", "a/y/x.txt", "a/w.txt", "c.txt")
    order = [(d.relative, [e.name for e in d.entries]) for d in walk(tmp_path)]
    assert order == [
        ("", ["a", "b", "c.txt"]),
        ("a", ["w.txt", "y"]),
        (os.path.join("a", "y"), ["x.txt"]),
        ("b", ["z.txt"]),
    ]


def test_a_link_to_a_directory_is_listed_but_never_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    make_files(outside, "secret.txt")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "link").symlink_to(outside)
    directories = list(walk(tmp_path / "tree"))
    assert [d.relative for d in directories] == [""]
    assert [e.name for e in directories[0].entries] == ["link"]


def test_a_directory_taken_out_of_below_is_not_entered(tmp_path: Path) -> None:
    make_files(tmp_path, "keep/a.txt", "skip/b.txt")
    seen = []
    for directory in walk(tmp_path):
        seen.append(directory.relative)
        directory.below = [e for e in directory.below if e.name != "skip"]
    assert seen == ["", "keep"]


def test_more_entries_than_the_bound_stop_the_walk(tmp_path: Path) -> None:
    make_files(tmp_path, *(f"d{i}/f.txt" for i in range(5)))
    assert len([e for d in walk(tmp_path, max_entries=10) for e in d.entries]) == 10
    with pytest.raises(TreeTooLargeError, match="more than 9 files and directories"):
        list(walk(tmp_path, max_entries=9))


def test_a_directory_that_cannot_be_listed_raises_unless_skipped(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list(walk(tmp_path / "gone"))
    listed = [(d.relative, d.entries) for d in walk(tmp_path / "gone", skip_unlistable=True)]
    assert listed == [("", [])]


def test_remove_tree_removes_links_and_never_what_they_point_to(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    make_files(outside, "kept.txt")
    make_files(tmp_path / "tree", "a/b/c.txt")
    (tmp_path / "tree" / "a" / "to-dir").symlink_to(outside)
    (tmp_path / "tree" / "to-file").symlink_to(outside / "kept.txt")
    remove_tree(tmp_path / "tree")
    assert not (tmp_path / "tree").exists()
    assert (outside / "kept.txt").read_text() == "kept.txt"


def test_walk_and_remove_tree_reach_the_bottom_of_a_deep_tree(tmp_path: Path) -> None:
    with deep_tree(tmp_path / "deep", DEPTH) as bottom:
        (bottom / "bottom.txt").write_text("x")
        relatives = [d.relative for d in walk(tmp_path / "deep")]
        assert len(relatives) == DEPTH + 1
        assert relatives[-1] == os.path.join(*["d"] * DEPTH)
    assert not (tmp_path / "deep").exists()  # deep_tree removes it with remove_tree


def test_shipped_files_reach_the_bottom_of_a_deep_tree(tmp_path: Path) -> None:
    with deep_tree(tmp_path / "deep", DEPTH) as bottom:
        (bottom / "bottom.txt").write_text("x")
        names = [shipped.name for shipped in shipped_files(tmp_path / "deep")]
    assert names[-1] == "d/" * DEPTH + "bottom.txt"
    assert len(names) == DEPTH + 2


def test_verify_copies_refs_nested_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    make_files(repo, "a.txt")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True)
    head = (repo / ".git" / "refs" / "heads").iterdir().__next__().read_text().strip()
    with deep_tree(repo / ".git" / "refs" / "deep", DEPTH) as bottom:
        (bottom / "tip").write_text(head + "\n")
        with private_git(repo) as git:
            status, out = git.run("rev-parse", "--verify", "refs/deep/" + "d/" * DEPTH + "tip")
            private = git.private.git_dir
        assert (status, out.strip()) == (0, head)
        assert not private.exists()  # removed without recursion


def test_setuid_bits_are_cleared_to_the_bottom_of_a_deep_tree(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("x")
    outside.chmod(0o4755)
    with deep_tree(tmp_path / "deep", DEPTH) as bottom:
        (bottom / "tool").write_text("x")
        (bottom / "tool").chmod(0o4755)
        (bottom / "link").symlink_to(outside)
        assert clear_privilege_bits(str(tmp_path / "deep")) == 1
        assert stat.S_IMODE((bottom / "tool").stat().st_mode) == 0o755
    assert outside.stat().st_mode & stat.S_ISUID  # a link is not followed
