"""`planrun verify` as users run it: a real git repository, planrun as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.git_run import git

ROOT = Path(__file__).resolve().parents[2]


def planrun(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "sandbox_runner", "verify", *args],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with four files committed, and a plan naming three of them."""
    repository = tmp_path / "repo"
    (repository / "todo").mkdir(parents=True)
    for name in ("todo/model.py", "todo/cli.py", "todo/store.py", "todo/other.py"):
        (repository / name).write_text("x = 1\n")
    git(repository, "init", "-q", "-b", "main")
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "start")
    return repository


def write_plan(repo: Path) -> Path:
    plan = repo.parent / "plan.md"
    plan.write_text(
        f"---\nbase_commit: {git(repo, 'rev-parse', 'HEAD')}\n---\n# Due dates\n\n"
        "## Detailed Steps\n1. Add the field to `todo/model.py`.\n"
        "2. Print it in todo/cli.py.\n3. Store it in todo/store.py.\n\n"
        "## Critical Files for Implementation\n- todo/model.py - field\n"
        "- todo/cli.py - output\n- todo/store.py - storage\n"
    )
    return plan


def implement(repo: Path, *names: str) -> None:
    for name in names:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(path.read_text() + "y = 2\n" if path.exists() else "new\n")


def test_a_commit_that_follows_the_plan_passes(repo: Path) -> None:
    plan = write_plan(repo)
    implement(repo, "todo/model.py", "todo/cli.py", "todo/store.py")
    done = planrun(repo, str(plan), "--strict")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "follows the plan" in done.stdout
    git(repo, "commit", "-qam", "implement")
    done = planrun(repo, str(plan), "--base", "HEAD~1", "--strict")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_change_to_an_unnamed_file_drifts_and_says_which(repo: Path) -> None:
    plan = write_plan(repo)
    implement(repo, "todo/model.py", "todo/other.py", "notes.txt")
    done = planrun(repo, str(plan))
    assert done.returncode == 1
    assert "drift: todo/other.py: changed, but the plan never names it" in done.stdout
    assert "drift: notes.txt: changed, but the plan never names it" in done.stdout


def test_base_rev_counts_commits_and_head_moved_is_said(repo: Path) -> None:
    plan = write_plan(repo)
    implement(repo, "todo/model.py")
    git(repo, "commit", "-qam", "one")
    implement(repo, "todo/other.py")
    git(repo, "commit", "-qam", "two")
    done = planrun(repo, str(plan), "--base", "main~2")
    assert done.returncode == 1 and "drift: todo/other.py" in done.stdout
    here = planrun(repo, str(plan))
    assert here.returncode == 0, here.stdout
    assert "HEAD moved since the plan was written" in here.stdout
    assert planrun(repo, str(plan), "--strict").returncode == 1


def test_ignore_globs_from_flags_and_the_project_config(repo: Path) -> None:
    plan = write_plan(repo)
    implement(repo, "todo/model.py", "package-lock.json", "gen/api.py")
    assert planrun(repo, str(plan)).returncode == 1  # gen/api.py
    assert planrun(repo, str(plan), "--ignore", "gen/*").returncode == 0
    (repo / ".planrun").mkdir()
    (repo / ".planrun" / "config.yaml").write_text("verify:\n  ignore: ['*']\n")
    done = planrun(repo, str(plan))
    # A repository that widens its own ignore list is a change the plan must name.
    assert done.returncode == 1
    assert "drift: .planrun/config.yaml" in done.stdout and "gen/api.py" not in done.stdout


