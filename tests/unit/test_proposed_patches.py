"""Proposed patches: the diff of a refused Write or Edit, read safely beneath the repository."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox_runner.plans.proposed_patches import (
    MAX_PATCHES,
    ProposedPatch,
    keep,
    patches_from,
    propose,
    repository_path,
)
from sandbox_runner.plans.report_patches import fenced, patches_markdown


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir(parents=True)
    (tmp_path / "src/app.py").write_text("a = 1\nb = 2\n")
    return tmp_path


def test_an_edit_is_a_diff_against_the_file(tmp_path: Path) -> None:
    edit = {"file_path": "/workspace/src/app.py", "old_string": "b = 2", "new_string": "b = 3"}
    patch = propose("Edit", edit, str(_repo(tmp_path)), "refused")
    assert patch is not None and patch.file == "src/app.py"
    assert patch.diff.startswith("--- a/src/app.py\n+++ b/src/app.py\n")
    assert "-b = 2\n+b = 3\n" in patch.diff
    assert patch.tool_input["file_path"] == "src/app.py"


def test_what_is_no_patch_is_not_kept(tmp_path: Path) -> None:
    repo = str(_repo(tmp_path))
    missing = {"file_path": "/workspace/src/app.py", "old_string": "zzz", "new_string": "y"}
    assert propose("Edit", missing, repo, "r") is None
    assert propose("Write", {"file_path": "/plan/other.md", "content": "x"}, repo, "r") is None
    same = {"file_path": "/workspace/src/app.py", "content": "a = 1\nb = 2\n"}
    assert propose("Write", same, repo, "r") is None
    assert propose("Bash", {"command": "ls"}, repo, "r") is None


def test_a_link_out_of_the_repository_is_not_read(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    secret = tmp_path / "secret.txt"
    secret.write_text("token=hunter2\n")
    os.symlink(secret, repo / "link.txt")
    write = {"file_path": "/workspace/link.txt", "content": "changed\n"}
    assert propose("Write", write, str(repo), "r") is None


def test_repository_paths_never_climb_out() -> None:
    assert repository_path("/workspace/a/../b.py") == "b.py"
    assert repository_path("/workspace/../etc/passwd") is None
    assert repository_path("/workspace") is None


def test_the_count_is_bounded_and_duplicates_dropped() -> None:
    patches: list[ProposedPatch] = []
    for number in range(MAX_PATCHES + 5):
        keep(patches, ProposedPatch(f"f{number}", f"diff {number}", "Write", "r"))
    assert len(patches) == MAX_PATCHES
    assert not keep(patches[:1], ProposedPatch("f0", "diff 0", "Write", "r"))


def test_edited_metadata_reads_defensively() -> None:
    good = {"file": "a", "diff": "d", "tool": "Edit", "reason": "r"}
    assert [p.file for p in patches_from([good, {"file": 3}, "x"])] == ["a"]
    assert patches_from("nope") == []


def test_report_md_fences_survive_backticks() -> None:
    block = fenced("+ x = '```'\n")
    assert block.startswith("````diff\n") and block.endswith("\n````")
    report = {"plans": [{"label": "plan", "proposed_patches": [
        {"file": "a.py", "diff": "+x\n", "tool": "Edit", "reason": "r"}]}]}  # fmt: skip
    assert "## Proposed patches" in patches_markdown(report)
    assert patches_markdown({"plans": [{"label": "p", "proposed_patches": []}]}) == ""


def test_secrets_stay_out_of_the_patches(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / ".env").write_text("API_TOKEN=abc\n")
    env = {"file_path": "/workspace/.env", "old_string": "abc", "new_string": "xyz"}
    assert propose("Edit", env, str(repo), "r") is None
    key = {"file_path": "/workspace/.ssh/config", "content": "Host x\n"}
    assert propose("Write", key, str(repo), "r") is None
    leaked = "aws_secret_access_key = AKIAABCDEFGHIJKLMNOP1234567890abcdefghij\n"
    patch = propose("Write", {"file_path": "/workspace/conf.py", "content": leaked}, str(repo), "r")
    assert patch is not None and "AKIAABCDEFGHIJKLMNOP" not in patch.diff


def test_a_file_the_sandbox_cannot_read_makes_no_patch(tmp_path: Path) -> None:
    """propose reads as the host user: a refused Write would put the whole file in the
    plan as removed lines, and an Edit's old text is an oracle on it. So what the sandbox
    is not shown (the host's own .git config, a file others cannot read) makes none."""
    repo = _repo(tmp_path)
    (repo / ".git").mkdir()
    (repo / ".git/config").write_text("[http]\n\textraHeader = X-Auth: s3cr3t\n")
    overwrite = {"file_path": "/workspace/.git/config", "content": "x\n"}
    assert propose("Write", overwrite, str(repo), "r") is None
    guess = {"file_path": "/workspace/.git/config", "old_string": "s3", "new_string": "x"}
    assert propose("Edit", guess, str(repo), "r") is None
    (repo / "src/secret.py").write_text("token = 'hunter2'\n")
    (repo / "src/secret.py").chmod(0o600)
    secret = {"file_path": "/workspace/src/secret.py", "content": "x\n"}
    assert propose("Write", secret, str(repo), "r") is None
    (repo / "src/link.py").symlink_to("secret.py")
    linked = {"file_path": "/workspace/src/link.py", "content": "x\n"}
    assert propose("Write", linked, str(repo), "r") is None
    (repo / "src/secret.py").chmod(0o644)
    (repo / "src").chmod(0o750)
    try:
        assert propose("Write", secret, str(repo), "r") is None
    finally:
        (repo / "src").chmod(0o755)
    patch = propose("Write", secret, str(repo), "r")
    assert patch is not None and "-token = 'hunter2'" in patch.diff
