"""The private git directory both host-side git stores (verify, /undo) are made with:
nothing of the caller's environment, the user's config or the repository runs git."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox_runner.git_private import GitError, check_alternates, make_private_git

HOSTILE = "[core]\n\tfsmonitor = touch {marker}\n[protocol]\n\tallow = always\n"


def test_git_ignores_the_callers_git_variables_user_config_and_relative_path_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, home = tmp_path / "repo", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    (workspace / "a.txt").write_text("a")
    planted = workspace / "git"  # found through "." in PATH, were it searched
    planted.write_text(f"#!/bin/sh\ntouch {tmp_path / 'planted-ran'}\n")
    planted.chmod(0o755)
    (home / ".gitconfig").write_text(HOSTILE.format(marker=tmp_path / "user-config-ran"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", ".:" + os.environ["PATH"])
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='touch {tmp_path / 'env-ran'}'")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    git = make_private_git(
        tmp_path / "private", workspace, config="", attributes="", alternate=None
    )
    git.run("add", "-A")
    _, out = git.run("status", "--porcelain")
    assert out == b"A  a.txt\nA  git\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["home", "private", "repo"]


def test_the_forced_keys_win_over_the_callers_config(tmp_path: Path) -> None:
    hostile = HOSTILE.format(marker=tmp_path / "ran")
    git = make_private_git(
        tmp_path / "private", tmp_path, config=hostile, attributes="", alternate=None
    )
    for key, value in (("core.fsmonitor", b"false\n"), ("protocol.allow", b"never\n")):
        assert git.run("config", "--get", key, work=False)[1] == value
    assert git.run("config", "--get", "core.hooksPath", work=False)[1] == b"/dev/null\n"


def test_made_again_the_store_keeps_its_head_and_takes_the_new_settings(tmp_path: Path) -> None:
    private, other = tmp_path / "private", tmp_path / "objects"
    other.mkdir()
    make_private_git(private, tmp_path, config="", attributes="* -text\n", alternate=other)
    assert (private / "objects" / "info" / "alternates").read_text() == f"{other}\n"
    (private / "HEAD").write_text("ref: refs/heads/kept\n")
    make_private_git(private, tmp_path, config="", attributes="* -diff\n", alternate=None)
    assert not (private / "objects" / "info" / "alternates").exists()
    assert (private / "info" / "attributes").read_text() == "* -diff\n"
    assert (private / "HEAD").read_text() == "ref: refs/heads/kept\n"


def test_alternates_inside_the_repository_pass_and_any_leading_outside_are_refused(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    objects, inner = repo / ".git" / "objects", repo / "vendor" / "objects"
    for store in (objects, inner):
        (store / "info").mkdir(parents=True)
    (objects / "info" / "alternates").write_text(f"# a comment\n{inner}\n")
    check_alternates(repo, objects)
    (inner / "info" / "alternates").write_text(f"{tmp_path / 'other' / 'objects'}\n")
    with pytest.raises(GitError, match="leads outside the repository"):
        check_alternates(repo, objects)  # two steps away is still followed by git
