"""Facts read from the repository on the host: git HEAD and the tree fingerprint."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox_runner.plans.workspace import git_head, git_metadata_problem, tree_fingerprint

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
    assert len(tree_fingerprint(tmp_path)) == 64