def test_usage_errors_exit_2_in_one_line(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(repo)
    for args, message in (
        (["no-such-plan"], "is not a plan file"),
        ([str(plan), "--base", "nope"], "names no commit"),
        ([str(plan), "--base", "--output=x"], "is not a revision"),
        ([str(plan), "--repo", str(tmp_path / "plain")], "no such directory"),
    ):
        done = planrun(repo, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    (tmp_path / "plain").mkdir()
    done = planrun(repo, str(plan), "--repo", str(tmp_path / "plain"))
    assert done.returncode == 2 and "is not a git repository" in done.stderr


def test_a_hostile_repository_config_never_runs(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    for key, value in (
        ("core.fsmonitor", str(hook)),
        ("core.hooksPath", str(tmp_path)),
        ("diff.external", str(hook)),
        ("filter.evil.clean", str(hook)),
        ("core.pager", str(hook)),
        ("alias.diff", f"!{hook}"),
    ):
        git(repo, "config", key, value)
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    git(repo, "config", "diff.evil.textconv", str(hook))
    plan = write_plan(repo)
    implement(repo, "todo/model.py", "todo/cli.py", "todo/store.py")
    done = planrun(repo, str(plan), "--json")
    assert done.returncode == 1  # .gitattributes is unnamed
    assert json.loads(done.stdout)["unnamed_files"] == [".gitattributes"]
    assert not marker.exists()
    # The same repository does run the hook when git is run on it as usual.
    git(repo, "status")
    assert marker.exists()


def test_a_partial_clone_never_fetches_a_missing_object(repo: Path, tmp_path: Path) -> None:
    """A repository claiming to be a partial clone would have git fetch what it lacks,
    over ssh to a host the repository names: verify uses no transport at all."""
    marker, ssh = tmp_path / "marker", tmp_path / "bin" / "ssh"
    ssh.parent.mkdir()
    ssh.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    ssh.chmod(0o755)
    plan = write_plan(repo)
    implement(repo, "todo/model.py")
    git(repo, "commit", "-qam", "implement")
    git(repo, "config", "core.repositoryformatversion", "1")
    git(repo, "config", "extensions.partialClone", "origin")
    git(repo, "config", "remote.origin.url", "ssh://attacker.invalid/x")
    tree = git(repo, "rev-parse", "HEAD~1:todo")
    (repo / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{ssh.parent}:{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "sandbox_runner", "verify", str(plan), "--base", "HEAD~1"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert not marker.exists()


def test_alternates_leading_outside_the_repository_are_refused(repo: Path, tmp_path: Path) -> None:
    """The repository's own objects/info/alternates would have git read the objects of
    another repository on the host (one the user cloned privately)."""
    plan = write_plan(repo)
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    alternates = repo / ".git" / "objects" / "info" / "alternates"
    alternates.parent.mkdir(exist_ok=True)
    alternates.write_text(f"{other / '.git' / 'objects'}\n")
    done = planrun(repo, str(plan))
    assert done.returncode == 2 and "leads outside the repository" in done.stderr
    alternates.write_text("# a comment\n")
    assert planrun(repo, str(plan)).returncode == 0


def test_json_shape(repo: Path) -> None:
    plan = write_plan(repo)
    implement(repo, "todo/model.py", "todo/other.py")
    done = planrun(repo, str(plan), "--json")
    report = json.loads(done.stdout)
    assert done.returncode == report["exit_code"] == 1 and report["verdict"] == "drift"
    assert report["schema_version"] == 1 and report["strict"] is False
    assert report["head"] == git(repo, "rev-parse", "HEAD")
    assert report["base"] == {"rev": None, "commit": None}
    assert report["plan_base"]["commit"] == report["head"]
    assert report["plan_base"]["head_moved"] is False
    assert report["plan_base"]["moved_files"] == []
    assert report["changed_files"] == ["todo/model.py", "todo/other.py"]
    assert report["unnamed_files"] == ["todo/other.py"]
    assert {"path": "todo/cli.py", "changed": False} in report["critical_files"]
    assert report["steps"][0] == {
        "number": 1,
        "text": "Add the field to `todo/model.py`.",
        "files": ["todo/model.py"],
        "matched": True,
    }
    kinds = {(r["kind"], r["subject"], r["drift"]) for r in report["reasons"]}
    assert ("unnamed_file", "todo/other.py", True) in kinds
    assert ("critical_file_untouched", "todo/cli.py", False) in kinds


def test_git_metadata_leading_outside_the_repository_is_refused(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(repo)
    objects = repo / ".git" / "objects"
    objects.rename(tmp_path / "objects")
    objects.symlink_to(tmp_path / "objects")
    done = planrun(repo, str(plan))
    assert done.returncode == 2 and "leads outside the repository" in done.stderr
    objects.unlink()
    (tmp_path / "objects").rename(objects)
    (repo / ".git").rename(tmp_path / "elsewhere.git")
    (repo / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere.git'}\n")
    done = planrun(repo, str(plan))
    assert done.returncode == 2 and "points outside the repository" in done.stderr


def test_a_submodule_counts_by_its_commit_and_its_config_never_runs(
    repo: Path, tmp_path: Path
) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "f").write_text("a\n")
    git(sub, "init", "-q")
    git(sub, "add", "f")
    git(sub, "commit", "-qm", "sub")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendor/sub")
    git(repo, "commit", "-qm", "add the submodule")
    plan = write_plan(repo)
    marker, hook = tmp_path / "marker", tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(repo / "vendor" / "sub", "config", "core.fsmonitor", str(hook))
    implement(repo, "todo/model.py", "vendor/sub/f")
    assert planrun(repo, str(plan)).returncode == 0  # its working tree is not looked into
    git(repo / "vendor" / "sub", "-c", "core.fsmonitor=false", "commit", "-qam", "moved")
    done = planrun(repo, str(plan))
    assert done.returncode == 1 and "drift: vendor/sub: changed" in done.stdout
    assert not marker.exists()
    git(repo, "status")  # git as usual looks into the submodule, with its config
    assert marker.exists()


def test_a_base_that_changed_the_plans_files_since_it_was_written_is_said(repo: Path) -> None:
    plan = write_plan(repo)
    implement(repo, "todo/other.py")
    git(repo, "commit", "-qam", "unrelated on main")
    assert "base_moved_on" not in planrun(repo, str(plan), "--base", "main", "--json").stdout
    implement(repo, "todo/store.py")
    git(repo, "commit", "-qam", "store.py changed on main")
    git(repo, "checkout", "-qb", "feature")
    implement(repo, "todo/model.py")
    git(repo, "commit", "-qam", "implement")
    done = planrun(repo, str(plan), "--base", "main", "--strict")
    assert "warning: todo/store.py: changed on the base since the plan was written" in done.stdout
    assert "todo/other.py" not in done.stdout
