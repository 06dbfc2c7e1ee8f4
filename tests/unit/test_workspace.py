"""Facts read from the repository on the host: git HEAD, the tree fingerprint, the
before/after comparison and what the sandbox user can read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox_runner.runs.workspace import (
    git_head,
    git_metadata_problem,
    tree_fingerprint,
)
from sandbox_runner.sandbox.host_paths import SANDBOX_GID, SANDBOX_UID, sandbox_user
from sandbox_runner.sandbox.host_walk import find
from sandbox_runner.sandbox.readable import check_readable
from tests.support.deep_tree import deep_tree

SHA = "0123456789abcdef0123456789abcdef01234567"
HOST_SHA = "fedcba9876543210fedcba9876543210fedcba98"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git = tmp_path / "repo" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text(SHA + "\n")
    return tmp_path / "repo"


@pytest.fixture
def host_file(tmp_path: Path) -> Path:
    secret = tmp_path / "host-secret"
    secret.write_text(HOST_SHA + "\n")
    return secret


def test_head_is_read_from_the_files(repo: Path) -> None:
    assert git_head(repo) == SHA
    assert git_metadata_problem(repo) == ""


def test_head_or_a_ref_linking_to_a_host_file_is_not_read(repo: Path, host_file: Path) -> None:
    ref = repo / ".git" / "refs" / "heads" / "main"
    ref.unlink()
    ref.symlink_to(host_file)
    assert git_head(repo) is None
    head = repo / ".git" / "HEAD"
    head.unlink()
    head.symlink_to(host_file)
    assert git_head(repo) is None


def test_gitdir_and_commondir_leading_outside_are_not_followed(
    repo: Path, tmp_path: Path, host_file: Path
) -> None:
    other = tmp_path / "other-git"
    (other / "refs" / "heads").mkdir(parents=True)
    (other / "HEAD").write_text(HOST_SHA + "\n")
    (other / "refs" / "heads" / "main").write_text(HOST_SHA + "\n")
    (repo / ".git" / "refs" / "heads" / "main").unlink()
    (repo / ".git" / "commondir").write_text(str(other))
    assert git_head(repo) is None
    os.rename(repo / ".git", tmp_path / "moved")
    (repo / ".git").write_text(f"gitdir: {other}\n")
    assert git_head(repo) is None
    assert "points outside the repository" in git_metadata_problem(repo)
    (repo / ".git").unlink()
    (repo / ".git").symlink_to(other)
    assert git_head(repo) is None
    assert "leads outside the repository" in git_metadata_problem(repo)


def test_fingerprint_survives_links_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As under /proc when planning "/": readlink of /proc/1/cwd is refused.
    (tmp_path / "cwd").symlink_to("/")
    real_readlink = os.readlink

    def refuse(path: str | os.PathLike[str]) -> str:
        if str(path).endswith("cwd"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_readlink(path)

    monkeypatch.setattr(os, "readlink", refuse)
    monkeypatch.setattr(find, "gnu_find", lambda: None)  # the walk in Python reads links
    fingerprint = tree_fingerprint(tmp_path)
    assert fingerprint is not None and fingerprint.startswith("v2:") and len(fingerprint) == 67


def _tree(root: Path, files: int, mode: int) -> Path:
    for n in range(files):
        path = root / f"dir{n % 3}" / f"file{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
        path.chmod(mode)
    return root


def test_files_the_sandbox_user_cannot_read_are_counted(tmp_path: Path) -> None:
    """Mode-0600 files owned by another uid were silently unreadable."""
    root = _tree(tmp_path / "repo", 9, 0o600)
    (root / "dir0" / "file0.py").chmod(0o644)
    owner = os.stat(root).st_uid
    found = check_readable(root, owner + 1, owner + 1)
    assert (found.unreadable, found.checked, found.complete) == (8, 12, True)
    assert found.examples[0].startswith("dir")
    assert found.summary(owner + 1) == (
        f"8 of 12 files and directories checked are not readable by the sandbox user "
        f"(uid {owner + 1}), e.g. {', '.join(found.examples)}"
    )
    assert check_readable(root, owner, owner).unreadable == 0


def test_the_check_is_bounded_for_huge_trees(tmp_path: Path) -> None:
    root = _tree(tmp_path / "repo", 60, 0o600)
    owner = os.stat(root).st_uid
    found = check_readable(root, owner + 1, owner + 1, max_entries=20)
    assert found.checked == 20 and not found.complete
    assert "a sample of the first 20" in found.summary(owner + 1)
    timed = check_readable(root, owner + 1, owner + 1, time_limit=0.0)
    assert not timed.complete


def test_a_workspace_1100_directories_deep_is_checked_to_the_bottom(tmp_path: Path) -> None:
    with deep_tree(tmp_path / "repo", 1100) as bottom:
        (bottom / "secret.py").write_text("x = 1\n")
        (bottom / "secret.py").chmod(0o600)
        owner = os.stat(tmp_path / "repo").st_uid
        found = check_readable(tmp_path / "repo", owner + 1, owner + 1, time_limit=60)
    assert (found.checked, found.unreadable, found.complete) == (1101, 1, True)
    assert found.examples == ["d/" * 1100 + "secret.py"]


def test_an_untraversable_workspace_root_is_unreadable(tmp_path: Path) -> None:
    root = _tree(tmp_path / "repo", 2, 0o644)
    root.chmod(0o700)
    owner = os.stat(root).st_uid
    found = check_readable(root, owner + 1, owner + 1)
    assert not found.root_readable


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_as_root_the_sandbox_runs_as_the_workspace_owner(tmp_path: Path) -> None:
    owned, root_owned = tmp_path / "owned", tmp_path / "root-owned"
    owned.mkdir()
    root_owned.mkdir()
    os.chown(owned, 1234, 1235)
    os.chown(root_owned, 0, 0)
    assert sandbox_user(owned) == (1234, 1235)
    assert sandbox_user(root_owned) == (SANDBOX_UID, SANDBOX_GID)
